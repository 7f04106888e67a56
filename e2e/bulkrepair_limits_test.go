package e2e

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/repairs"
	"github.com/seckill/seckill/workflows"
)

// manualReviewRows puts refused+fit reservations of the rig's sale in
// MANUAL_REVIEW straight into PostgreSQL (no saga, no Redis): the refused
// ones (lower reservation ids, listed first) have no compensation task, so
// retry-compensation does not fit them; the fit ones have a MANUAL task.
func manualReviewRows(t *testing.T, r *bulkRig, refused, fit int) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []struct {
		prefix string
		n      int
	}{{"00000000", refused}, {"ffffffff", fit}} {
		if _, err := r.conns.Pool.Exec(ctx, `INSERT INTO inventory_reservation (reservation_id, request_id, activity_id, sku_id, user_id,
				message_id, status, reserved_at, business_deadline)
			SELECT ($1 || substr(gen_random_uuid()::text, 9))::uuid, gen_random_uuid(), $2, 1, 1000000 + g,
				gen_random_uuid(), 'MANUAL_REVIEW', now(), now() + interval '1 hour'
			FROM generate_series(1, $3) g`, q.prefix, r.k.ActivityID, q.n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.conns.Pool.Exec(ctx, `INSERT INTO compensation_task (task_id, reservation_id, compensation_type, idempotency_key, status)
		SELECT gen_random_uuid(), reservation_id, 'RELEASE_REDIS_RESERVATION', 'e2e-bulk-' || reservation_id, 'MANUAL'
		FROM inventory_reservation WHERE activity_id = $1 AND reservation_id::text LIKE 'ffffffff%'`, r.k.ActivityID); err != nil {
		t.Fatal(err)
	}
}

func bulkItemCount(t *testing.T, r *bulkRig, bulkID string) int {
	t.Helper()
	n, after := 0, ""
	for {
		page, err := repairs.BulkItems(context.Background(), r.conns.Pool, bulkID, "", after, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return n
		}
		n += len(page)
		after = page[len(page)-1].WorkflowID
	}
}

// A bulk repair over 20,000 sagas (3 MB of items): its report used to carry every item and
// went over Temporal's 2 MB payload limit. Now the result holds counts, the
// items are in PostgreSQL, page by page, and --limit counts only the sagas
// repaired: refused ones listed first no longer fill it.
func TestBulkRepairAtItsLimits(t *testing.T) {
	const refused, fit = 20000, 20
	r := newBulkRig(t, 1, 1)
	manualReviewRows(t, r, refused, fit)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	in := workflows.BulkRepairInput{ManualReviewOf: r.k.ActivityID, Action: "retry-compensation", Operator: "alice",
		Reason: "INC-9: keys restored", PerSecond: 1000, Limit: 100000}

	rep := runBulk(ctx, t, r.conns, r.cfg.TemporalTaskQueue, in, true)
	if rep.Listed != refused+fit || rep.Refused != refused || rep.Would != fit || rep.Truncated || len(rep.Items) != 0 {
		t.Fatalf("dry run over %d sagas: %s truncated=%v items=%d; want %d refused, %d would apply, counts only",
			refused+fit, summary(rep), rep.Truncated, len(rep.Items), refused, fit)
	}
	if n := bulkItemCount(t, r, rep.BulkID); n != refused+fit {
		t.Fatalf("bulk_repair_item holds %d items of %s, want %d", n, rep.BulkID, refused+fit)
	}

	// The limit counts repaired sagas: 20,000 refused ones come first and
	// the run still reaches 10 that the repair fits.
	in.Limit = 10
	rep = runBulk(ctx, t, r.conns, r.cfg.TemporalTaskQueue, in, true)
	if rep.Would != 10 || rep.Refused != refused || !rep.Truncated {
		t.Fatalf("dry run with --limit 10 behind %d refused sagas: %s truncated=%v; want 10 would apply, truncated",
			refused, summary(rep), rep.Truncated)
	}
}

// A rate below one signal a minute: the pace is longer than the slice's
// heartbeat timeout, so the workflow waits it out with a timer, and no
// activity attempt times out (every activity completes on its first
// attempt).
func TestBulkRepairSlowerThanItsHeartbeat(t *testing.T) {
	const stuck = 2
	r := newBulkRig(t, stuck, 0)
	r.stuck(t, r.msgs)
	r.visible(t, "MANUAL_REVIEW", stuck)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	in := workflows.BulkRepairInput{Query: r.ofSale, Action: "mark-resolved", Operator: "alice", Reason: "INC-10: settled by hand",
		PerSecond: 1.0 / 65, Limit: 100}
	run, err := app.StartBulkRepair(ctx, r.conns.Temporal, r.cfg.TemporalTaskQueue, in)
	if err != nil {
		t.Fatal(err)
	}
	var rep workflows.BulkRepairReport
	if err := run.Get(ctx, &rep); err != nil || rep.Applied != stuck {
		t.Fatalf("bulk repair at one signal in 65 s: %s, %v; want %d applied", summary(rep), err, stuck)
	}
	r.visible(t, "RESOLVED_MANUALLY", stuck)
	var timers int
	it := r.conns.Temporal.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() != 1 {
			t.Errorf("event %d: an activity started attempt %d (%s): the pace outlasted its timeout", ev.GetEventId(), a.GetAttempt(),
				a.GetLastFailure().GetMessage())
		}
		if a := ev.GetTimerStartedEventAttributes(); a != nil && a.GetStartToFireTimeout().AsDuration() >= time.Minute {
			timers++
		}
	}
	if timers != stuck-1 {
		t.Errorf("%d pace timers of a minute or more, want %d (one between each two signals)", timers, stuck-1)
	}
}
