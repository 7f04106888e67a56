package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workflows"
)

// TestUnexpectedConstraintViolationEndsInRejection: a constraint the order
// transaction does not expect (here the ledger key of this reservation's
// unit is already taken by a stray row of another sale) fails every attempt
// with 23505. It used to retry forever: no order, no rejection, the Redis
// unit never given back, the buyer told QUEUED for ever. Past the bound
// (temporalx.UniqueViolationAttempts) the error is permanent, and the saga
// rejects the reservation durably with the reason and compensates it.
func TestUnexpectedConstraintViolationEndsInRejection(t *testing.T) {
	r := newConvRig(t, 900*time.Second)
	ctx := context.Background()
	m, run := r.saga(t, 1, func(m events.OrderCreateRequested) {
		if _, err := r.conns.Pool.Exec(ctx, `INSERT INTO inventory_ledger (idempotency_key, activity_id, sku_id, reservation_id, change_type)
			VALUES ($1, $2, 7, $3, 'STRAY')`, inventory.LedgerOccupyKey(m.ReservationID), m.ActivityID+1, uuid.New()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = r.conns.Pool.Exec(context.Background(), `DELETE FROM inventory_ledger WHERE idempotency_key = $1 AND change_type = 'STRAY'`,
				inventory.LedgerOccupyKey(m.ReservationID))
		})
	})
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var st workflows.SagaState
	if err := run.Get(wctx, &st); err != nil {
		t.Fatalf("saga did not end: %v", err)
	}
	if st.Status != state.SagaCompensated {
		t.Fatalf("saga ended %s (%v), want COMPENSATED", st.Status, st.Steps)
	}
	var status, reason string
	if err := r.conns.Pool.QueryRow(ctx, `SELECT status, coalesce(reason_code, '') FROM inventory_reservation WHERE reservation_id = $1`,
		m.ReservationID).Scan(&status, &reason); err != nil {
		t.Fatal(err)
	}
	if status != "COMPENSATED" || !strings.HasPrefix(reason, steps.ReasonUnprocessable) || !strings.Contains(reason, "23505") {
		t.Fatalf("reservation %s reason %q, want COMPENSATED with %s…23505", status, reason, steps.ReasonUnprocessable)
	}
	var orders int
	if err := r.conns.Pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE reservation_id = $1`, m.ReservationID).Scan(&orders); err != nil || orders != 0 {
		t.Fatalf("%d orders (%v), want none", orders, err)
	}
	if c := r.conns.Redis.HGetAll(ctx, r.k.Counter()).Val(); c["available"] != "10" || c["open_reserved"] != "0" {
		t.Fatalf("redis counters: %v, want the unit back (available 10, open_reserved 0)", c)
	}
	if rs := r.conns.Redis.HGet(ctx, r.k.Reservation(m.ReservationID.String()), "status").Val(); rs != "COMPENSATED" {
		t.Fatalf("redis reservation is %s, want COMPENSATED", rs)
	}
}
