package explain

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/state"
)

// The verdict judges as a reconciliation run with the same watermark would:
// a paid order whose Redis hash is gone is left alone while it changed
// within the watermark (the note says what reconciliation would find), and
// is ORDER_PROJECTION_BEHIND once it is older.
func TestVerdictHonoursReconciliationsWatermark(t *testing.T) {
	now := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	oid := uuid.New()
	rep := Report{ReservationID: uuid.New(), OrderID: &oid, ActivityID: 7, Status: Statuses{Reservation: state.ReservationOrderCreated,
		Order: state.OrderPaid, Redis: Absent, Changed: now.Add(-30 * time.Second), Deadline: now.Add(time.Hour)}}
	v := judge(rep, now, 2*time.Minute)
	if !v.Consistent || !strings.Contains(v.Note, reconcile.ProjectionBehind) {
		t.Errorf("within the watermark: %+v, want consistent with a note naming %s", v, reconcile.ProjectionBehind)
	}
	rep.Status.Changed = now.Add(-3 * time.Minute)
	v = judge(rep, now, 2*time.Minute)
	if v.Consistent || len(v.Problems) != 1 || v.Problems[0].Anomaly != reconcile.ProjectionBehind || v.Problems[0].Invariant != "I7" ||
		v.Command != "seckill reconcile run --activity 7" {
		t.Errorf("past the watermark: %+v, want %s (I7) and the reconcile command", v, reconcile.ProjectionBehind)
	}
}
