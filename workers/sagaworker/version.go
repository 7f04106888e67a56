package sagaworker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/temporalx"
	"github.com/seckill/seckill/workers"
)

// promoteTimeout bounds the wait for the server to list a new version
// (it does once the worker's first poll reaches it: well under a second here).
const promoteTimeout = time.Minute

// Version is the worker deployment version the saga part polls as:
// cfg's deployment name and SECKILL_BUILD_ID, else the binary's revision.
// versioned is false when versioning is off or no build id is known.
func Version(cfg config.Config) (v worker.WorkerDeploymentVersion, versioned bool) {
	id := cfg.BuildID
	if id == "" {
		id, _ = temporalx.BinaryBuildID()
	}
	v = worker.WorkerDeploymentVersion{DeploymentName: cfg.DeploymentName(), BuildID: id}
	return v, cfg.WorkerVersioning && id != ""
}

// logVersion says at start which version the worker is (or why it is
// unversioned), and exports it as seckill_saga_worker_info.
func logVersion(d workers.Deps, v worker.WorkerDeploymentVersion, versioned bool) {
	switch {
	case versioned:
		d.Log.Info("saga_worker.version", "deployment", v.DeploymentName, "build_id", v.BuildID,
			"set_current", d.Config.WorkerSetCurrent)
	case !d.Config.WorkerVersioning:
		d.Log.Info("saga_worker.unversioned", "reason", "SECKILL_WORKER_VERSIONING=false")
	default:
		d.Log.Warn("saga_worker.unversioned", "reason", "no SECKILL_BUILD_ID and the binary carries no vcs.revision")
	}
	if d.Registry == nil {
		return
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "seckill_saga_worker_info",
		Help: "The saga worker's Temporal worker deployment version (always 1; versioned=false: unversioned)."},
		[]string{"deployment", "build_id", "versioned"})
	var are prometheus.AlreadyRegisteredError
	if err := d.Registry.Register(g); errors.As(err, &are) {
		g = are.ExistingCollector.(*prometheus.GaugeVec)
	}
	g.WithLabelValues(v.DeploymentName, v.BuildID, fmt.Sprint(versioned)).Set(1)
}

// promote applies SECKILL_WORKER_SET_CURRENT=auto (temporalx.PromoteVersion)
// and logs the outcome.
func promote(ctx context.Context, d workers.Deps, v worker.WorkerDeploymentVersion) error {
	pctx, cancel := context.WithTimeout(ctx, promoteTimeout)
	defer cancel()
	host, _ := os.Hostname()
	p, err := temporalx.PromoteVersion(pctx, d.Temporal, v, fmt.Sprintf("seckill-worker %d@%s", os.Getpid(), host))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil // stopped while waiting
	case err != nil:
		return fmt.Errorf("sagaworker: %w", err)
	case p.Set:
		d.Log.Info("saga_worker.current_version_set", "deployment", v.DeploymentName, "build_id", v.BuildID)
	case p.Current == nil:
		d.Log.Warn("saga_worker.current_version_kept", "deployment", v.DeploymentName, "build_id", v.BuildID,
			"current_build_id", "", "note", "unversioned workers are current: this worker gets no new workflow")
	case *p.Current != v:
		d.Log.Info("saga_worker.current_version_kept", "deployment", v.DeploymentName, "build_id", v.BuildID,
			"current_build_id", p.Current.BuildID)
	}
	return nil
}
