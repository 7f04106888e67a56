-- +goose Up
-- A refund that can never pass (the provider refuses it for good, or the
-- payment is not one to give back) is held for a person as MANUAL instead of
-- being started again and again: the refund relay claims only PENDING and
-- STARTED tasks. The overdue-refund alert still counts it (not DONE).
ALTER TABLE refund_task DROP CONSTRAINT IF EXISTS refund_task_status_check;
ALTER TABLE refund_task ADD CONSTRAINT refund_task_status_check CHECK (status IN ('PENDING', 'STARTED', 'DONE', 'MANUAL'));
DROP INDEX IF EXISTS idx_refund_task_due;
CREATE INDEX idx_refund_task_due ON refund_task (next_attempt_at) WHERE status IN ('PENDING', 'STARTED');

-- +goose Down
DROP INDEX IF EXISTS idx_refund_task_due;
CREATE INDEX idx_refund_task_due ON refund_task (next_attempt_at) WHERE status <> 'DONE';
UPDATE refund_task SET status = 'PENDING' WHERE status = 'MANUAL';
ALTER TABLE refund_task DROP CONSTRAINT IF EXISTS refund_task_status_check;
ALTER TABLE refund_task ADD CONSTRAINT refund_task_status_check CHECK (status IN ('PENDING', 'STARTED', 'DONE'));
