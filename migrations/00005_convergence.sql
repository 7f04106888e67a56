-- +goose Up
-- Convergence after outages: what has to be durable so that nothing a crash
-- or an outage interrupts waits forever (dead-lettered messages, refunds,
-- provider transactions, reconciliation figures).

-- A message the broker gave up on (its consumer failed it more times than the
-- group's redelivery limit) lands in %DLQ%<group>; the dead-letter consumer
-- copies it here (source DLQ) so that it is visible, counted and can be
-- replayed (`seckill mq replay-dlq`), once per message_id.
ALTER TABLE message_quarantine
    ADD COLUMN source          varchar(16) NOT NULL DEFAULT 'CONSUMER' CHECK (source IN ('CONSUMER', 'DLQ')),
    ADD COLUMN reconsume_times integer,
    ADD COLUMN replayed_at     timestamptz,
    ADD COLUMN replay_count    integer     NOT NULL DEFAULT 0;
CREATE INDEX idx_message_quarantine_replay ON message_quarantine (source, created_at) WHERE replayed_at IS NULL;

-- The obligation to refund a payment that landed on a cancelled order,
-- written in the same transaction that records the payment; the refund relay
-- starts its RefundWorkflow until the refund is recorded (status DONE).
CREATE TABLE refund_task (
    payment_id       uuid        PRIMARY KEY REFERENCES payment_record (payment_id),
    order_id         uuid        NOT NULL REFERENCES orders (order_id),
    activity_id      bigint      NOT NULL,
    sku_id           bigint      NOT NULL,
    status           varchar(16) NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'STARTED', 'DONE')),
    attempt_count    integer     NOT NULL DEFAULT 0,
    -- When the relay looks at the task next (a claim pushes it forward: a lease).
    next_attempt_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX idx_refund_task_due ON refund_task (next_attempt_at) WHERE status <> 'DONE';

-- A provider transaction this system created for an order, and what became of
-- it: CREATING (the provider is being asked; a cancel waits for it), OPEN,
-- CLOSED (closed by the cancel, or found closed), PAID (its payment recorded).
ALTER TABLE payment_intent
    ADD COLUMN status     varchar(16) NOT NULL DEFAULT 'OPEN' CHECK (status IN ('CREATING', 'OPEN', 'CLOSED', 'PAID')),
    ADD COLUMN updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ALTER COLUMN provider_transaction_id DROP NOT NULL;
CREATE INDEX idx_payment_intent_open ON payment_intent (updated_at) WHERE status IN ('CREATING', 'OPEN');

ALTER TABLE reconcile_report
    ADD COLUMN skus                 integer NOT NULL DEFAULT 0,
    ADD COLUMN reservations_checked integer NOT NULL DEFAULT 0;

-- An automatic repair whose action failed (PostgreSQL, Redis or Temporal was
-- down) is FAILED, not MANUAL: the next reconciliation run retries it under
-- the same repair_id (every action is an idempotent standard transition).
ALTER TABLE repair_task DROP CONSTRAINT repair_task_status_check,
    ADD CONSTRAINT repair_task_status_check CHECK (status IN ('PENDING', 'APPLIED', 'REFUSED', 'MANUAL', 'FAILED'));

-- +goose Down
UPDATE repair_task SET status = 'MANUAL' WHERE status = 'FAILED';
ALTER TABLE repair_task DROP CONSTRAINT repair_task_status_check,
    ADD CONSTRAINT repair_task_status_check CHECK (status IN ('PENDING', 'APPLIED', 'REFUSED', 'MANUAL'));
ALTER TABLE reconcile_report DROP COLUMN reservations_checked, DROP COLUMN skus;
DROP INDEX idx_payment_intent_open;
DELETE FROM payment_intent WHERE provider_transaction_id IS NULL;
ALTER TABLE payment_intent ALTER COLUMN provider_transaction_id SET NOT NULL, DROP COLUMN updated_at, DROP COLUMN status;
DROP TABLE refund_task;
DROP INDEX idx_message_quarantine_replay;
ALTER TABLE message_quarantine DROP COLUMN replay_count, DROP COLUMN replayed_at, DROP COLUMN reconsume_times, DROP COLUMN source;
