package reconcile

import (
	"time"

	"github.com/seckill/seckill/state"
)

// Facts are what the per-reservation rules read of one reservation: its
// PostgreSQL row and order, and its Redis hash. Reconciliation reads them
// for every reservation it walks; `seckill explain` for the one it tells
// about: both judge them with Check, so they cannot disagree.
type Facts struct {
	// PG is the PostgreSQL reservation's status, "" when it has no row.
	PG state.Reservation
	// Order is its order's status, "" when it has none.
	Order    state.Order
	HasOrder bool
	// Changed is when the PostgreSQL row last changed (updated_at).
	Changed time.Time
	// Deadline is the PostgreSQL row's business deadline.
	Deadline time.Time
	// Redis is the Redis hash's status, "" when the hash is gone.
	Redis state.Reservation
	// RedisDeadline is the hash's business deadline (zero if unknown).
	RedisDeadline time.Time
}

// Finding is one anomaly of one reservation, as the rules see it.
type Finding struct {
	Type string
	// Manual: people decide (a MANUAL anomaly); otherwise reconciliation
	// repairs it through the standard transition towards Target.
	Manual bool
	Target string
	Detail string
}

// CheckStored is the PostgreSQL-side rule: what a reservation PostgreSQL
// holds, unchanged since watermark, says about its Redis side.
func CheckStored(f Facts, watermark time.Time) (Finding, bool) {
	if f.PG.IsZero() || !f.Changed.Before(watermark) {
		return Finding{}, false
	}
	redis := f.Redis
	switch f.PG {
	case state.ReservationOrderCreated:
		if f.Order == state.OrderPaid && redis == state.ReservationCompensated {
			return Finding{Type: PaidButCompensated, Manual: true,
				Detail: "order PAID in PostgreSQL, reservation COMPENSATED in Redis: freeze and decide by hand"}, true
		}
		if redis.IsZero() || redis == state.ReservationReserved {
			return Finding{Type: ProjectionBehind, Target: state.ReservationOrderCreated.String(),
				Detail: "order in PostgreSQL, Redis reservation " + orGone(redis) + ": the projection is rebuilt"}, true
		}
	case state.ReservationOrderRejected, state.ReservationCompensating:
		return Finding{Type: CompensationStall, Target: state.ReservationCompensated.String(),
			Detail: "reservation " + f.PG.String() + " and its unit not yet given back: the standard compensation"}, true
	case state.ReservationCancelled:
		if f.HasOrder && (redis == state.ReservationOrderCreated || redis == state.ReservationReserved) {
			return Finding{Type: ReleaseMissing, Target: state.ReservationCancelled.String(),
				Detail: "order cancelled in PostgreSQL, Redis still " + redis.String() + " holds its unit: the standard release"}, true
		}
	case state.ReservationCompensated:
		if !redis.IsZero() && redis != state.ReservationCompensated {
			return Finding{Type: CompensatedDiffers, Manual: true, Detail: "COMPENSATED in PostgreSQL, " + redis.String() + " in Redis"}, true
		}
	case state.ReservationReserved:
		if f.Deadline.Before(watermark) {
			return Finding{Type: DeadlinePassed, Target: state.ReservationOrderRejected.String(),
				Detail: "RESERVED in PostgreSQL past its business deadline: durable rejection, then compensation"}, true
		}
	}
	return Finding{}, false
}

// CheckUnsent is the Redis-side rule: a reservation still RESERVED in Redis
// past its business deadline (before watermark) that PostgreSQL never saw
// or holds as RESERVED.
func CheckUnsent(f Facts, watermark time.Time) (Finding, bool) {
	if f.Redis != state.ReservationReserved || f.RedisDeadline.IsZero() || !f.RedisDeadline.Before(watermark) {
		return Finding{}, false
	}
	if !f.PG.IsZero() && f.PG != state.ReservationReserved {
		return Finding{}, false // PostgreSQL decided: CheckStored's
	}
	return Finding{Type: UnsentPastDeadline, Target: state.ReservationCompensated.String(),
		Detail: "RESERVED in Redis past its business deadline, " + orGone(f.PG) + " in PostgreSQL: durable rejection, then compensation"}, true
}

// Check is every per-reservation rule: what reconciliation run at
// watermark's time + its watermark finds for the reservation.
func Check(f Facts, watermark time.Time) []Finding {
	var out []Finding
	if fd, ok := CheckStored(f, watermark); ok {
		out = append(out, fd)
	}
	if fd, ok := CheckUnsent(f, watermark); ok {
		out = append(out, fd)
	}
	return out
}

// CheckOpenOrder is the rule of lost sagas: an open order (CREATED, PAYING,
// CANCEL_PENDING) whose payment deadline passed before watermark, its saga
// not running. One whose saga runs is not an anomaly to repair (the saga is
// on it; reconciliation reports it LEFT).
func CheckOpenOrder(order state.Order, expires time.Time, sagaRunning bool, watermark time.Time) (Finding, bool) {
	if order != state.OrderCreated && order != state.OrderPaying && order != state.OrderCancelPending || !expires.Before(watermark) || sagaRunning {
		return Finding{}, false
	}
	return Finding{Type: LostSaga, Target: state.OrderCancelled.String(),
		Detail: "order " + order.String() + " past its payment deadline and no saga runs for it: the saga is resumed from PostgreSQL"}, true
}

func orGone(s state.Reservation) string {
	if s.IsZero() {
		return "ABSENT"
	}
	return s.String()
}
