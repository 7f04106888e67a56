package config

import "strings"

// Values of SECKILL_WORKER_SET_CURRENT.
const (
	SetCurrentAuto  = "auto"
	SetCurrentNever = "never"
)

// DeploymentName is the saga worker's Temporal worker deployment:
// SECKILL_WORKER_DEPLOYMENT, or the task queue's name when unset (each task
// queue is one fleet, so the test and chaos queues never move another's
// current version).
func (c Config) DeploymentName() string {
	if c.WorkerDeployment != "" {
		return c.WorkerDeployment
	}
	return c.TemporalTaskQueue
}

// validateVersioning checks the worker deployment settings: the server
// refuses a deployment name with '.' or ':' (they separate it from the build
// id in a version string).
func (c Config) validateVersioning() error {
	if c.WorkerVersioning && strings.ContainsAny(c.DeploymentName(), ".:") {
		v, val := "SECKILL_WORKER_DEPLOYMENT", c.WorkerDeployment
		if c.WorkerDeployment == "" {
			v, val = "SECKILL_TEMPORAL_TASK_QUEUE", c.TemporalTaskQueue
		}
		return &FieldError{Var: v, Value: val, Reason: "a worker deployment name must not contain '.' or ':' (set SECKILL_WORKER_DEPLOYMENT)"}
	}
	if c.BuildID != "" && strings.TrimSpace(c.BuildID) != c.BuildID {
		return &FieldError{Var: "SECKILL_BUILD_ID", Value: c.BuildID, Reason: "must not begin or end with spaces"}
	}
	switch c.WorkerSetCurrent {
	case SetCurrentAuto, SetCurrentNever:
	default:
		return &FieldError{Var: "SECKILL_WORKER_SET_CURRENT", Value: c.WorkerSetCurrent, Reason: "must be auto or never"}
	}
	return nil
}
