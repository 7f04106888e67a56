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
	DueAt      time.Time // next_attempt_at before the claim: its place in line
}

// ClaimRefunds pushes the next attempt of up to batch due tasks (PENDING or
// STARTED) lease forward, FOR UPDATE SKIP LOCKED, counting an attempt on each.
// The tasks come in the order they fell due, the longest waiting first, so a
// relay that starts only the first few of a claim (its lease covers no more)
// starves none.
func (s *Store) ClaimRefunds(ctx context.Context, batch int, lease time.Duration) ([]RefundTask, error) {
	rows, err := s.pool.Query(ctx, `
		WITH due AS (
			SELECT payment_id, next_attempt_at AS due_at FROM refund_task
			WHERE status IN ('PENDING', 'STARTED') AND next_attempt_at <= clock_timestamp()
			ORDER BY next_attempt_at FOR UPDATE SKIP LOCKED LIMIT $1),
		claimed AS (
			UPDATE refund_task t SET next_attempt_at = clock_timestamp() + $2::interval, attempt_count = attempt_count + 1,
			       updated_at = clock_timestamp()
			FROM due WHERE t.payment_id = due.payment_id
			RETURNING t.payment_id, t.activity_id, t.sku_id, t.attempt_count, t.next_attempt_at, due.due_at)
		SELECT payment_id, activity_id, sku_id, attempt_count, next_attempt_at, due_at FROM claimed ORDER BY due_at, payment_id`,
		batch, lease.String())
	if err != nil {
		return nil, fmt.Errorf("claim refund tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RefundTask, error) {
		var t RefundTask
		err := row.Scan(&t.PaymentID, &t.ActivityID, &t.SKUID, &t.Attempts, &t.LeaseEnd, &t.DueAt)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim refund tasks: %w", err)
	}
	return tasks, nil
}

// HandBackRefunds makes claimed tasks whose start was not begun due again at
// once, in the place in line they had (their due time before the claim), taking
// the claim's attempt back; a task claimed anew meanwhile (its next_attempt_at
// moved) or done is left alone.
func (s *Store) HandBackRefunds(ctx context.Context, tasks []RefundTask) error {
	ids := make([]uuid.UUID, len(tasks))
	ends := make([]time.Time, len(tasks))
	dues := make([]time.Time, len(tasks))
	for i, t := range tasks {
		ids[i], ends[i], dues[i] = t.PaymentID, t.LeaseEnd, t.DueAt
	}
	if _, err := s.pool.Exec(ctx, `
		UPDATE refund_task t SET next_attempt_at = LEAST(c.due_at, clock_timestamp()), attempt_count = t.attempt_count - 1,
		       updated_at = clock_timestamp()
		FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[]) AS c(payment_id, lease_end, due_at)
		WHERE t.payment_id = c.payment_id AND t.next_attempt_at = c.lease_end AND t.status IN ('PENDING', 'STARTED')`,
		ids, ends, dues); err != nil {
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
