package workflows

// The order's life after it is created: payment, expiry, the user's cancel
// and the payment-vs-cancel protocol (docs/spec.md#payment-vs-cancel).

import (
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// awaitPayment waits for the order's payment, the user's cancel or the
// expiry timer. A payment signal is a hint: PostgreSQL decides.
func (s *saga) awaitPayment(ctx workflow.Context) (SagaState, error) {
	for {
		wait := s.state.ExpiresAt.Sub(workflow.Now(ctx)) + expiryMargin
		tctx, stopTimer := workflow.WithCancel(ctx)
		timer := workflow.NewTimer(tctx, max(wait, expiryMargin))
		event := ""
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(s.payments, func(c workflow.ReceiveChannel, _ bool) {
			var p PaymentSignal
			c.Receive(ctx, &p)
			event = "payment"
		})
		sel.AddReceive(s.cancels, func(c workflow.ReceiveChannel, _ bool) {
			var c2 CancelSignal
			c.Receive(ctx, &c2)
			event = "cancel"
		})
		var repair steps.RepairRequest
		sel.AddReceive(s.repairs, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, &repair)
			event = "repair"
		})
		sel.AddFuture(timer, func(workflow.Future) { event = "expired" })
		sel.Select(ctx)
		stopTimer()

		switch event {
		case "payment":
			var status state.Order
			if err := workflow.ExecuteActivity(dbActivity(ctx), act.OrderStatus, s.orderID()).Get(ctx, &status); err != nil {
				return s.state, err
			}
			if status == state.OrderPaid {
				s.setStatus(ctx, state.SagaPaid, "paid")
				return s.state, nil
			}
			s.state.Steps = append(s.state.Steps, "payment signal, but the order is "+status.String()+": still waiting")
		case "cancel", "expired":
			done, err := s.cancel(ctx, event == "expired")
			if err != nil || done {
				return s.state, err
			}
		case "repair":
			action, err := s.repair(ctx, repair)
			if err != nil {
				return s.state, err
			}
			switch action {
			case steps.RepairForceCancelUnpaid:
				s.state.Steps = append(s.state.Steps, "repair "+repair.RepairID+": force cancel by "+repair.Operator)
				done, err := s.cancel(ctx, false)
				if err != nil || done {
					return s.state, err
				}
			case steps.RepairRebuildProjection:
				if err := s.project(ctx, "repair "+repair.RepairID+": projection "); err != nil {
					return s.state, err
				}
			}
		}
	}
}

// project runs the idempotent Redis projection of the created order.
func (s *saga) project(ctx workflow.Context, step string) error {
	m := s.in.Message
	var p steps.ProjectionResult
	if err := s.forward(ctx, act.ProjectOrderCreated, steps.ProjectionInput{
		ReservationID: m.ReservationID, OrderID: s.orderID(), ActivityID: m.ActivityID, SKUID: m.SKUID, Bucket: m.Bucket,
	}, &p); err != nil {
		return err
	}
	if step != "" {
		s.state.Steps = append(s.state.Steps, step+p.Text)
	} else if p.Code < 0 {
		s.state.Steps = append(s.state.Steps, "redis projection not applied: "+p.Text+" (reconciliation rebuilds it)")
	}
	return nil
}

// drain takes the signals still buffered when the saga is done, so that none
// is left unhandled: each is named in the saga's steps. A payment signal is
// only a hint (the order row is the fact); a cancel or repair after the end
// changes nothing (the operator reads the steps).
func (s *saga) drain(ctx workflow.Context) {
	for _, c := range []struct {
		name string
		ch   workflow.ReceiveChannel
	}{{SignalPayment, s.payments}, {SignalCancel, s.cancels}, {SignalRepair, s.repairs}} {
		name, ch := c.name, c.ch
		for {
			var v any
			if !ch.ReceiveAsync(&v) {
				break
			}
			s.state.Steps = append(s.state.Steps, name+" signal after the end: ignored")
		}
	}
	workflow.GetLogger(ctx).Debug("saga.drained", "reservation_id", s.state.ReservationID)
}

func (s *saga) orderID() uuid.UUID { return uuid.MustParse(s.state.OrderID) }

// cancel runs the payment-vs-cancel protocol (docs/spec.md#payment-vs-cancel): CANCEL_PENDING by
// CAS, ask the provider (query, close), record a payment it reports, else
// cancel by CAS with NOT EXISTS payment, then release Redis. A PAID order is
// never cancelled. done=false means the order is not yet expired: wait again.
func (s *saga) cancel(ctx workflow.Context, expired bool) (bool, error) {
	oid := s.orderID()
	var began state.Cancel
	if err := workflow.ExecuteActivity(dbActivity(ctx), act.BeginCancel, activities.CancelInput{OrderID: oid, RequireExpired: expired}).Get(ctx, &began); err != nil {
		return true, err
	}
	if began == state.CancelPaymentStarting {
		// The buyer is starting a payment at the provider right now; the
		// cancel waits for it (bounded: a stale start stops counting).
		if err := workflow.Sleep(ctx, paymentStartWait); err != nil {
			return true, err
		}
		return s.cancel(ctx, expired)
	}
	switch status := began.Order(); status {
	case state.OrderPaid, state.OrderRefunding, state.OrderRefunded:
		s.setStatus(ctx, state.OrderSaga(status), "cancel found the order "+status.String())
		return true, nil
	case state.OrderCreated, state.OrderPaying:
		s.state.Steps = append(s.state.Steps, "expiry timer fired before the database clock passed expires_at: waiting again")
		return false, nil
	case state.OrderCancelled:
		return true, s.release(ctx)
	}
	s.setStatus(ctx, state.SagaCancelPending, map[bool]string{true: "payment window expired", false: "user asked to cancel"}[expired])
	var closed steps.CloseResult
	if err := workflow.ExecuteActivity(providerActivity(ctx), act.CloseAtProvider, oid).Get(ctx, &closed); err != nil {
		return true, err
	}
	if closed.Outcome == steps.ClosePaid {
		var rec steps.RecordResult
		if err := workflow.ExecuteActivity(dbActivity(ctx), act.RecordPayment, closed.Evidence).Get(ctx, &rec); err != nil {
			return true, err
		}
		s.setStatus(ctx, state.OrderSaga(rec.OrderStatus), "provider reported the payment during cancel: "+string(rec.Outcome))
		return true, nil
	}
	var final state.Order
	if err := workflow.ExecuteActivity(dbActivity(ctx), act.FinalCancel, oid).Get(ctx, &final); err != nil {
		return true, err
	}
	if final != state.OrderCancelled {
		s.setStatus(ctx, state.OrderSaga(final), "a payment won the race: order is "+final.String())
		return true, nil
	}
	return true, s.release(ctx)
}

func (s *saga) release(ctx workflow.Context) error {
	m := s.in.Message
	var r steps.ProjectionResult
	if err := workflow.ExecuteActivity(dbActivity(ctx), act.ReleaseRedis, steps.ReleaseInput{
		ReservationID: m.ReservationID, OrderID: s.orderID(), ActivityID: m.ActivityID, SKUID: m.SKUID, Bucket: m.Bucket,
	}).Get(ctx, &r); err != nil {
		return err
	}
	step := "cancelled; unit given back to redis"
	if r.Code < 0 {
		step = "cancelled; redis release not applied (" + r.Text + "): reconciliation rebuilds counters"
	}
	s.setStatus(ctx, state.SagaCancelled, step)
	return nil
}

// providerActivity options: calls to the payment provider, retried with
// backoff (every call is idempotent at the provider).
func providerActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
}
