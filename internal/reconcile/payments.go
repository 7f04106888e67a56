package reconcile

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// paymentBatch bounds the payments and provider transactions one run looks at.
const paymentBatch = 200

// refunds finds payments that are not to be kept — landed on a cancelled
// (or refunding) order, or a second payment of a paid order — and are not
// refunded (seckill_refund_owed, the rule RecordTx and BeginRefund use), older than the watermark: each must have its refund
// obligation (refund_task), due now for the refund relay. A missing task is
// written; a stalled one is made due again.
func (r *Reconciler) refunds(ctx context.Context, rep *Report) error {
	rows, err := r.pool.Query(ctx, `
		SELECT p.payment_id, p.order_id, o.activity_id, o.sku_id, p.status, COALESCE(t.status, ''), COALESCE(t.attempt_count, 0)
		FROM payment_record p JOIN orders o ON o.order_id = p.order_id
		LEFT JOIN refund_task t ON t.payment_id = p.payment_id
		WHERE seckill_refund_owed(p.payment_id, p.status, o.status, o.payment_id)
		  AND p.updated_at < $1 AND (t.status IS NULL OR t.status <> 'DONE')
		ORDER BY p.updated_at LIMIT $2`, rep.Watermark, paymentBatch)
	if err != nil {
		return fmt.Errorf("list unrefunded payments: %w", err)
	}
	type owed struct {
		paymentID, orderID uuid.UUID
		activityID, skuID  int64
		status, task       string
		attempts           int64
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (owed, error) {
		var o owed
		err := row.Scan(&o.paymentID, &o.orderID, &o.activityID, &o.skuID, &o.status, &o.task, &o.attempts)
		return o, err
	})
	if err != nil {
		return fmt.Errorf("list unrefunded payments: %w", err)
	}
	for _, o := range list {
		ev := map[string]any{"order_id": o.orderID, "payment_status": o.status, "refund_task": nonEmpty(o.task, "ABSENT"), "attempts": o.attempts}
		if o.task == state.RefundManual.String() {
			// Refused for good (HoldRefund): made due again it would fail the same way.
			r.manual(ctx, rep, RefundOwed, "payment:"+o.paymentID.String(), o.attempts, "refund held for a person (refund_task MANUAL): see its last_error", ev)
			continue
		}
		r.auto(ctx, rep, RefundOwed, "payment:"+o.paymentID.String(), o.attempts, "REFUNDED", ev, func() (string, error) {
			n, err := r.stores.Payments.OweRefundNow(ctx, o.paymentID, o.orderID, o.activityID, o.skuID)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("refund task due now (%d row)", n), nil
		})
	}
	return nil
}

// intents asks the provider about transactions this system started for
// orders that are not paid and did not change for longer than the watermark
// (callbacks give up after a while; a crash can leave one open). A payment
// the provider reports is recorded through the standard transaction (a
// cancelled order's payment then carries its refund obligation), one it
// closed is marked CLOSED, an open one of a cancelled order is closed now:
// each of those is a repair. An open one of an order still waiting for its
// payment is only looked at again later.
func (r *Reconciler) intents(ctx context.Context, rep *Report) error {
	store, prov := r.stores.Payments, r.stores.Provider
	if prov == nil {
		return nil // no provider configured on this worker
	}
	list, err := store.UnsettledIntents(ctx, r.watermark.String(), paymentBatch)
	if err != nil {
		return err
	}
	for _, it := range list {
		q, err := payments.QueryAt(ctx, prov, it.OrderID)
		p, found := q.Payment, q.Found
		if err != nil {
			r.log.Warn("reconcile.provider_query_failed", "order_id", it.OrderID, "error", err)
			continue // the provider is down: the next run asks again
		}
		cancelled := it.OrderStatus == state.OrderCancelled || it.OrderStatus == state.OrderRefunding || it.OrderStatus == state.OrderRefunded
		if found && p.Status == "PENDING" && !cancelled {
			if err := store.SettleIntent(ctx, it.OrderID, p.TransactionID, state.IntentOpen); err != nil {
				return err
			}
			continue // still payable and the order still waits for it
		}
		ev := map[string]any{"order_status": it.OrderStatus, "intent": it.Status, "transaction_id": nonEmpty(p.TransactionID, it.TransactionID),
			"provider_status": nonEmpty(string(p.Status), "NONE")}
		r.auto(ctx, rep, ProviderUnsettled, "order:"+it.OrderID.String(), it.UpdatedAt.UnixMilli(), "SETTLED", ev, func() (string, error) {
			return r.settleIntent(ctx, store, it, p, found, cancelled)
		})
	}
	return nil
}

func (r *Reconciler) settleIntent(ctx context.Context, store *payments.Store, it payments.Intent, p payments.ProviderPayment, found, cancelled bool) (string, error) {
	switch {
	case found && p.Status == "PAID":
		res, err := store.Record(ctx, p.Evidence(r.stores.Provider.Name()))
		if err != nil {
			return "", err
		}
		if res.Outcome == steps.RecordPaid && r.sagas != nil {
			if err := r.sagas.NotifyPaid(ctx, res.ReservationID, p.TransactionID); err != nil {
				r.log.Warn("reconcile.notify_paid_failed", "order_id", it.OrderID, "error", err)
			}
		}
		return "the provider reports it paid: " + string(res.Outcome), nil
	case found && p.Status == "PENDING" && cancelled:
		c, err := payments.CloseAt(ctx, r.stores.Provider, it.OrderID, r.log)
		if err != nil {
			return "", err
		}
		if c.Outcome == steps.ClosePaid {
			res, err := store.Record(ctx, c.Evidence)
			return "paid at the provider while closing: " + string(res.Outcome), err
		}
		return "closed at the provider now", store.SettleIntent(ctx, it.OrderID, p.TransactionID, state.IntentClosed)
	}
	return "closed at the provider (" + nonEmpty(string(p.Status), "no transaction") + ")", store.SettleIntent(ctx, it.OrderID, p.TransactionID, state.IntentClosed)
}
