package auth

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Revocations answers a user's "not before" epoch: that user's tokens
// issued (iat) before it are refused.
type Revocations interface {
	NotBefore(user int64) (time.Time, bool)
}

// Epochs holds the rows of user_token_epoch that can still refuse a token
// (moved within the last maxTTL plus leeway: an older epoch names only
// tokens that have expired anyway), reloaded whole by Refresh.
type Epochs struct {
	pool   *pgxpool.Pool
	maxTTL time.Duration
	m      atomic.Pointer[map[int64]time.Time]
}

// LoadEpochs reads the epochs once: a gateway that cannot read them does
// not start.
func LoadEpochs(ctx context.Context, pool *pgxpool.Pool, maxTTL time.Duration) (*Epochs, error) {
	e := &Epochs{pool: pool, maxTTL: maxTTL}
	if err := e.Refresh(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// NotBefore implements Revocations.
func (e *Epochs) NotBefore(user int64) (time.Time, bool) {
	m := e.m.Load()
	if m == nil {
		return time.Time{}, false
	}
	t, ok := (*m)[user]
	return t, ok
}

// Refresh reloads the epochs; on an error the last ones stay in force.
func (e *Epochs) Refresh(ctx context.Context) error {
	rows, err := e.pool.Query(ctx, `SELECT user_id, not_before FROM user_token_epoch
		WHERE not_before > now() - make_interval(secs => $1)`, (e.maxTTL + leeway).Seconds())
	if err != nil {
		return fmt.Errorf("load token epochs: %w", err)
	}
	m := map[int64]time.Time{}
	var user int64
	var nb time.Time
	if _, err := pgx.ForEachRow(rows, []any{&user, &nb}, func() error { m[user] = nb; return nil }); err != nil {
		return fmt.Errorf("load token epochs: %w", err)
	}
	e.m.Store(&m)
	return nil
}

// Run refreshes the epochs every interval until ctx ends, logging (and
// keeping the last epochs) when PostgreSQL does not answer.
func (e *Epochs) Run(ctx context.Context, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, every)
			if err := e.Refresh(rctx); err != nil && ctx.Err() == nil {
				log.Warn("token epochs not refreshed; the last ones stay in force", "err", err)
			}
			cancel()
		}
	}
}

// RevokeTokens refuses every token of user issued up to now: the epoch
// moves to the next whole second (iat has whole seconds), never back. It
// returns the epoch in force; the gateways apply it within their refresh
// interval.
func RevokeTokens(ctx context.Context, pool *pgxpool.Pool, user int64, by string) (time.Time, error) {
	if user <= 0 {
		return time.Time{}, fmt.Errorf("user id must be positive, got %d", user)
	}
	if by == "" {
		return time.Time{}, fmt.Errorf("revoke tokens of user %d: who revokes must be named", user)
	}
	var nb time.Time
	err := pool.QueryRow(ctx, `INSERT INTO user_token_epoch AS e (user_id, not_before, revoked_by)
		VALUES ($1, date_trunc('second', clock_timestamp()) + interval '1 second', $2)
		ON CONFLICT (user_id) DO UPDATE
		SET not_before = GREATEST(e.not_before, EXCLUDED.not_before),
		    revoked_by = EXCLUDED.revoked_by, updated_at = now()
		RETURNING not_before`, user, by).Scan(&nb)
	if err != nil {
		return time.Time{}, fmt.Errorf("revoke tokens of user %d: %w", user, err)
	}
	return nb, nil
}
