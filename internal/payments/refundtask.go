package payments

// The refund relay's side of refund_task (workers/refundrelay): claim due
// tasks by pushing their next attempt forward (their lease), hand back the
// ones not started, record each start's outcome.

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RefundTask is one refund obligation claimed by a refund relay.
type RefundTask struct {
	PaymentID  uuid.UUID
	ActivityID int64
	SKUID      int64
	Attempts   int       // attempt_count, this claim's attempt included
	LeaseEnd   time.Time // next_attempt_at as the claim set it
}

// ClaimRefunds pushes the next attempt of up to batch due tasks (PENDING or
// STARTED) lease forward, FOR UPDATE SKIP LOCKED, counting an attempt on each.
func (s *Store) ClaimRefunds(ctx context.Context, batch int, lease time.Duration) ([]RefundTask, error) {
	rows, err := s.pool.Query(ctx, `
		WITH due AS (
			SELECT payment_id FROM refund_task
			WHERE status IN ('PENDING', 'STARTED') AND next_attempt_at <= clock_timestamp()
			ORDER BY next_attempt_at FOR UPDATE SKIP LOCKED LIMIT $1)
		UPDATE refund_task t SET next_attempt_at = clock_timestamp() + $2::interval, attempt_count = attempt_count + 1,
		       updated_at = clock_timestamp()
		FROM due WHERE t.payment_id = due.payment_id
		RETURNING t.payment_id, t.activity_id, t.sku_id, t.attempt_count, t.next_attempt_at`, batch, lease.String())
	if err != nil {
		return nil, fmt.Errorf("claim refund tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RefundTask, error) {
		var t RefundTask
		err := row.Scan(&t.PaymentID, &t.ActivityID, &t.SKUID, &t.Attempts, &t.LeaseEnd)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim refund tasks: %w", err)
	}
	return tasks, nil
}

// HandBackRefunds makes claimed tasks whose start was not begun due again at
// once, taking the claim's attempt back; a task claimed anew meanwhile (its
// next_attempt_at moved) or done is left alone.
func (s *Store) HandBackRefunds(ctx context.Context, tasks []RefundTask) error {
	ids := make([]uuid.UUID, len(tasks))
	ends := make([]time.Time, len(tasks))
	for i, t := range tasks {
		ids[i], ends[i] = t.PaymentID, t.LeaseEnd
	}
	if _, err := s.pool.Exec(ctx, `
		UPDATE refund_task t SET next_attempt_at = clock_timestamp(), attempt_count = t.attempt_count - 1,
		       updated_at = clock_timestamp()
		FROM unnest($1::uuid[], $2::timestamptz[]) AS c(payment_id, lease_end)
		WHERE t.payment_id = c.payment_id AND t.next_attempt_at = c.lease_end AND t.status IN ('PENDING', 'STARTED')`,
		ids, ends); err != nil {
		return fmt.Errorf("hand back %d refund tasks: %w", len(ids), err)
	}
	return nil
}

// RefundStartFailed makes paymentID's task (not DONE) due again after
// retryIn, with the error (cut to 500 bytes).
func (s *Store) RefundStartFailed(ctx context.Context, paymentID uuid.UUID, retryIn time.Duration, lastErr string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE refund_task SET next_attempt_at = clock_timestamp() + $2::interval, last_error = $3,
		updated_at = clock_timestamp() WHERE payment_id = $1 AND status <> 'DONE'`, paymentID, retryIn.String(), truncate(lastErr, 500)); err != nil {
		return fmt.Errorf("refund task of %s: record the failed start: %w", paymentID, err)
	}
	return nil
}

// RefundStarted records that paymentID's RefundWorkflow was started: a
// PENDING task becomes STARTED (it stays due at its lease's end, to be
// looked at again until FinishRefund).
func (s *Store) RefundStarted(ctx context.Context, paymentID uuid.UUID) error {
	if _, err := s.pool.Exec(ctx, `UPDATE refund_task SET status = 'STARTED', last_error = NULL, updated_at = clock_timestamp()
		WHERE payment_id = $1 AND status = 'PENDING'`, paymentID); err != nil {
		return fmt.Errorf("refund task of %s → STARTED: %w", paymentID, err)
	}
	return nil
}

// RefundBacklog is how many refund obligations are not DONE and the age of
// the oldest (0: none).
func (s *Store) RefundBacklog(ctx context.Context) (tasks int64, oldest time.Duration, err error) {
	var age float64
	if err := s.pool.QueryRow(ctx, `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0)
		FROM refund_task WHERE status <> 'DONE'`).Scan(&tasks, &age); err != nil {
		return 0, 0, fmt.Errorf("read refund backlog: %w", err)
	}
	return tasks, time.Duration(age * float64(time.Second)), nil
}

// OweRefundNow writes paymentID's missing refund obligation, or makes one
// not DONE due now (reconciliation); it returns the rows written.
func (s *Store) OweRefundNow(ctx context.Context, paymentID, orderID uuid.UUID, activityID, skuID int64) (int64, error) {
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO refund_task (payment_id, order_id, activity_id, sku_id) VALUES ($1, $2, $3, $4)
		ON CONFLICT (payment_id) DO UPDATE SET next_attempt_at = clock_timestamp(), updated_at = clock_timestamp()
		WHERE refund_task.status <> 'DONE'`, paymentID, orderID, activityID, skuID)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
