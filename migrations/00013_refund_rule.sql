-- +goose Up
-- The one rule of "this payment must be refunded" (issue 24): a successful
-- payment not yet refunded (SUCCESS, or REFUNDING: its refund begun, not
-- finished) that its order does not keep, because the order is cancelled or
-- being/been refunded, or because the order is PAID by another payment (at
-- most one successful payment per order). A PAID order without a payment_id
-- (a row older than 00006, whose constraint is NOT VALID) keeps it.
--
-- Its callers: payments.Store.RecordTx writes the refund obligation
-- (refund_task) when it holds (for a SUCCESS payment only: a refunding one
-- already has its task), payments.Store.BeginRefund starts a refund only when
-- it holds (a SUCCESS payment only: a refunding or refunded one is returned
-- as is), and reconciliation finds every payment it holds for that has no
-- live obligation. Amounts are not part of it: a payment whose amount differs
-- from its order's is never recorded (payments.ErrAmountMismatch).
--
-- A plain SQL expression, IMMUTABLE: the planner inlines it into the
-- callers' queries. Never NULL for non-NULL statuses.
-- +goose StatementBegin
CREATE FUNCTION seckill_refund_owed(p_payment_id uuid, p_payment_status text, p_order_status text, p_order_payment_id uuid)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT p_payment_status IN ('SUCCESS', 'REFUNDING')
       AND (p_order_status IN ('CANCELLED', 'REFUNDING', 'REFUNDED')
            OR (p_order_status = 'PAID' AND p_order_payment_id IS NOT NULL AND p_order_payment_id <> p_payment_id))
$fn$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION seckill_refund_owed(uuid, text, text, uuid);
