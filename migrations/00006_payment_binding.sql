-- +goose Up
-- The payment that paid an order: at most one successful payment per order;
-- any other successful payment on it is owed back (refund_task).
ALTER TABLE orders ADD COLUMN payment_id uuid;
UPDATE orders o SET payment_id = (SELECT p.payment_id FROM payment_record p
    WHERE p.order_id = o.order_id AND p.status = 'SUCCESS' ORDER BY p.created_at, p.payment_id LIMIT 1)
WHERE o.status = 'PAID';
ALTER TABLE orders ADD CONSTRAINT orders_paid_has_payment CHECK (status <> 'PAID' OR payment_id IS NOT NULL) NOT VALID;

-- +goose Down
ALTER TABLE orders DROP CONSTRAINT orders_paid_has_payment;
ALTER TABLE orders DROP COLUMN payment_id;
