// Package flashsale plays a whole flash sale through the real system,
// in-process: the gateway's HTTP API, RocketMQ, the saga starter, Temporal
// sagas, the outbox relay and PostgreSQL, then checks the invariants.
// With Options.Gateway it drives a running gateway and workers instead.
// `seckill-dev demo` (the README's run command) and the end-to-end tests use it.
package flashsale

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/invariants"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/sale"
)

// Options shape one sale.
type Options struct {
	ActivityID  int64 // 0: derived from the clock
	Stock       int64
	Buyers      int
	Concurrency int
	// PGShortfall lowers PostgreSQL's stock below what Redis admits (as an
	// operator correcting stock after set-up would): those reservations are
	// rejected by PostgreSQL and compensated back to Redis.
	PGShortfall int64
	// Buckets splits the SKU's Redis stock into this many buckets
	// (docs/scale.md; 0 means 1); the workers' rebalancer moves stock to a
	// bucket that runs dry while others hold some.
	Buckets int
	// PaymentTimeout > 0 runs the payment phase: the sale's payment window,
	// after which unpaid orders are cancelled. Buyers then pay early, pay
	// right at the deadline (racing the cancel, with duplicated and delayed
	// callbacks), pay after their order was cancelled (refunded), or never.
	PaymentTimeout time.Duration
	Timeout        time.Duration
	Progress       io.Writer
	Failpoints     *failpoint.Set
	// Gateway, when set (http://host:port), is a running gateway: the sale
	// goes to it over HTTP and the running workers (bin/seckill worker) do
	// the rest; this process starts neither (see attach).
	Gateway string
	// Disrupt, when set, runs once while the buyers race, as soon as half
	// of them were answered (a failover test kills a node there); the
	// buyers go on meanwhile. Its error ends the sale with that error.
	Disrupt func(ctx context.Context) error
	// RetryUnavailable > 0: a buyer answered 503 (or not answered) tries
	// again with the same Idempotency-Key every 200 ms for up to this
	// long, as a client honouring Retry-After would (default: 3 tries);
	// buyers starting a payment, and this harness's own reads of
	// PostgreSQL and Redis, retry for as long too (a failover test).
	RetryUnavailable time.Duration
	// DisruptInPayments runs Disrupt in the payment phase, half the
	// payment window after it began, instead of at half the buyers.
	DisruptInPayments bool
	// Telemetry, when set, receives the in-process gateway's and workers'
	// metrics (a test reads its counters); a registry of its own otherwise.
	Telemetry *app.Telemetry
	// OrderDeadline is the reservations' business deadline (default 5 min):
	// a reservation not made an order by then is rejected, its unit given back.
	OrderDeadline time.Duration

	prog *progress // draws on Progress
}

// Report is the outcome of a sale.
type Report struct {
	ActivityID, SKUID int64
	HTTP              map[int]int // status code → count
	Accepted          int
	Orders            int64 // reservations that got an order (later paid or cancelled)
	Compensated       int64
	Manual            int64
	Other             int64
	// Payment phase (PaymentTimeout > 0): what buyers did.
	Plan       map[string]int
	Snapshot   invariants.Snapshot
	Violations []invariants.Violation
	AdmitTime  time.Duration
	DrainTime  time.Duration
	// With Options.Disrupt: how long it ran, and the reservations
	// admitted (202) after it returned.
	DisruptTime          time.Duration
	AcceptedAfterDisrupt int
	// Outcomes are the final outcomes, each with its Temporal UI query.
	Outcomes []Outcome
	// UI and Namespace make the outcomes' Temporal UI links.
	UI, Namespace string
}

// SKUID is the one SKU of a demo activity.
const SKUID = 1

// withDefaults fills in what opts leaves zero.
func (opts Options) withDefaults() Options {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	opts.prog = newProgress(opts.Progress)
	if opts.ActivityID == 0 {
		opts.ActivityID = time.Now().UnixMilli()
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 32
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Minute
	}
	if opts.Failpoints == nil {
		opts.Failpoints = &failpoint.Set{}
	}
	return opts
}

// system is the gateway and every worker, in this process.
type system struct {
	cfg   config.Config
	conns *app.Conns
	base  string // the gateway's http://host:port
	werr  chan error
	close func()
}

// start opens the connections and starts the gateway on a free loopback
// port and every worker.
func start(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options) (*system, error) {
	tel := opts.Telemetry
	if tel == nil {
		tel = app.NewTelemetry()
	}
	conns, err := app.Open(ctx, cfg, "seckill-demo", true, log, tel)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		conns.Close()
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	cfg.CallbackURL = base + "/v1/payments/callback" // the provider calls this process back
	// Every buyer of the demo comes from this one address: the per-address
	// limit would turn the crowd away (the per-user limit stays on).
	cfg.RateLimitIP = 0
	h, err := app.APIHandler(cfg, conns, tel, opts.Failpoints, log)
	if err != nil {
		_ = ln.Close()
		conns.Close()
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Shutdown

	wctx, stopWorkers := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() { werr <- app.RunWorkers(wctx, cfg, conns, app.AllParts, tel, opts.Failpoints, log) }()
	return &system{cfg: cfg, conns: conns, base: base, werr: werr, close: func() {
		stopWorkers()
		<-werr
		_ = srv.Shutdown(context.WithoutCancel(ctx))
		conns.Close()
	}}, nil
}

// Run sells opts.Stock units to opts.Buyers concurrent buyers and waits until
// every accepted reservation reached a final state.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options) (Report, error) {
	opts = opts.withDefaults()
	rep := Report{ActivityID: opts.ActivityID, SKUID: SKUID, HTTP: map[int]int{}}
	starter := start
	if opts.Gateway != "" {
		starter = attach
	}
	sys, err := starter(ctx, cfg, log, opts)
	if err != nil {
		return rep, err
	}
	defer sys.close()
	cfg, conns := sys.cfg, sys.conns
	rep.UI, rep.Namespace = cfg.TemporalUI, cfg.TemporalNamespace

	authn, err := app.Authenticator(cfg)
	if err != nil {
		return rep, err
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: opts.Concurrency}}
	if err := setUp(ctx, client, sys, opts); err != nil {
		return rep, err
	}
	if err := rep.admit(ctx, client, authn.Mint, sys.base, opts); err != nil {
		return rep, err
	}

	drainStart := time.Now()
	deadline := time.Now().Add(opts.Timeout)
	var buyersRun *buyers
	if opts.PaymentTimeout > 0 {
		buyersRun = rep.startBuyers(ctx, cfg, conns, client, authn.Mint, sys.base, opts)
	}
	var pd *disruption // Disrupt in the payment phase
	if opts.DisruptInPayments && opts.Disrupt != nil {
		pd = newDisruption(ctx, opts)
		time.AfterFunc(opts.PaymentTimeout/2, pd.start)
	}
	if err := rep.awaitFinal(ctx, conns, opts, deadline, sys.werr); err != nil {
		return rep, err
	}
	if buyersRun != nil {
		close(buyersRun.stop)
		err := <-buyersRun.done
		rep.Plan = buyersRun.plan
		if err != nil {
			return rep, err
		}
		if err := settle(ctx, conns, opts, deadline, sys.werr); err != nil {
			return rep, err
		}
	}
	if pd != nil {
		if rep.DisruptTime, err = pd.wait(); err != nil {
			return rep, err
		}
	}
	rep.DrainTime = time.Since(drainStart)
	if err := rep.countOutcomes(ctx, conns); err != nil {
		return rep, err
	}
	rep.Snapshot, rep.Violations, err = invariants.Check(ctx, conns.Pool, conns.Redis, opts.ActivityID, SKUID, true)
	return rep, err
}

// setUp creates the sale through the admin API and, with a shortfall,
// lowers PostgreSQL's stock below Redis's.
func setUp(ctx context.Context, client *http.Client, sys *system, opts Options) error {
	now := time.Now()
	payTimeout, deadline := 900, 300
	if opts.OrderDeadline > 0 {
		deadline = int(max(opts.OrderDeadline.Round(time.Second), time.Second) / time.Second)
	}
	if opts.PaymentTimeout > 0 {
		payTimeout = int(max(opts.PaymentTimeout.Round(time.Second), time.Second) / time.Second)
	}
	def := sale.Activity{ActivityID: opts.ActivityID, Name: fmt.Sprintf("demo %d", opts.ActivityID), StartsAt: now.Add(-time.Minute),
		EndsAt: now.Add(time.Hour), PaymentTimeoutSeconds: payTimeout, OrderDeadlineSeconds: deadline,
		SKUs: []sale.SKU{{SKUID: SKUID, Stock: opts.Stock, PriceCents: 4999, Buckets: opts.Buckets}}}
	if err := post(ctx, client, sys.base+"/v1/admin/activities", sys.cfg.AdminToken, "", def, http.StatusOK); err != nil {
		return fmt.Errorf("sale set-up: %w", err)
	}
	if opts.PGShortfall > 0 {
		if _, err := sys.conns.Pool.Exec(ctx, `UPDATE sku_inventory SET initial_stock = initial_stock - $3, available_stock = available_stock - $3
			WHERE activity_id = $1 AND sku_id = $2`, opts.ActivityID, SKUID, opts.PGShortfall); err != nil {
			return fmt.Errorf("lower PostgreSQL stock: %w", err)
		}
	}
	opts.prog.printf("sale %d: %d units in Redis, %d in PostgreSQL; %d buyers, %d at a time\n",
		opts.ActivityID, opts.Stock, opts.Stock-opts.PGShortfall, opts.Buyers, opts.Concurrency)
	return nil
}

// awaitFinal waits until every accepted reservation is final and Redis holds
// nothing open, printing progress every second.
func (r *Report) awaitFinal(ctx context.Context, conns *app.Conns, opts Options, deadline time.Time, werr <-chan error) error {
	for {
		var snap invariants.Snapshot
		if err := opts.retry(ctx, func() (err error) {
			if err = r.count(ctx, conns, opts.ActivityID); err == nil {
				snap, err = invariants.Take(ctx, conns.Pool, conns.Redis, opts.ActivityID, SKUID)
			}
			return err
		}); err != nil {
			return err
		}
		done := r.Orders + r.Compensated + r.Manual
		if done >= int64(r.Accepted) && snap.RedisOpen == 0 {
			return nil
		}
		opts.prog.update("sagas", done, int64(r.Accepted), fmt.Sprintf("final (orders %d, compensated %d, manual %d), redis open_reserved %d",
			r.Orders, r.Compensated, r.Manual, snap.RedisOpen))
		if time.Now().After(deadline) {
			hint := ""
			if opts.Gateway != "" {
				hint = " (the workers run apart from this process: is bin/seckill worker running? see its log)"
			}
			return fmt.Errorf("not quiescent after %s: %d of %d reservations final, redis open_reserved %d%s", opts.Timeout, done, r.Accepted, snap.RedisOpen, hint)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-werr:
			return fmt.Errorf("workers stopped: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *Report) count(ctx context.Context, conns *app.Conns, activityID int64) error {
	return conns.Pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE status IN ('ORDER_CREATED', 'CANCELLED')),
		       count(*) FILTER (WHERE status = 'COMPENSATED'),
		       count(*) FILTER (WHERE status = 'MANUAL_REVIEW'),
		       count(*) FILTER (WHERE status NOT IN ('ORDER_CREATED', 'COMPENSATED', 'MANUAL_REVIEW'))
		FROM inventory_reservation WHERE activity_id = $1`, activityID).Scan(&r.Orders, &r.Compensated, &r.Manual, &r.Other)
}

func post(ctx context.Context, c *http.Client, url, token, key string, body any, want int) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return errors.New(resp.Status + ": " + string(out))
	}
	return nil
}

// Print writes the report for people.
func (r Report) Print(w io.Writer) {
	s := r.Snapshot
	fmt.Fprintf(w, "\n== flash sale %d ==\n", r.ActivityID)
	fmt.Fprintf(w, "buyers answered:    %v\n", r.HTTP)
	fmt.Fprintf(w, "accepted (QUEUED):  %d in %s\n", r.Accepted, r.AdmitTime.Round(time.Millisecond))
	fmt.Fprintf(w, "orders created:     %d\n", r.Orders)
	fmt.Fprintf(w, "compensated:        %d (PostgreSQL rejected, unit given back to Redis)\n", r.Compensated)
	fmt.Fprintf(w, "manual review:      %d\n", r.Manual)
	if r.Plan != nil {
		fmt.Fprintf(w, "buyers' payments:   %v\n", r.Plan)
		fmt.Fprintf(w, "paid:               %d\n", r.Snapshot.Paid)
		fmt.Fprintf(w, "cancelled:          %d (payment window expired; unit back on sale)\n", r.Snapshot.Cancelled)
		fmt.Fprintf(w, "refunded:           %d (paid after the cancel: money returned)\n", r.Snapshot.Refunded)
	}
	fmt.Fprintf(w, "sagas drained in:   %s\n", r.DrainTime.Round(time.Millisecond))
	r.printOutcomes(w)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "PostgreSQL stock:   initial %d = available %d + occupied %d + sold %d\n", s.PGInitial, s.PGAvailable, s.PGOccupied, s.PGSold)
	fmt.Fprintf(w, "Redis stock:        initial %d = available %d + open_reserved %d + committed %d\n", s.RedisInitial, s.RedisAvailable, s.RedisOpen, s.RedisCommitted)
	if len(r.Violations) == 0 {
		fmt.Fprintln(w, "invariants:         I1-I7 hold (no oversell, one order per user, no double apply, compensation at most once, paid never cancelled and late payments refunded, nothing stuck, stock conserved)")
		return
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATION           %s\n", v)
	}
}
