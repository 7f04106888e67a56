package e2e

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// Queries of the leased rows of each kind: id, lease owner, attempt.
const (
	leasedCompensations = `SELECT task_id::text, lease_owner, attempt_count FROM compensation_task WHERE status = 'CLAIMED'`
	leasedOutbox        = `SELECT event_id::text, lease_owner, attempt_count FROM event_outbox WHERE status = 'SENDING'`
)

type lease struct {
	owner    string
	attempts int
}

// leased reads the rows query names as leased now.
func (c *Cluster) leased(ctx context.Context, query string) (map[string]lease, error) {
	rows, err := c.Pool.Query(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]lease{}
	for rows.Next() {
		var id string
		var l lease
		var owner *string
		if err := rows.Scan(&id, &owner, &l.attempts); err != nil {
			return nil, err
		}
		if owner != nil {
			l.owner = *owner
		}
		out[id] = l
	}
	return out, rows.Err()
}

// catchLease gets victim to hold a lease of the kind query reads when it is
// SIGKILLed: the survivor is frozen (SIGSTOP) so that every new lease is the
// victim's; once one shows, the victim is frozen too and, if it still holds
// that lease, killed there; then the survivor is thawed. It returns the
// row whose lease died with the victim ("" if none was caught within d: the
// victim is killed anyway).
func (c *Cluster) catchLease(ctx context.Context, victim, survivor *Proc, query string, d time.Duration) (string, int, error) {
	if err := survivor.Signal(syscall.SIGSTOP); err != nil {
		return "", 0, err
	}
	defer func() { _ = survivor.Signal(syscall.SIGCONT) }()
	// Leases taken before the freeze may be either's.
	before, err := c.leased(ctx, query)
	if err != nil {
		return "", 0, err
	}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		now, err := c.leased(ctx, query)
		if err != nil {
			return "", 0, err
		}
		for id, l := range now {
			if b, ok := before[id]; ok && b == l {
				continue
			}
			if err := victim.Signal(syscall.SIGSTOP); err != nil {
				return "", 0, err
			}
			// A statement the victim sent before it froze (say its mark SENT)
			// lands first.
			if err := c.awaitLeaseWrites(ctx); err != nil {
				return "", 0, err
			}
			again, err := c.leased(ctx, query)
			if err != nil {
				return "", 0, err
			}
			if again[id] == l {
				return id, l.attempts, victim.Kill(syscall.SIGKILL)
			}
			if err := victim.Signal(syscall.SIGCONT); err != nil {
				return "", 0, err
			}
			break // finished meanwhile: look again
		}
		if err := waitGone(ctx, 5*time.Millisecond); err != nil {
			return "", 0, err
		}
	}
	return "", 0, victim.Kill(syscall.SIGKILL)
}

// awaitLeaseWrites waits (up to 2 s: one may wait on a lock of the frozen
// survivor) until no statement updating a leased table is running.
func (c *Cluster) awaitLeaseWrites(ctx context.Context) error {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		var n int
		if err := c.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND state = 'active' AND pid <> pg_backend_pid() AND query ~* 'update\s+(event_outbox|compensation_task)'`).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if err := waitGone(ctx, 2*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// caughtLease says which lease died with a kill.
func caughtLease(id string, err error) string {
	switch {
	case err != nil:
		return fmt.Sprintf("; catching a lease failed: %v", err)
	case id == "":
		return "; no lease of its caught in time"
	}
	return "; killed holding the lease of " + id
}

// judgeLeases checks that every lease caught dying with its holder was
// taken over: its row finished (task applied, event sent) on a later
// attempt than the one killed.
func (c *Cluster) judgeLeases(ctx context.Context, rep *MultiReport, bad, seen func(string, ...any)) error {
	for _, k := range rep.Kills {
		if k.Lease == "" {
			continue
		}
		var status string
		var attempts int
		err := c.Pool.QueryRow(ctx, `SELECT status, attempt_count FROM compensation_task WHERE task_id::text = $1
			UNION ALL SELECT status, attempt_count FROM event_outbox WHERE event_id::text = $1`, k.Lease).Scan(&status, &attempts)
		if err != nil {
			return fmt.Errorf("lease %s of %s: %w", k.Lease, k.Proc, err)
		}
		done := status == "APPLIED" || status == "VERIFIED" || status == "SENT"
		if done && attempts == k.LeaseAttempt {
			// The victim's last write was on its way to PostgreSQL as it froze.
			seen("the lease of %s held by %s was finished by its own last write as it was killed", k.Lease, k.Proc)
			continue
		}
		if !done || attempts < k.LeaseAttempt {
			bad("lease %s held by %s when killed (attempt %d): %s after %d attempts (want finished by a later attempt)",
				k.Lease, k.Proc, k.LeaseAttempt, status, attempts)
			continue
		}
		seen("the lease of %s held by %s when killed was taken over: %s at attempt %d", k.Lease, k.Proc, status, attempts)
	}
	return nil
}
