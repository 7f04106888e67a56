package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill/seckill/internal/platform/skuloop"
	"github.com/seckill/seckill/lua"
)

// SKUNotReconciled is the report entry of a SKU a run could not check (its
// Redis shard down, a key of the wrong type): nothing was decided about it;
// the next run tries again. Its Action is ActionCheckFailed, its Detail the
// error; no repair_task is written.
const SKUNotReconciled = "SKU_NOT_RECONCILED"

// ActionCheckFailed: the object could not be checked in this run.
const ActionCheckFailed = "CHECK_FAILED"

// listSKUs is every SKU of activityID (0: of every sale that ended less than
// a week ago or is running).
func (r *Reconciler) listSKUs(ctx context.Context, activityID int64) ([]lua.SKU, error) {
	rows, err := r.pool.Query(ctx, `
		SELECT i.activity_id, i.sku_id, i.buckets FROM sku_inventory i JOIN sale_activity a ON a.activity_id = i.activity_id
		WHERE ($1::bigint = 0 OR i.activity_id = $1) AND a.ends_at > clock_timestamp() - interval '7 days'
		ORDER BY 1, 2`, activityID)
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", err)
	}
	defer rows.Close()
	var skus []lua.SKU
	for rows.Next() {
		var k lua.SKU
		if err := rows.Scan(&k.ActivityID, &k.SKUID, &k.Buckets); err != nil {
			return nil, err
		}
		skus = append(skus, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list skus: %w", err)
	}
	return skus, nil
}

// skuOnce is sku unless a Redis node of one of k's buckets was found
// unreachable earlier in the pass.
func (r *Reconciler) skuOnce(ctx context.Context, pass *skuloop.Pass, k lua.SKU, rep *Report) (pgD, redisD, crossD int64, err error) {
	keys := make([]string, 0, max(k.Buckets, 1))
	for _, b := range k.All() {
		keys = append(keys, b.Counter())
	}
	if err := pass.Unreachable(ctx, keys...); err != nil {
		return 0, 0, 0, err
	}
	return r.sku(ctx, k, rep)
}

// skuFailed records a SKU the run could not check: counted and logged by
// pass, and a SKUNotReconciled entry in the report.
func (r *Reconciler) skuFailed(rep *Report, pass *skuloop.Pass, k lua.SKU, err error) {
	pass.Fail(k.ActivityID, k.SKUID, 0, err)
	rep.Anomalies = append(rep.Anomalies, Anomaly{Type: SKUNotReconciled, Object: fmt.Sprintf("sku:%d:%d", k.ActivityID, k.SKUID),
		Action: ActionCheckFailed, Detail: err.Error()})
}

// backstops runs the PostgreSQL-side checks of a run, each whatever the
// others and the SKUs' Redis did, and returns their errors.
func (r *Reconciler) backstops(ctx context.Context, rep *Report, activityID int64) []error {
	var errs []error
	for _, b := range []struct {
		name string
		run  func() error
	}{
		{"outbox", func() error { return r.outbox(ctx, rep) }},
		{"lost sagas", func() error { return r.orders(ctx, rep, activityID) }},
		{"refunds", func() error { return r.refunds(ctx, rep) }},
		{"provider intents", func() error { return r.intents(ctx, rep) }},
	} {
		if err := b.run(); err != nil {
			r.log.Error("reconcile.backstop_failed", "backstop", b.name, "error", err)
			errs = append(errs, fmt.Errorf("%s: %w", b.name, err))
		}
	}
	return errs
}

// FailedSKUs lists the SKUs err (from Run) says were not reconciled, as
// "sku:activity:sku"; nil when every SKU was.
func FailedSKUs(err error) []string {
	var e *skuloop.Error
	if !errors.As(err, &e) {
		return nil
	}
	out := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		out[i] = f.Object()
	}
	return out
}

// join is errors.Join that returns a lone error as it is (so that a run
// whose only failures are SKUs returns the *skuloop.Error itself).
func join(errs ...error) error {
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return errors.Join(out...)
}
