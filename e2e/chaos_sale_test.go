package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/invariants"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workers/sagastarter"
	"github.com/seckill/seckill/workflows"
)

// The sale every run plays, small enough to settle in seconds and shaped to
// pass every failpoint: 4 buyers for 3 units in Redis but 2 in PostgreSQL
// (one reservation is rejected and compensated), one buyer pays through the
// gateway's callback, the other order expires and is cancelled.
const (
	saleSKU        = 1
	saleBuyers     = 4
	saleRedisStock = 3
	salePGStock    = 2
	salePayTimeout = 2 // seconds
)

// Sale is one sale of a run and what became of it.
type Sale struct {
	ActivityID int64
	Started    time.Time
	// Disturbed is the last crash or kill that hit the sale, Converged when it
	// settled (both read and written under mu: the harness disturbs sales while
	// they settle).
	mu        sync.Mutex
	Disturbed time.Time
	Converged time.Time
	Codes     map[int]int // HTTP answers to the buyers
	// Violations are the invariants (and convergence rules) that do not hold.
	Violations []string
	Err        error
}

// Disturb records a crash or kill at at, unless the sale has settled.
func (s *Sale) Disturb(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Converged.IsZero() {
		s.Disturbed = at
	}
}

func (s *Sale) times() (disturbed, converged time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Disturbed, s.Converged
}

// ConvergeTime is how long after its last disturbance the sale converged.
func (s *Sale) ConvergeTime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := s.Disturbed
	if from.IsZero() {
		from = s.Started
	}
	if s.Converged.Before(from) {
		return 0
	}
	return s.Converged.Sub(from)
}

// Drive plays the sale's buyers over the gateway's HTTP API, retrying
// through outages (the same Idempotency-Key each time), until ctx ends.
func (c *Cluster) Drive(ctx context.Context, s *Sale) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	now := time.Now()
	def := sale.Activity{ActivityID: s.ActivityID, Name: fmt.Sprintf("chaos %d", s.ActivityID), StartsAt: now.Add(-time.Minute),
		EndsAt: now.Add(time.Hour), PaymentTimeoutSeconds: salePayTimeout, OrderDeadlineSeconds: 60,
		SKUs: []sale.SKU{{SKUID: saleSKU, Stock: saleRedisStock, PriceCents: 1000}}}
	if _, err := c.call(ctx, hc, http.MethodPost, "/v1/admin/activities", c.cfg.AdminToken, "", def, http.StatusOK); err != nil {
		return fmt.Errorf("sale set-up: %w", err)
	}
	if _, err := c.Pool.Exec(ctx, `UPDATE sku_inventory SET initial_stock = $3, available_stock = $3 WHERE activity_id = $1 AND sku_id = $2`,
		s.ActivityID, saleSKU, salePGStock); err != nil {
		return fmt.Errorf("lower PostgreSQL stock: %w", err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for u := int64(1); u <= saleBuyers; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := c.auth.Mint(u, time.Hour)
			if err == nil {
				var code int
				code, err = c.call(ctx, hc, http.MethodPost, fmt.Sprintf("/v1/activities/%d/skus/%d/reservations", s.ActivityID, saleSKU),
					tok, uuid.NewString(), nil, http.StatusAccepted, http.StatusConflict)
				mu.Lock()
				s.Codes[code]++
				mu.Unlock()
			}
			if err != nil {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return c.pay(ctx, hc, s)
}

// probeActivity is the first activity id of the probe sales awaitConsuming
// sets up, far above the runs' sales (numbered from the start time in ms).
const probeActivity = int64(9) << 50

// awaitConsuming waits until the saga starter's consumer group receives
// messages. The group is new to the broker and starts from the latest
// offset, which the broker fixes at its first rebalance, a few seconds after
// the process starts: a message sent before that is not the group's, and
// its reservation would only be given up at its deadline. So one buyer after
// another reserves on a probe sale until a message reaches the inbox.
func (c *Cluster) awaitConsuming(ctx context.Context) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	now := time.Now()
	id := probeActivity + int64(now.UnixNano()%1_000_000)
	def := sale.Activity{ActivityID: id, Name: "chaos probe", StartsAt: now.Add(-time.Minute), EndsAt: now.Add(time.Hour),
		PaymentTimeoutSeconds: 1, OrderDeadlineSeconds: 5, SKUs: []sale.SKU{{SKUID: saleSKU, Stock: 1000}}}
	if _, err := c.call(ctx, hc, http.MethodPost, "/v1/admin/activities", c.cfg.AdminToken, "", def, http.StatusOK); err != nil {
		return fmt.Errorf("probe sale: %w", err)
	}
	// With several starters in the group, each queue's offset is fixed by
	// the consumer it falls to: several probes in a row (the producer turns
	// round the queues) must each be received.
	need := 1
	if c.replicas > 1 {
		need = 8
	}
	deadline := time.Now().Add(2 * time.Minute)
	for user, streak := int64(1), 0; ; user++ {
		tok, err := c.auth.Mint(user, time.Hour)
		if err != nil {
			return err
		}
		var before int
		if err := c.Pool.QueryRow(ctx, `SELECT count(*) FROM consumer_inbox WHERE consumer_group = $1`, sagastarter.ConsumerGroup).Scan(&before); err != nil {
			return err
		}
		if _, err := c.call(ctx, hc, http.MethodPost, fmt.Sprintf("/v1/activities/%d/skus/%d/reservations", id, saleSKU),
			tok, uuid.NewString(), nil, http.StatusAccepted); err != nil {
			return fmt.Errorf("probe reservation: %w", err)
		}
		streak++
		for i := 0; ; i++ {
			var n int
			if err := c.Pool.QueryRow(ctx, `SELECT count(*) FROM consumer_inbox WHERE consumer_group = $1`, sagastarter.ConsumerGroup).Scan(&n); err == nil && n > before {
				break
			}
			if i == 10 {
				streak = 0
				break
			}
			if err := waitGone(ctx, 200*time.Millisecond); err != nil {
				return err
			}
		}
		if streak >= need && c.everyStarterStarted(ctx) {
			c.log.Info("chaos.starter_consuming", "probes", user)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the saga starter received none of %d probe reservations in 2m (logs: %s)", user, c.logPath(c.Replicas(ProcStarter)[0].Name))
		}
	}
}

// Settled reports whether the sale converged: every admitted reservation is
// known to PostgreSQL and final (order paid or cancelled, or compensated),
// no order waits, Redis holds no open reservation and nothing in send_due,
// every compensation and refund is done and no saga of the sale runs. What
// is still open is named.
func (c *Cluster) Settled(ctx context.Context, s *Sale) (bool, string, error) {
	var open, reservations, openOrders, tasks, refunds int
	err := c.Pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE r.status NOT IN ('ORDER_CREATED', 'COMPENSATED', 'CANCELLED')
		                          OR (r.status = 'ORDER_CREATED' AND o.status <> 'PAID')),
		       count(*),
		       (SELECT count(*) FROM orders WHERE activity_id = $1 AND status IN ('CREATED', 'PAYING', 'CANCEL_PENDING', 'REFUNDING')),
		       (SELECT count(*) FROM compensation_task t JOIN inventory_reservation x ON x.reservation_id = t.reservation_id
		          WHERE x.activity_id = $1 AND t.status NOT IN ('APPLIED', 'VERIFIED')),
		       (SELECT count(*) FROM refund_task WHERE activity_id = $1 AND status <> 'DONE')
		FROM inventory_reservation r LEFT JOIN orders o ON o.order_id = r.order_id
		WHERE r.activity_id = $1`, s.ActivityID).Scan(&open, &reservations, &openOrders, &tasks, &refunds)
	if err != nil {
		return false, "", err
	}
	k := lua.Keys{ActivityID: s.ActivityID, SKUID: saleSKU}
	openReserved, _ := c.Redis.HGet(ctx, k.Counter(), "open_reserved").Int()
	due, _ := c.Redis.ZCard(ctx, k.SendDue()).Result()
	admitted := s.Codes[http.StatusAccepted]
	var pending []string
	if reservations < admitted {
		pending = append(pending, fmt.Sprintf("%d of %d admitted reservations in PostgreSQL", reservations, admitted))
	}
	for _, x := range []struct {
		n    int64
		what string
	}{{int64(open), "reservations not final"}, {int64(openOrders), "orders open"}, {int64(tasks), "compensations unfinished"},
		{int64(refunds), "refunds owed"}, {int64(openReserved), "open reservations in Redis"}, {due, "reservations in send_due"}} {
		if x.n > 0 {
			pending = append(pending, fmt.Sprintf("%d %s", x.n, x.what))
		}
	}
	if len(pending) == 0 {
		running, err := c.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`ActivityId = %d AND ExecutionStatus = "Running"`, s.ActivityID)})
		if err != nil {
			return false, "", err
		}
		if n := running.GetCount(); n > 0 {
			pending = append(pending, fmt.Sprintf("%d sagas running", n))
		}
	}
	return len(pending) == 0, strings.Join(pending, ", "), nil
}

// Judge checks the invariants I1–I7 of a settled sale (quiescent: the
// cross-system relation must hold exactly).
func (c *Cluster) Judge(ctx context.Context, s *Sale) error {
	_, vs, err := invariants.Check(ctx, c.Pool, c.Redis, s.ActivityID, saleSKU, true)
	if err != nil {
		return err
	}
	for _, v := range vs {
		s.Violations = append(s.Violations, v.String())
	}
	return nil
}

// Leftovers names what a run left that nothing will finish: quarantined or
// dead-lettered messages, failed repairs, outbox events not sent after a
// minute, reservations under manual review.
func (c *Cluster) Leftovers(ctx context.Context) ([]string, error) {
	var quarantined, failedRepairs, unsent, manual int
	if err := c.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM message_quarantine),
		(SELECT count(*) FROM repair_task WHERE status = 'FAILED'),
		(SELECT count(*) FROM event_outbox WHERE status <> 'SENT' AND created_at < clock_timestamp() - interval '1 minute'),
		(SELECT count(*) FROM inventory_reservation WHERE status = 'MANUAL_REVIEW')`).
		Scan(&quarantined, &failedRepairs, &unsent, &manual); err != nil {
		return nil, err
	}
	var out []string
	for _, x := range []struct {
		n    int
		what string
	}{{quarantined, "messages quarantined or dead-lettered"}, {failedRepairs, "automatic repairs failed"},
		{unsent, "outbox events unsent for a minute"}, {manual, "reservations in MANUAL_REVIEW"}} {
		if x.n > 0 {
			out = append(out, fmt.Sprintf("%d %s", x.n, x.what))
		}
	}
	return out, nil
}

// AwaitSettled waits until the sale settles, then judges it. A sale still
// unsettled 20 s after its last disturbance gets a reconciliation run every
// 20 s, as the Schedule would (the cluster's workers do not create it: they
// share the Temporal namespace with other deployments). A sale that does
// not settle within d is a violation: something waits forever.
func (c *Cluster) AwaitSettled(ctx context.Context, s *Sale, d time.Duration) error {
	// The limit runs from the sale's last disturbance: a crash while it
	// settles (a pipelined run's armed process hit again by its retry)
	// starts the count again.
	from := time.Now()
	deadline := func() time.Time {
		since, _ := s.times()
		if since.Before(from) {
			since = from
		}
		return since.Add(d)
	}
	var lastReconcile time.Time
	for {
		ok, pending, err := c.Settled(ctx, s)
		if err == nil && ok {
			s.mu.Lock()
			s.Converged = time.Now()
			s.mu.Unlock()
			for {
				err := c.Judge(ctx, s)
				if err == nil || time.Now().After(deadline()) {
					return err
				}
				if err := waitGone(ctx, time.Second); err != nil { // a store is down: judge when it is back
					return err
				}
			}
		}
		if time.Now().After(deadline()) {
			s.Violations = append(s.Violations, fmt.Sprintf("not settled %s after its last disturbance: %s (err %v)", d, pending, err))
			return nil
		}
		since, _ := s.times()
		if since.IsZero() {
			since = s.Started
		}
		if time.Since(since) > reconcileAfter && time.Since(lastReconcile) > reconcileAfter {
			c.reconcile(ctx, s.ActivityID)
			lastReconcile = time.Now()
		}
		if err := waitGone(ctx, 300*time.Millisecond); err != nil {
			return err
		}
	}
}

// reconcileAfter is how long a sale may stay unsettled before the harness
// runs reconciliation for it.
const reconcileAfter = 20 * time.Second

// reconcile starts one ReconcileWorkflow for the activity on the cluster's
// task queue (the saga worker runs it; a crashed one runs it on restart).
func (c *Cluster) reconcile(ctx context.Context, activityID int64) {
	_, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: fmt.Sprintf("%schaos-%d", workflows.ReconcileWorkflowIDPrefix, activityID), TaskQueue: c.TaskQueue(),
		WorkflowExecutionTimeout: 5 * time.Minute, WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, workflows.ReconcileWorkflow, steps.ReconcileInput{ActivityID: activityID})
	if err != nil && ctx.Err() == nil {
		c.log.Warn("chaos.reconcile_start_failed", "activity_id", activityID, "error", err)
	}
}
