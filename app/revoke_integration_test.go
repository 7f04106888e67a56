package app

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/platform/auth"
	"github.com/seckill/seckill/internal/testenv"
)

// A revocation written to PostgreSQL reaches a running gateway's
// authenticator within its refresh interval: the user's cached and uncached
// tokens issued before are refused, other users' and later tokens are not.
func TestGatewayRefusesRevokedTokensAfterARefresh(t *testing.T) {
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	cfg.AuthRevocationRefresh = 20 * time.Millisecond
	conns := &Conns{Pool: pool}
	a, err := gatewayAuthenticator(cfg, conns, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range conns.closers {
			c()
		}
	})
	old, err := a.Mint(7, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.Mint(8, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := a.User(old); err != nil || id != 7 { // now cached
		t.Fatalf("User before the revocation = %d, %v", id, err)
	}
	ctx := context.Background()
	nb, err := auth.RevokeTokens(ctx, pool, 7, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// a second revocation never moves the epoch back, and names who did it
	if nb2, err := auth.RevokeTokens(ctx, pool, 7, "bob"); err != nil || nb2.Before(nb) {
		t.Fatalf("second revocation = %s, %v; want not before %s", nb2, err, nb)
	}
	var by string
	if err := pool.QueryRow(ctx, `SELECT revoked_by FROM user_token_epoch WHERE user_id = 7`).Scan(&by); err != nil || by != "bob" {
		t.Fatalf("revoked_by = %q, %v", by, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, err := a.User(old); !errors.Is(err, auth.ErrUnauthenticated); _, err = a.User(old) {
		if time.Now().After(deadline) {
			t.Fatalf("a revoked user's token still accepted 10 s after the revocation: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if id, err := a.User(other); err != nil || id != 8 {
		t.Fatalf("another user's token after the revocation = %d, %v", id, err)
	}
	for !time.Now().After(nb) { // a token issued at or after the epoch is accepted
		time.Sleep(10 * time.Millisecond)
	}
	fresh, err := a.Mint(7, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := a.User(fresh); err != nil || id != 7 {
		t.Fatalf("a token issued after the revocation = %d, %v", id, err)
	}
	if _, err := auth.RevokeTokens(ctx, pool, 0, "alice"); err == nil {
		t.Fatal("revoking user 0 was accepted")
	}
	if _, err := auth.RevokeTokens(ctx, pool, 7, ""); err == nil {
		t.Fatal("a revocation naming nobody was accepted")
	}
}
