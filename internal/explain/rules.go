package explain

import (
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/state"
)

// anomalyInvariant names the invariant (docs/architecture.md) each of
// reconciliation's per-reservation anomalies breaks.
var anomalyInvariant = map[string]string{
	reconcile.ProjectionBehind:   "I7", // the two stores disagree on the unit
	reconcile.CompensationStall:  "I4", // a rejected reservation's unit not given back
	reconcile.DeadlinePassed:     "I6", // open past its deadline
	reconcile.UnsentPastDeadline: "I3", // admitted, its message never applied
	reconcile.ReleaseMissing:     "I5", // a cancelled order's unit not released
	reconcile.PaidButCompensated: "I1", // a sold unit back on sale in Redis
	reconcile.CompensatedDiffers: "I4",
	reconcile.LostSaga:           "I6", // an open order nothing will cancel
}

// facts are the report's statuses in the words of reconciliation's rules.
func facts(rep Report) reconcile.Facts {
	st := rep.Status
	f := reconcile.Facts{Order: st.Order, HasOrder: rep.OrderID != nil, Changed: st.Changed, Deadline: st.Deadline,
		RedisDeadline: redisDeadline(rep)}
	f.PG = st.Reservation // none when PostgreSQL has no row
	if r, err := state.ParseReservation(st.Redis); err == nil {
		f.Redis = r // ABSENT (or a text no status spells): none
	}
	return f
}

// reconcileAction is the repair that fits one of reconciliation's findings
// and its command: reconciliation repairs its AUTO anomalies itself; a
// running saga rebuilds a projection it still can by the repair signal; a
// MANUAL one is recorded by the run for people to decide.
func reconcileAction(rep Report, fd reconcile.Finding) (string, string) {
	switch {
	case fd.Manual:
		return "decide by hand (reconciliation records it as MANUAL with its evidence; docs/operations.md#reconciliation)", reconcileRun(rep)
	case fd.Type == reconcile.ProjectionBehind && rep.Saga.Running() && rep.Status.Redis == state.ReservationReserved.String():
		return "rebuild-projection", repairCommand(rep, "rebuild-projection")
	}
	return "reconcile (" + fd.Type + ": " + fd.Detail + ")", reconcileRun(rep)
}
