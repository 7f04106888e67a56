package refundrelay_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/workers/refundrelay"
	"github.com/seckill/seckill/workflows"
)

// owe records n refund obligations (a cancelled order, the payment that
// landed on it, its refund_task), as internal/payments writes them.
func owe(t *testing.T, pool *pgxpool.Pool, n int) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	activity := testenv.ActivityID()
	var out []uuid.UUID
	for u := range n {
		order, payment := uuid.New(), uuid.New()
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO orders (order_id, activity_id, sku_id, user_id, request_id, reservation_id, amount_cents, status, expires_at, cancelled_at)
				VALUES ($1, $2, 1, $3, $4, $5, 100, 'CANCELLED', now(), now())`, []any{order, activity, u + 1, uuid.New(), uuid.New()}},
			{`INSERT INTO payment_record (payment_id, order_id, provider, provider_transaction_id, amount_cents, currency, status, paid_at)
				VALUES ($1, $2, 'paysim', $3, 100, 'CNY', 'SUCCESS', now())`, []any{payment, order, payment.String()}},
			{`INSERT INTO refund_task (payment_id, order_id, activity_id, sku_id) VALUES ($1, $2, $3, 1)`, []any{payment, order, activity}},
		} {
			if _, err := pool.Exec(ctx, q.sql, q.args...); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, payment)
	}
	return out
}

// slowTemporal stands in for the Temporal client. In a brownout every start
// takes its whole timeout and fails (300 ms when the caller sets none);
// after it a start succeeds and the refund is recorded at once (the task
// DONE, as FinishRefund does). It records the starts made per payment and
// every start begun while another of the same payment was in flight, and
// every start whose context could outlast its task's lease.
type slowTemporal struct {
	pool *pgxpool.Pool

	mu        sync.Mutex
	on        bool
	inFlight  map[uuid.UUID]int
	calls     map[uuid.UUID]int
	overlaps  []uuid.UUID
	pastLease []string
}

func (s *slowTemporal) brownout(on bool) { s.mu.Lock(); s.on = on; s.mu.Unlock() }

func (s *slowTemporal) ExecuteWorkflow(ctx context.Context, _ client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
	in := args[0].(workflows.RefundInput)
	s.mu.Lock()
	if s.inFlight[in.PaymentID] > 0 {
		s.overlaps = append(s.overlaps, in.PaymentID)
	}
	s.inFlight[in.PaymentID]++
	s.calls[in.PaymentID]++
	on := s.on
	s.mu.Unlock()
	// A start must end by the end of its task's lease (next_attempt_at, on
	// the same host's clock).
	var until time.Time
	if err := s.pool.QueryRow(ctx, `SELECT next_attempt_at FROM refund_task WHERE payment_id = $1`, in.PaymentID).Scan(&until); err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); !ok || deadline.After(until) {
		s.mu.Lock()
		s.pastLease = append(s.pastLease, fmt.Sprintf("%s: start may run until %s (set: %v), its lease ends at %s",
			in.PaymentID, deadline.Format(time.StampMilli), ok, until.Format(time.StampMilli)))
		s.mu.Unlock()
	}
	defer func() { s.mu.Lock(); s.inFlight[in.PaymentID]--; s.mu.Unlock() }()
	if on {
		wait := time.NewTimer(300 * time.Millisecond)
		defer wait.Stop()
		select {
		case <-ctx.Done():
		case <-wait.C:
		}
		return nil, errors.New("temporal brownout: no answer")
	}
	_, err := s.pool.Exec(ctx, `UPDATE refund_task SET status = 'DONE' WHERE payment_id = $1`, in.PaymentID)
	return nil, err
}

func (s *slowTemporal) count(id uuid.UUID) int { s.mu.Lock(); defer s.mu.Unlock(); return s.calls[id] }

// In a Temporal brownout every start takes its whole timeout. Two relays
// share 14 refund tasks, each claiming 10 at a time for a 1 s lease with a
// 200 ms start timeout: one claim would be 2 s of starts. No refund is
// started by both at once or past its lease, each task's attempt_count is the number of
// starts made, and once the brownout is over every refund is started (and
// here at once recorded).
func TestBrownoutStartsEachRefundUnderItsLeaseAndCountsRealAttempts(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	tasks := owe(t, pool, 14)
	tc := &slowTemporal{pool: pool, inFlight: map[uuid.UUID]int{}, calls: map[uuid.UUID]int{}}
	tc.brownout(true)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		r, err := refundrelay.New(pool, tc, refundrelay.Options{TaskQueue: "q", Interval: 20 * time.Millisecond, Batch: 10,
			Recheck: time.Second, StartTimeout: 200 * time.Millisecond, BaseBackoff: 50 * time.Millisecond,
			MaxBackoff: 200 * time.Millisecond}, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = r.Run(runCtx) })
	}
	defer func() { stop(); wg.Wait() }()

	began := time.Now()
	// Seconds here; the bound is wide for a loaded CI machine (PostgreSQL
	// shared with every other package's tests, -race).
	testenv.Await(t, 3*time.Minute, func() bool {
		for _, id := range tasks {
			if tc.count(id) < 2 {
				return false
			}
		}
		return true
	}, func() string { return "some refund was not tried twice in the brownout" })
	t.Logf("every refund tried twice after %s", time.Since(began))
	tc.brownout(false)
	owed := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM refund_task WHERE status <> 'DONE'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testenv.Await(t, time.Minute, func() bool { return owed() == 0 },
		func() string { return fmt.Sprintf("%d refunds still owed after the brownout", owed()) })
	stop()
	wg.Wait()

	tc.mu.Lock()
	overlaps, pastLease := tc.overlaps, tc.pastLease
	tc.mu.Unlock()
	if len(pastLease) > 0 {
		t.Errorf("%d starts could outlast their task's lease, e.g. %s", len(pastLease), pastLease[0])
	}
	if len(overlaps) > 0 {
		t.Errorf("%d starts began while the same refund's start was in flight (claimed twice): %v", len(overlaps), overlaps)
	}
	for _, id := range tasks {
		var attempts int
		if err := pool.QueryRow(ctx, `SELECT attempt_count FROM refund_task WHERE payment_id = $1`, id).Scan(&attempts); err != nil {
			t.Fatal(err)
		}
		if attempts != tc.count(id) {
			t.Errorf("refund of %s: attempt_count %d, starts made %d", id, attempts, tc.count(id))
		}
	}
}

// A claim comes in the order its tasks fell due, and a task handed back
// (its start not begun: the lease covered no more) keeps its place in line,
// ahead of the tasks that fell due after it: a relay that starts only the
// first few of each claim, in a brownout, starves none.
func TestClaimsComeInDueOrderAndAHandedBackRefundKeepsItsPlace(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	ctx := context.Background()
	tasks := owe(t, pool, 3)
	// Due 1 s, 2 s and 3 s ago, in the reverse of the order they were written.
	for i, id := range tasks {
		if _, err := pool.Exec(ctx, `UPDATE refund_task SET next_attempt_at = clock_timestamp() - make_interval(secs => $2)
			WHERE payment_id = $1`, id, float64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	store := payments.NewStore(pool, nil)
	claimed, err := store.ClaimRefunds(ctx, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 2 || claimed[0].PaymentID != tasks[2] || claimed[1].PaymentID != tasks[1] {
		t.Fatalf("claimed %v, want the two longest due first: %v, %v", ids(claimed), tasks[2], tasks[1])
	}
	if err := store.HandBackRefunds(ctx, claimed[1:]); err != nil {
		t.Fatal(err)
	}
	again, err := store.ClaimRefunds(ctx, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || again[0].PaymentID != tasks[1] {
		t.Fatalf("after the hand-back claimed %v, want %v (due before %v)", ids(again), tasks[1], tasks[0])
	}
	var attempts int
	if err := pool.QueryRow(ctx, `SELECT attempt_count FROM refund_task WHERE payment_id = $1`, tasks[1]).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 {
		t.Errorf("attempt_count %d after a claim, a hand-back and a claim: want 1", attempts)
	}
}

func ids(tasks []payments.RefundTask) []uuid.UUID {
	out := make([]uuid.UUID, len(tasks))
	for i, t := range tasks {
		out[i] = t.PaymentID
	}
	return out
}
