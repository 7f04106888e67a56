package temporalx

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/internal/platform/backoff"
)

// BinaryBuildID is the build id of the running binary: its vcs.revision,
// with "-dirty" when the tree had changes (vcs.modified). ok is false when
// the binary carries no revision (go test, go run, a build outside a
// repository or with -buildvcs=false).
func BinaryBuildID() (id string, ok bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	return buildIDOf(info.Settings)
}

func buildIDOf(settings []debug.BuildSetting) (string, bool) {
	var rev string
	var dirty bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "", false
	}
	if dirty {
		rev += "-dirty"
	}
	return rev, true
}

// Versioned returns the options of a worker that polls as version v, with
// no default versioning behavior: every workflow type registers its own
// (the SDK refuses one that does not).
func Versioned(v worker.WorkerDeploymentVersion) worker.DeploymentOptions {
	return worker.DeploymentOptions{UseVersioning: true, Version: v}
}

// Promotion is what PromoteVersion did.
type Promotion struct {
	// Set: v became the current version. Otherwise Current is the current
	// version that stays (nil: unversioned workers).
	Set     bool
	Current *worker.WorkerDeploymentVersion
}

// PromoteVersion makes v its deployment's current version when the
// deployment has none, or when the current version was chosen before v
// first polled (v is a newer build nobody has decided about); a current
// version chosen after v appeared (a rollback to an older build, or to
// unversioned workers) stands.
// The server knows v only once one of its workers polls, so PromoteVersion
// waits (until ctx ends) for v to be listed. Concurrent workers are
// serialised by the deployment's conflict token: the loser decides again.
func PromoteVersion(ctx context.Context, c client.Client, v worker.WorkerDeploymentVersion, identity string) (Promotion, error) {
	h := c.WorkerDeploymentClient().GetHandle(v.DeploymentName)
	wait := 100 * time.Millisecond
	for {
		d, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		var notFound *serviceerror.NotFound
		if err != nil && !errors.As(err, &notFound) {
			return Promotion{}, fmt.Errorf("describe worker deployment %s: %w", v.DeploymentName, err)
		}
		promote, listed := shouldPromote(d.Info, v)
		if !listed {
			if err := backoff.Sleep(ctx, wait); err != nil {
				return Promotion{}, fmt.Errorf("worker deployment version %s:%s not listed by the server: %w", v.DeploymentName, v.BuildID, err)
			}
			wait = min(2*wait, 2*time.Second)
			continue
		}
		if !promote {
			return Promotion{Current: d.Info.RoutingConfig.CurrentVersion}, nil
		}
		_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{
			BuildID: v.BuildID, ConflictToken: d.ConflictToken, Identity: identity})
		if err == nil {
			return Promotion{Set: true, Current: &v}, nil
		}
		var failed *serviceerror.FailedPrecondition
		if !errors.As(err, &failed) {
			return Promotion{}, fmt.Errorf("set current version %s:%s: %w", v.DeploymentName, v.BuildID, err)
		}
		// Another worker changed the deployment since Describe: decide again.
		if err := backoff.Sleep(ctx, wait); err != nil {
			return Promotion{}, fmt.Errorf("set current version %s:%s: %w", v.DeploymentName, v.BuildID, err)
		}
	}
}

// shouldPromote applies PromoteVersion's rule to info (listed false: the
// server does not list v yet). A current version chosen after v first
// polled stands, unversioned workers (nil) included.
func shouldPromote(info client.WorkerDeploymentInfo, v worker.WorkerDeploymentVersion) (promote, listed bool) {
	for _, s := range info.VersionSummaries {
		if s.Version != v {
			continue
		}
		rc := info.RoutingConfig
		if cur := rc.CurrentVersion; cur != nil && *cur == v {
			return false, true
		}
		return !rc.CurrentVersionChangedTime.After(s.CreateTime), true
	}
	return false, false
}
