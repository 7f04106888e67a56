package activities_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type rig struct {
	pool *pgxpool.Pool
	rdb  redis.UniversalClient
	acts *activities.Activities
	fp   *failpoint.Set
	k    lua.Keys
	ids  *ids.Deriver
}

// newRig: a fresh database, a sale of one SKU with stock in PostgreSQL and
// redisStock in Redis (they differ when a test wants Redis to over-admit).
func newRig(t *testing.T, pgStock, redisStock int64) *rig {
	t.Helper()
	cfg := testenv.Require(t)
	dsn, pool := testenv.Database(t, cfg)
	_ = dsn
	rdb := testenv.Redis(t, cfg)
	ctx := context.Background()
	a := sale.Activity{ActivityID: testenv.ActivityID(), Name: "t", StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour),
		PaymentTimeoutSeconds: 900, OrderDeadlineSeconds: 300, SKUs: []sale.SKU{{SKUID: 3, Stock: redisStock, PriceCents: 1999}}}
	if _, err := sale.Setup(ctx, pool, rdb, a); err != nil {
		t.Fatal(err)
	}
	if pgStock != redisStock {
		if _, err := pool.Exec(ctx, `UPDATE sku_inventory SET initial_stock = $3, available_stock = $3 WHERE activity_id = $1 AND sku_id = $2`,
			a.ActivityID, 3, pgStock); err != nil {
			t.Fatal(err)
		}
	}
	k := lua.Keys{ActivityID: a.ActivityID, SKUID: 3}
	t.Cleanup(func() {
		rdb.SRem(ctx, lua.ActiveSKUs, fmt.Sprintf("%d:3", a.ActivityID))
		testenv.DeleteSKUKeys(ctx, rdb, k)
	})
	verify, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(verify.Close)
	fp := &failpoint.Set{}
	acts, err := activities.New(activities.Deps{Pool: pool, Verify: verify, Redis: rdb, Failpoints: fp, Log: quiet,
		Topic: cfg.TopicOrderCreate, TerminalTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := cfg.IDKeys()
	d, _ := ids.NewDeriver(keys, cfg.IDKeyVersion)
	return &rig{pool: pool, rdb: rdb, acts: acts, fp: fp, k: k, ids: d}
}

// reserve admits user in Redis (lua/reserve.lua) and returns its message.
func (r *rig) reserve(t *testing.T, user int64) events.OrderCreateRequested {
	t.Helper()
	return testenv.MustReserve(t, r.rdb, r.ids, r.k, user)
}

func (r *rig) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := r.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (r *rig) stock(t *testing.T) (initial, avail, occ, sold int) {
	t.Helper()
	if err := r.pool.QueryRow(context.Background(), `SELECT initial_stock, available_stock, occupied_stock, sold_stock FROM sku_inventory
		WHERE activity_id = $1 AND sku_id = $2`, r.k.ActivityID, r.k.SKUID).Scan(&initial, &avail, &occ, &sold); err != nil {
		t.Fatal(err)
	}
	return
}

func (r *rig) redisCounters(t *testing.T) (initial, avail, open, committed int) {
	t.Helper()
	v := r.rdb.HMGet(context.Background(), r.k.Counter(), "initial", "available", "open_reserved", "committed").Val()
	n := func(x any) int {
		var i int
		fmt.Sscan(fmt.Sprint(x), &i)
		return i
	}
	return n(v[0]), n(v[1]), n(v[2]), n(v[3])
}

func TestSameMessageTenThousandTimesConcurrently(t *testing.T) {
	r := newRig(t, 10, 10)
	m := r.reserve(t, 1)
	const n = 10000
	var wg sync.WaitGroup
	results := make([]steps.CreateOrderResult, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i], errs[i] = r.acts.CreateOrder(context.Background(), m)
		}()
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("delivery %d: %v", i, errs[i])
		}
		if results[i].Outcome != steps.OutcomeCreated || results[i].OrderID != orders.ID(m.ReservationID) {
			t.Fatalf("delivery %d: %+v", i, results[i])
		}
		if !results[i].Duplicate {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d deliveries created the order, want 1", created)
	}
	checks := []struct {
		name string
		sql  string
		want int
	}{
		{"inbox rows", `SELECT count(*) FROM consumer_inbox WHERE message_id = $1`, 1},
		{"orders", `SELECT count(*) FROM orders WHERE reservation_id = $1`, 1},
		{"ledger occupy rows", `SELECT count(*) FROM inventory_ledger WHERE reservation_id = $1 AND change_type = 'OCCUPY'`, 1},
		{"ORDER_CREATED outbox rows", `SELECT count(*) FROM event_outbox WHERE event_type = 'ORDER_CREATED' AND payload->>'reservation_id' = $1::text`, 1},
	}
	for _, c := range checks {
		arg := any(m.ReservationID)
		if c.name == "inbox rows" {
			arg = m.MessageID
		}
		if got := r.count(t, c.sql, arg); got != c.want {
			t.Errorf("%s = %d, want %d", c.name, got, c.want)
		}
	}
	if initial, avail, occ, sold := r.stock(t); avail != 9 || occ != 1 || initial != avail+occ+sold {
		t.Fatalf("stock = %d/%d/%d/%d, want one decrement", initial, avail, occ, sold)
	}
}

func TestSameMessageIDDifferentPayloadIsManual(t *testing.T) {
	r := newRig(t, 10, 10)
	m := r.reserve(t, 1)
	if res, err := r.acts.CreateOrder(context.Background(), m); err != nil || res.Outcome != steps.OutcomeCreated {
		t.Fatal(res, err)
	}
	forged := m
	forged.UserID = 999
	res, err := r.acts.CreateOrder(context.Background(), forged)
	if err != nil || res.Outcome != steps.OutcomeManual || res.Reason != steps.ReasonPayloadConflict {
		t.Fatalf("forged duplicate = %+v, %v", res, err)
	}
	if got := r.count(t, `SELECT count(*) FROM orders WHERE user_id = 999`); got != 0 {
		t.Fatal("forged payload created an order")
	}
}

func TestPGStockExhaustedCompensatesRedisOnceEach(t *testing.T) {
	r := newRig(t, 3, 5) // Redis admits 5, PostgreSQL has 3
	ctx := context.Background()
	var msgs []events.OrderCreateRequested
	for u := range 5 {
		msgs = append(msgs, r.reserve(t, int64(100+u)))
	}
	var rejected []events.OrderCreateRequested
	for _, m := range msgs {
		res, err := r.acts.CreateOrder(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		switch res.Outcome {
		case steps.OutcomeCreated:
			if p, err := r.acts.ProjectOrderCreated(ctx, steps.ProjectionInput{ReservationID: m.ReservationID, OrderID: res.OrderID,
				ActivityID: m.ActivityID, SKUID: m.SKUID}); err != nil || p.Code != 1 {
				t.Fatalf("projection = %+v, %v", p, err)
			}
		case steps.OutcomeRejected:
			if res.Reason != steps.ReasonStockExhausted {
				t.Fatalf("rejected for %s", res.Reason)
			}
			rejected = append(rejected, m)
		default:
			t.Fatalf("outcome %v", res.Outcome)
		}
	}
	if len(rejected) != 2 {
		t.Fatalf("%d rejected, want 2", len(rejected))
	}
	if got := r.count(t, `SELECT count(*) FROM compensation_task WHERE status = 'PENDING'`); got != 2 {
		t.Fatalf("compensation tasks = %d", got)
	}
	// One of them: 10,000 concurrent compensations restore exactly one unit.
	const n = 10000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var mu sync.Mutex
	outcomes := map[string]int{}
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := r.acts.Compensate(ctx, steps.CompensateInput{ReservationID: rejected[0].ReservationID, ActivityID: r.k.ActivityID, SKUID: r.k.SKUID})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, inventory.ErrLeaseHeld):
				outcomes["lease held"]++
			case err != nil:
				t.Errorf("compensate: %v", err)
			default:
				outcomes[c.Status.String()]++
			}
		}()
	}
	wg.Wait()
	if outcomes["COMPENSATED"] == 0 || outcomes["MANUAL_REVIEW"] != 0 {
		t.Fatalf("outcomes = %v", outcomes)
	}
	if _, avail, open, committed := r.redisCounters(t); avail != 1 || open != 1 || committed != 3 {
		t.Fatalf("redis after one compensation: available %d open %d committed %d, want 1/1/3", avail, open, committed)
	}
	// The same compensation script run 10,000 times concurrently: still +1 once.
	rid := rejected[0].ReservationID.String()
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := lua.Compensate(ctx, r.rdb, r.k, lua.CompensateArgs{ReservationID: rid,
				CompensationID: inventory.CompensationKey(rejected[0].ReservationID), UserID: rejected[0].UserID,
				NowMS: time.Now().UnixMilli(), TTL: time.Hour})
			if err != nil || res.Code != lua.AlreadyCompensated {
				t.Errorf("repeat compensate.lua = %v, %v, want ALREADY_COMPENSATED", res, err)
			}
		}()
	}
	wg.Wait()
	// The second rejected one compensates normally.
	if c, err := r.acts.Compensate(ctx, steps.CompensateInput{ReservationID: rejected[1].ReservationID, ActivityID: r.k.ActivityID, SKUID: r.k.SKUID}); err != nil || c.Status != state.ReservationCompensated {
		t.Fatalf("second compensation = %+v, %v", c, err)
	}
	initial, avail, open, committed := r.redisCounters(t)
	if avail != 2 || open != 0 || committed != 3 || initial != avail+open+committed {
		t.Fatalf("redis = %d/%d/%d/%d, want 5 = 2 + 0 + 3", initial, avail, open, committed)
	}
	if got := r.count(t, `SELECT count(*) FROM inventory_reservation WHERE status = 'COMPENSATED'`); got != 2 {
		t.Fatalf("COMPENSATED reservations = %d", got)
	}
	if got := r.count(t, `SELECT count(*) FROM compensation_task WHERE status = 'APPLIED'`); got != 2 {
		t.Fatalf("APPLIED tasks = %d", got)
	}
	// I7 cross-system: Redis committed = PG occupied + sold.
	if _, _, occ, sold := r.stock(t); committed != occ+sold {
		t.Fatalf("redis committed %d != pg occupied %d + sold %d", committed, occ, sold)
	}
}

func TestCompensationWithMissingRedisKeyNeverAddsStock(t *testing.T) {
	r := newRig(t, 0, 1)
	ctx := context.Background()
	m := r.reserve(t, 1)
	if res, _ := r.acts.CreateOrder(ctx, m); res.Outcome != steps.OutcomeRejected {
		t.Fatalf("outcome %v", res.Outcome)
	}
	r.rdb.Del(ctx, r.k.Reservation(m.ReservationID.String())) // e.g. lost in a failover
	c, err := r.acts.Compensate(ctx, steps.CompensateInput{ReservationID: m.ReservationID, ActivityID: r.k.ActivityID, SKUID: r.k.SKUID})
	if err != nil || c.Status != state.ReservationManualReview || c.LuaCode != -1 {
		t.Fatalf("compensate = %+v, %v", c, err)
	}
	if _, avail, _, _ := r.redisCounters(t); avail != 0 {
		t.Fatalf("redis stock added blindly: available %d", avail)
	}
	if got := r.count(t, `SELECT count(*) FROM compensation_task WHERE status = 'MANUAL'`); got != 1 {
		t.Fatal("task not MANUAL")
	}
	if got := r.count(t, `SELECT count(*) FROM inventory_reservation WHERE status = 'MANUAL_REVIEW'`); got != 1 {
		t.Fatal("reservation not MANUAL_REVIEW")
	}
}

func TestCommitOutcomeUnknownResolvesByInbox(t *testing.T) {
	r := newRig(t, 5, 5)
	m := r.reserve(t, 1)
	testenv.RequireFailpoints(t)
	r.fp.Arm(failpoint.DuringCommitResponse, 1)
	res, err := r.acts.CreateOrder(context.Background(), m)
	if err != nil || res.Outcome != steps.OutcomeCreated || !res.Duplicate {
		t.Fatalf("after lost commit answer = %+v, %v; want the committed result read back", res, err)
	}
	if got := r.count(t, `SELECT count(*) FROM compensation_task`); got != 0 {
		t.Fatal("compensation created on an unknown commit")
	}
	if _, avail, occ, _ := r.stock(t); avail != 4 || occ != 1 {
		t.Fatalf("stock %d/%d", avail, occ)
	}
	// A commit that did not happen: the failpoint fires before commit and the
	// transaction rolls back; the retry (same message_id) creates the order once.
	m2 := r.reserve(t, 2)
	testenv.RequireFailpoints(t)
	r.fp.Arm(failpoint.AfterOrderInsert, 1)
	if _, err := r.acts.CreateOrder(context.Background(), m2); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("crash mid-transaction = %v", err)
	}
	if got := r.count(t, `SELECT count(*) FROM consumer_inbox WHERE message_id = $1`, m2.MessageID); got != 0 {
		t.Fatal("rolled-back transaction left an inbox row")
	}
	if res, err := r.acts.CreateOrder(context.Background(), m2); err != nil || res.Outcome != steps.OutcomeCreated || res.Duplicate {
		t.Fatalf("retry = %+v, %v", res, err)
	}
	if _, avail, occ, _ := r.stock(t); avail != 3 || occ != 2 {
		t.Fatalf("stock %d/%d after retry", avail, occ)
	}
}

// Each failpoint inside the order transaction (seckill_create_order stops
// there, the process fails) rolls the whole transaction back, and the retry
// with the same message_id creates the order once, with its outbox event.
func TestOrderTransactionRollsBackAtEachInnerFailpoint(t *testing.T) {
	r := newRig(t, 5, 5)
	testenv.RequireFailpoints(t)
	ctx := context.Background()
	for i, fp := range []string{failpoint.AfterInboxInsert, failpoint.AfterOrderInsert, failpoint.AfterPGStockDecrement} {
		m := r.reserve(t, int64(i+1))
		r.fp.Arm(fp, 1)
		if _, err := r.acts.CreateOrder(ctx, m); !errors.Is(err, failpoint.ErrInjected) {
			t.Fatalf("%s: = %v, want the injected failure", fp, err)
		}
		if n := r.count(t, `SELECT (SELECT count(*) FROM consumer_inbox WHERE message_id = $1) + (SELECT count(*) FROM orders WHERE reservation_id = $2)
			+ (SELECT count(*) FROM inventory_reservation WHERE reservation_id = $2)`, m.MessageID, m.ReservationID); n != 0 {
			t.Fatalf("%s: the rolled-back transaction left %d rows", fp, n)
		}
		if _, avail, occ, _ := r.stock(t); avail != 5-i || occ != i {
			t.Fatalf("%s: stock %d/%d after the rollback", fp, avail, occ)
		}
		res, err := r.acts.CreateOrder(ctx, m)
		if err != nil || res.Outcome != steps.OutcomeCreated || res.Duplicate || res.ExpiresAt.IsZero() {
			t.Fatalf("%s: retry = %+v, %v", fp, res, err)
		}
		var payload map[string]any
		if err := r.pool.QueryRow(ctx, `SELECT payload FROM event_outbox WHERE aggregate_id = $1 AND event_type = 'ORDER_CREATED'`,
			res.OrderID).Scan(&payload); err != nil {
			t.Fatalf("%s: outbox: %v", fp, err)
		}
		if payload["order_id"] != res.OrderID.String() || payload["reservation_id"] != m.ReservationID.String() ||
			payload["user_id"] != float64(m.UserID) || payload["schema_version"] != float64(1) || payload["expires_at"] == nil {
			t.Fatalf("%s: ORDER_CREATED payload %v", fp, payload)
		}
	}
	if _, avail, occ, _ := r.stock(t); avail != 2 || occ != 3 {
		t.Fatalf("stock %d/%d at the end", avail, occ)
	}
}

// A failpoint inside the order transaction fires where its point is reached,
// not on the first CreateOrder: a call that takes another path (here a
// duplicate delivery) leaves it armed for the next order.
func TestInnerFailpointWaitsForItsPoint(t *testing.T) {
	r := newRig(t, 5, 5)
	testenv.RequireFailpoints(t)
	ctx := context.Background()
	m1 := r.reserve(t, 1)
	if res, err := r.acts.CreateOrder(ctx, m1); err != nil || res.Outcome != steps.OutcomeCreated {
		t.Fatal(res, err)
	}
	r.fp.Arm(failpoint.AfterPGStockDecrement, 1)
	if res, err := r.acts.CreateOrder(ctx, m1); err != nil || !res.Duplicate {
		t.Fatalf("duplicate delivery with the failpoint armed = %+v, %v", res, err)
	}
	m2 := r.reserve(t, 2)
	if _, err := r.acts.CreateOrder(ctx, m2); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("the next order = %v, want the failpoint there", err)
	}
	if res, err := r.acts.CreateOrder(ctx, m2); err != nil || res.Outcome != steps.OutcomeCreated || res.Duplicate {
		t.Fatalf("retry = %+v, %v", res, err)
	}
}

func TestLateMessageAfterDurableRejection(t *testing.T) {
	r := newRig(t, 5, 5)
	ctx := context.Background()
	m := r.reserve(t, 1)
	// The reservation was durably rejected (e.g. by reconciliation past its
	// deadline) and compensated before its message arrived.
	if _, err := r.pool.Exec(ctx, `INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id, message_id,
		status, reason_code, reserved_at, business_deadline) VALUES ($1, $2, $3, $4, $5, $6, 'COMPENSATED', 'BUSINESS_DEADLINE_EXCEEDED', $7, $8)`,
		m.ReservationID, m.RequestID, m.ActivityID, m.SKUID, m.UserID, m.MessageID, m.ReservedAt, m.BusinessDeadline); err != nil {
		t.Fatal(err)
	}
	_, availBefore, _, _ := r.redisCounters(t)
	res, err := r.acts.CreateOrder(ctx, m)
	if err != nil || res.Outcome != steps.OutcomeLate {
		t.Fatalf("late message = %+v, %v", res, err)
	}
	if r.count(t, `SELECT count(*) FROM orders`) != 0 || r.count(t, `SELECT count(*) FROM compensation_task`) != 0 {
		t.Fatal("late message created an order or a second compensation")
	}
	if _, avail, _, _ := r.redisCounters(t); avail != availBefore {
		t.Fatal("late message moved redis stock")
	}
	if _, avail, occ, _ := r.stock(t); avail != 5 || occ != 0 {
		t.Fatal("late message moved pg stock")
	}
}

func TestDeadlinePassedIsDurablyRejected(t *testing.T) {
	r := newRig(t, 5, 5)
	m := r.reserve(t, 1)
	m.BusinessDeadline = m.ReservedAt.Add(time.Millisecond) // hard deadline long gone
	res, err := r.acts.CreateOrder(context.Background(), m)
	if err != nil || res.Outcome != steps.OutcomeRejected || res.Reason != steps.ReasonDeadline {
		t.Fatalf("= %+v, %v", res, err)
	}
	if r.count(t, `SELECT count(*) FROM compensation_task`) != 1 || r.count(t, `SELECT count(*) FROM event_outbox WHERE event_type = 'RESERVATION_COMPENSATE_REQUIRED'`) != 1 {
		t.Fatal("rejection without its task and outbox event")
	}
}

func TestSecondOrderOfAUserRestoresStockInTransaction(t *testing.T) {
	r := newRig(t, 5, 5)
	ctx := context.Background()
	m1 := r.reserve(t, 1)
	if res, _ := r.acts.CreateOrder(ctx, m1); res.Outcome != steps.OutcomeCreated {
		t.Fatal(res)
	}
	// Redis lost its user guard (failover): the same user got a second reservation.
	r.rdb.Del(ctx, r.k.User(1))
	m2 := r.reserve(t, 1)
	res, err := r.acts.CreateOrder(ctx, m2)
	if err != nil || res.Outcome != steps.OutcomeRejected || res.Reason != steps.ReasonDuplicateOrder {
		t.Fatalf("second order = %+v, %v", res, err)
	}
	if initial, avail, occ, sold := r.stock(t); avail != 4 || occ != 1 || initial != avail+occ+sold {
		t.Fatalf("stock %d/%d/%d: the duplicate's unit was not restored", initial, avail, occ)
	}
}

func TestRepairActionsAreValidatedRecordedAndIdempotent(t *testing.T) {
	r := newRig(t, 0, 2) // PostgreSQL has no stock: the first reservation is rejected
	ctx := context.Background()
	stuck := r.reserve(t, 1)
	if res, _ := r.acts.CreateOrder(ctx, stuck); res.Outcome != steps.OutcomeRejected {
		t.Fatal(res)
	}
	r.rdb.Del(ctx, r.k.Reservation(stuck.ReservationID.String()))
	if c, _ := r.acts.Compensate(ctx, steps.CompensateInput{ReservationID: stuck.ReservationID, ActivityID: r.k.ActivityID, SKUID: r.k.SKUID}); c.Status != state.ReservationManualReview {
		t.Fatal(c)
	}
	// An order waiting for payment, for the actions that need one.
	if _, err := r.pool.Exec(ctx, `UPDATE sku_inventory SET initial_stock = initial_stock + 1, available_stock = available_stock + 1 WHERE activity_id = $1`, r.k.ActivityID); err != nil {
		t.Fatal(err)
	}
	open := r.reserve(t, 2)
	if res, _ := r.acts.CreateOrder(ctx, open); res.Outcome != steps.OutcomeCreated {
		t.Fatal(res)
	}
	req := func(rid uuid.UUID, action, id string) steps.RepairRequest {
		return steps.RepairRequest{Action: action, RepairID: id, Operator: "alice", Reason: "INC-7: evidence in ticket", ReservationID: rid}
	}
	cases := []struct {
		name     string
		req      steps.RepairRequest
		accepted bool
		reason   string
	}{
		{"unknown action", req(stuck.ReservationID, "drop-table", "a1"), false, "unknown action"},
		{"no operator", steps.RepairRequest{Action: steps.RepairMarkResolved, RepairID: "a2", Reason: "x", ReservationID: stuck.ReservationID}, false, "operator is required"},
		{"retry on wrong state", req(open.ReservationID, steps.RepairRetryCompensation, "a3"), false, "applies only in MANUAL_REVIEW"},
		{"force cancel on wrong state", req(stuck.ReservationID, steps.RepairForceCancelUnpaid, "a4"), false, "force-cancel-unpaid needs"},
		{"rebuild projection on wrong state", req(stuck.ReservationID, steps.RepairRebuildProjection, "a5"), false, "rebuild-projection needs"},
		{"force cancel unpaid order", req(open.ReservationID, steps.RepairForceCancelUnpaid, "a6"), true, ""},
		{"rebuild projection", req(open.ReservationID, steps.RepairRebuildProjection, "a7"), true, ""},
		{"retry compensation", req(stuck.ReservationID, steps.RepairRetryCompensation, "a8"), true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := r.acts.ApplyRepair(ctx, c.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Accepted != c.accepted || !strings.Contains(res.Reason, c.reason) {
				t.Fatalf("= %+v, want accepted %v with reason containing %q", res, c.accepted, c.reason)
			}
			var status, operator string
			if err := r.pool.QueryRow(ctx, `SELECT status, operator FROM repair_task WHERE repair_id = $1`, c.req.RepairID).Scan(&status, &operator); err != nil {
				t.Fatalf("repair not recorded: %v", err)
			}
			if want := map[bool]string{true: "APPLIED", false: "REFUSED"}[c.accepted]; status != want {
				t.Fatalf("recorded %s, want %s", status, want)
			}
		})
	}
	// retry-compensation moved the standard state back: task RETRY, reservation ORDER_REJECTED.
	var resStatus, taskStatus string
	r.pool.QueryRow(ctx, `SELECT r.status, t.status FROM inventory_reservation r JOIN compensation_task t USING (reservation_id) WHERE r.reservation_id = $1`,
		stuck.ReservationID).Scan(&resStatus, &taskStatus)
	if resStatus != "ORDER_REJECTED" || taskStatus != "RETRY" {
		t.Fatalf("after retry-compensation: reservation %s task %s", resStatus, taskStatus)
	}
	// The same repair_id again changes nothing and says so.
	again, err := r.acts.ApplyRepair(ctx, req(stuck.ReservationID, steps.RepairRetryCompensation, "a8"))
	if err != nil || !again.Duplicate || !again.Accepted {
		t.Fatalf("repeat = %+v, %v", again, err)
	}
	var n int
	r.pool.QueryRow(ctx, `SELECT count(*) FROM repair_task`).Scan(&n)
	if n != len(cases) {
		t.Fatalf("repair rows %d, want %d", n, len(cases))
	}
}
