package temporalx

import (
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

func TestShouldPromote(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	old := worker.WorkerDeploymentVersion{DeploymentName: "seckill-saga", BuildID: "old"}
	v := worker.WorkerDeploymentVersion{DeploymentName: "seckill-saga", BuildID: "new"}
	summaries := []client.WorkerDeploymentVersionSummary{{Version: old, CreateTime: t0}, {Version: v, CreateTime: t0.Add(time.Hour)}}
	info := func(cur *worker.WorkerDeploymentVersion, changed time.Time) client.WorkerDeploymentInfo {
		return client.WorkerDeploymentInfo{VersionSummaries: summaries,
			RoutingConfig: client.WorkerDeploymentRoutingConfig{CurrentVersion: cur, CurrentVersionChangedTime: changed}}
	}
	cases := []struct {
		name            string
		info            client.WorkerDeploymentInfo
		promote, listed bool
	}{
		{"not listed yet", client.WorkerDeploymentInfo{VersionSummaries: summaries[:1]}, false, false},
		{"no current version ever", info(nil, time.Time{}), true, true},
		{"already current", info(&v, t0.Add(2*time.Hour)), false, true},
		{"current chosen before v appeared", info(&old, t0.Add(time.Minute)), true, true},
		{"current chosen after v appeared (rollback)", info(&old, t0.Add(2*time.Hour)), false, true},
		{"unversioned chosen before v appeared", info(nil, t0.Add(time.Minute)), true, true},
		{"unversioned chosen after v appeared", info(nil, t0.Add(2*time.Hour)), false, true},
	}
	for _, c := range cases {
		if promote, listed := shouldPromote(c.info, v); promote != c.promote || listed != c.listed {
			t.Errorf("%s: shouldPromote = %v, %v; want %v, %v", c.name, promote, listed, c.promote, c.listed)
		}
	}
}
