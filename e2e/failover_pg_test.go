package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/backoff"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/paysim"
	"github.com/seckill/seckill/tools/flashsale"
)

// The PostgreSQL leader of a Patroni pair dies for good in the payment phase
// of a sale (its Patroni and its PostgreSQL SIGKILLed, as a lost machine):
// Patroni promotes the synchronous standby once the leader's lock expires,
// the gateway and the workers reconnect by themselves through the
// multi-host DSN (target_session_attrs=read-write), and every payment the
// provider confirmed is PAID or REFUNDED in PostgreSQL, no order is lost or
// doubled, and every invariant holds. Run by `make test-pg-failover`
// (SECKILL_PG=ha starts the pair; the killed node is started again at the
// end and rejoins as the standby).
func TestPostgresLeaderFailover(t *testing.T) {
	if os.Getenv("SECKILL_FAILOVER") != "pg" {
		t.Skip("kills the PostgreSQL leader: run by make test-pg-failover (SECKILL_FAILOVER=pg)")
	}
	cfg := e2eConfig(t)
	if !strings.Contains(cfg.PostgresDSN, "target_session_attrs=read-write") {
		t.Fatalf("SECKILL_PG_DSN is not the Patroni pair's multi-host DSN: make test-pg-failover sets it")
	}
	t.Cleanup(func() { stackUp(t, "pg-ha", "up") })

	const stock, buyers = 200, 300
	var fo pgFailover
	activityID := testenv.ActivityID()
	rep, err := flashsale.Run(context.Background(), cfg, logger(), flashsale.Options{ActivityID: activityID,
		Stock: stock, Buyers: buyers, Concurrency: 16, PaymentTimeout: 24 * time.Second,
		RetryUnavailable: 90 * time.Second, Timeout: 5 * time.Minute, Progress: testWriter{t},
		DisruptInPayments: true, Disrupt: fo.kill})
	if err != nil {
		t.Fatalf("sale: %v (report so far %+v)", err, rep)
	}
	t.Logf("failover: leader %s SIGKILLed (Patroni and PostgreSQL) half way into the payment window, %s leads %s later",
		fo.old, fo.promoted, fo.took.Round(time.Millisecond))
	t.Logf("callers: %v; buyers' payments %v; paid %d, cancelled %d, refunded %d", rep.HTTP, rep.Plan,
		rep.Snapshot.Paid, rep.Snapshot.Cancelled, rep.Snapshot.Refunded)
	for _, v := range rep.Violations {
		t.Errorf("invariant violated: %s", v)
	}
	if rep.Accepted != stock || rep.Orders != stock || rep.Manual != 0 {
		t.Errorf("%d admitted, %d orders, %d manual; want %d orders", rep.Accepted, rep.Orders, rep.Manual, stock)
	}
	if s := rep.Snapshot; s.ValidOrders > s.PGInitial {
		t.Errorf("PostgreSQL oversold: %d orders for %d units", s.ValidOrders, s.PGInitial)
	}
	checkProviderPayments(t, cfg, activityID)
}

// checkProviderPayments: every order whose payment the provider settled is
// PAID, or REFUNDED with the provider's refund.
func checkProviderPayments(t *testing.T, cfg config.Config, activityID int64) {
	t.Helper()
	ctx := context.Background()
	conns, err := app.Open(ctx, cfg, "seckill-e2e-failover-check", false, logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	rows, err := conns.Pool.Query(ctx, `SELECT order_id, status FROM orders WHERE activity_id = $1`, activityID)
	if err != nil {
		t.Fatal(err)
	}
	status := map[uuid.UUID]string{}
	for rows.Next() {
		var id uuid.UUID
		var st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		status[id] = st
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	provider := &paysim.Client{BaseURL: cfg.PaysimURL, MerchantKey: cfg.PaysimMerchantKey}
	confirmed := map[string]int{}
	for id, st := range status {
		p, err := provider.FindByOrder(ctx, id)
		if errors.Is(err, paysim.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("provider's payment of order %s: %v", id, err)
		}
		switch p.Status {
		case paysim.StatusPaid:
			confirmed[st]++
			if st != "PAID" {
				t.Errorf("order %s: the provider took the money, PostgreSQL says %s", id, st)
			}
		case paysim.StatusRefunded:
			confirmed[st]++
			if st != "REFUNDED" && st != "CANCELLED" {
				t.Errorf("order %s: the provider refunded, PostgreSQL says %s", id, st)
			}
		}
	}
	t.Logf("payments the provider confirmed, by PostgreSQL's order status: %v", confirmed)
}

// pgFailover is the leader killed and how long its standby took to lead.
type pgFailover struct {
	old, promoted string
	took          time.Duration
}

// kill SIGKILLs the Patroni node that leads (its process group: Patroni and
// its PostgreSQL) and waits until the other node is the leader.
func (f *pgFailover) kill(ctx context.Context) error {
	leader, err := patroniLeader(ctx)
	if err != nil {
		return err
	}
	f.old = leader
	pid, err := stackPidOf("pg-ha-" + leader)
	if err != nil {
		return err
	}
	// Patroni starts PostgreSQL in a session of its own: its postmaster is
	// killed by its pid file (its backends follow it).
	pm, err := os.ReadFile(filepath.Join(stackDir, "data", "pg-ha", leader, "postmaster.pid")) // #nosec G304 -- the stack's own file
	if err != nil {
		return err
	}
	postmaster, err := strconv.Atoi(strings.SplitN(string(pm), "\n", 2)[0])
	if err != nil {
		return fmt.Errorf("postmaster.pid of %s: %w", leader, err)
	}
	at := time.Now()
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill the process group of %s (%d): %w", leader, pid, err)
	}
	if err := syscall.Kill(postmaster, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill the PostgreSQL of %s (%d): %w", leader, postmaster, err)
	}
	for ctx.Err() == nil {
		if l, err := patroniLeader(ctx); err == nil && l != leader {
			f.promoted, f.took = l, time.Since(at)
			return nil
		}
		if err := backoff.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// patroniLeader asks each node's REST API (PostgreSQL port + 3000) which
// member leads and answers as primary.
func patroniLeader(ctx context.Context) (string, error) {
	var last error
	for _, port := range []int{18441, 18442} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/cluster", port), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			continue
		}
		var c struct {
			Members []struct {
				Name, Role, State string
			} `json:"members"`
		}
		err = json.NewDecoder(resp.Body).Decode(&c)
		_ = resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		for _, m := range c.Members {
			if m.Role == "leader" && m.State == "running" {
				return m.Name, nil
			}
		}
		last = fmt.Errorf("no running leader in %+v", c.Members)
	}
	return "", last
}
