// Package app composes seckill's processes from their parts: the gateway
// (API) and the workers. cmd/seckill runs them; the end-to-end tests and the
// demo run the very same composition in-process.
package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/checkout"
	"github.com/seckill/seckill/internal/explain"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/auth"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/platform/temporalx"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/paysim"
	"github.com/seckill/seckill/workers"
	"github.com/seckill/seckill/workers/deadletter"
	"github.com/seckill/seckill/workers/outboxrelay"
	"github.com/seckill/seckill/workers/rebalancer"
	"github.com/seckill/seckill/workers/refundrelay"
	"github.com/seckill/seckill/workers/sagastarter"
	"github.com/seckill/seckill/workers/sagaworker"
	"github.com/seckill/seckill/workers/senddue"
	"github.com/seckill/seckill/workflows"
)

// Worker parts `seckill worker` can run.
const (
	PartSendDue = "senddue"
	PartStarter = "starter"
	PartSaga    = "saga"
	PartOutbox  = "outbox"
	// PartDeadLetter copies the starter group's dead-lettered messages into message_quarantine.
	PartDeadLetter = "deadletter"
	// PartRefunds starts the refunds of payments that landed on cancelled orders until they are done.
	PartRefunds = "refunds"
	// PartRebalance moves stock between the buckets of hot SKUs (docs/scale.md),
	// beside the send-due scanner; SECKILL_REBALANCE_INTERVAL=0 switches it off.
	PartRebalance = "rebalance"
)

// AllParts lists every worker part.
var AllParts = []string{PartSendDue, PartRebalance, PartStarter, PartSaga, PartOutbox, PartDeadLetter, PartRefunds}

// Default metrics addresses, when SECKILL_METRICS_ADDR is not set.
const (
	GatewayMetricsAddr = "127.0.0.1:9464"
	WorkerMetricsAddr  = "127.0.0.1:9465"
	// A worker of some parts listens on partsMetricsBase + the bit set of
	// its parts (bit i: AllParts[i]): two different sets never collide.
	partsMetricsBase = 9480
)

// MetricsAddr is where a process serves /metrics: cfg's address when set,
// else the gateway's (parts nil) or the worker's of these parts.
func MetricsAddr(cfg config.Config, parts []string) string {
	switch {
	case cfg.MetricsAddr != "":
		return cfg.MetricsAddr
	case parts == nil:
		return GatewayMetricsAddr
	}
	bits := 0
	for i, p := range AllParts {
		if slices.Contains(parts, p) {
			bits |= 1 << i
		}
	}
	if bits == 1<<len(AllParts)-1 {
		return WorkerMetricsAddr
	}
	return fmt.Sprintf("127.0.0.1:%d", partsMetricsBase+bits)
}

// NeedsTemporal reports whether any of parts talks to Temporal.
func NeedsTemporal(parts []string) bool {
	return slices.Contains(parts, PartStarter) || slices.Contains(parts, PartSaga) || slices.Contains(parts, PartRefunds)
}

// Conns are the shared connections of a process. Close releases them.
type Conns struct {
	Pool     *pgxpool.Pool
	Verify   *pgxpool.Pool // fresh connections to settle unknown commits
	Redis    redis.UniversalClient
	Producer *mq.Producer
	Temporal client.Client // nil unless dialled
	// Provider is the payment provider client (nil: payment activities fail).
	Provider payments.Provider

	closers      []func()           // parts built on these connections, closed first
	temporalOpts []temporalx.Option // Temporal's dial options (RunWorkers' saga worker client)
}

// Open connects to PostgreSQL, Redis and RocketMQ (and Temporal if
// withTemporal). With tel, the Temporal SDK's metrics go to tel's registry.
// In production it refuses a database role that owns the schema.
func Open(ctx context.Context, cfg config.Config, producerGroup string, withTemporal bool, log *slog.Logger, tel *Telemetry) (*Conns, error) {
	c := &Conns{}
	var err error
	if c.Pool, err = pg.Open(ctx, cfg.PostgresDSN, cfg.PGMaxConns); err != nil {
		return nil, err
	}
	if cfg.Env == config.EnvProduction {
		if err := pg.RefuseOwner(ctx, c.Pool); err != nil {
			c.Close()
			return nil, fmt.Errorf("SECKILL_PG_DSN: %w", err)
		}
	}
	if c.Verify, err = pg.Open(ctx, cfg.PostgresDSN, 2); err != nil {
		c.Close()
		return nil, err
	}
	if c.Redis, err = redisx.Dial(ctx, cfg, cfg.RedisPoolSize); err != nil {
		c.Close()
		return nil, err
	}
	if c.Producer, err = mq.NewProducer(mq.EndpointOf(cfg), producerGroup, mq.WithSendTimeout(cfg.MQSendTimeout)); err != nil {
		c.Close()
		return nil, err
	}
	c.Provider = payments.PaysimProvider{Client: &paysim.Client{BaseURL: cfg.PaysimURL, MerchantKey: cfg.PaysimMerchantKey}}
	if withTemporal {
		var opts []temporalx.Option
		if tel != nil {
			mh, err := temporalx.MetricsHandler(tel.Registry)
			if err != nil {
				c.Close()
				return nil, err
			}
			opts = append(opts, temporalx.WithMetrics(mh))
		}
		c.temporalOpts = opts
		if c.Temporal, err = temporalx.Dial(ctx, cfg, log, opts...); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Close stops the parts built on the connections, then releases every
// connection that was opened.
func (c *Conns) Close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	if c.Temporal != nil {
		c.Temporal.Close()
	}
	if c.Producer != nil {
		_ = c.Producer.Close()
	}
	if c.Redis != nil {
		_ = c.Redis.Close()
	}
	if c.Verify != nil {
		c.Verify.Close()
	}
	if c.Pool != nil {
		c.Pool.Close()
	}
}

// Telemetry is a process's metrics registry and the metric sets shared by
// its parts (a demo runs the gateway and the scanner in one process).
type Telemetry struct {
	Registry    *prometheus.Registry
	Reservation *metrics.Reservation
	Saga        *metrics.Saga
	Reconcile   *metrics.Reconcile
}

// NewTelemetry returns a fresh registry with every shared metric set registered.
func NewTelemetry() *Telemetry {
	reg := metrics.NewRegistry()
	return &Telemetry{Registry: reg, Reservation: metrics.NewReservation(reg), Saga: metrics.NewSaga(reg), Reconcile: metrics.NewReconcile(reg)}
}

// Authenticator builds the token verifier from the config.
func Authenticator(cfg config.Config) (*auth.Authenticator, error) {
	o, err := authOptions(cfg)
	if err != nil {
		return nil, err
	}
	return auth.New(o)
}

func authOptions(cfg config.Config) (auth.Options, error) {
	keys, err := cfg.AuthKeys()
	if err != nil {
		return auth.Options{}, err
	}
	ops, err := cfg.AdminCredentials()
	if err != nil {
		return auth.Options{}, err
	}
	return auth.Options{Keys: keys, Current: cfg.AuthKeyVersion, MaxTTL: cfg.AuthMaxTTL, AdminToken: cfg.AdminToken,
		AdminTokens: ops}, nil
}

// gatewayAuthenticator is Authenticator that also refuses the tokens of
// revoked users (`seckill token revoke`), reloading their epochs from
// PostgreSQL every SECKILL_AUTH_REVOCATION_REFRESH until conns close.
func gatewayAuthenticator(cfg config.Config, conns *Conns, log *slog.Logger) (*auth.Authenticator, error) {
	o, err := authOptions(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.AuthRevocationRefresh <= 0 {
		return nil, fmt.Errorf("SECKILL_AUTH_REVOCATION_REFRESH must be positive, got %s", cfg.AuthRevocationRefresh)
	}
	lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	epochs, err := auth.LoadEpochs(lctx, conns.Pool, cfg.AuthMaxTTL)
	if err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(context.Background())
	go epochs.Run(rctx, cfg.AuthRevocationRefresh, log)
	conns.closers = append(conns.closers, stop)
	o.Revocations = epochs
	return auth.New(o)
}

// Deriver builds the stable-ID deriver from the config.
func Deriver(cfg config.Config) (*ids.Deriver, error) {
	keys, err := cfg.IDKeys()
	if err != nil {
		return nil, err
	}
	return ids.NewDeriver(keys, cfg.IDKeyVersion)
}

// APIHandler builds the gateway's HTTP handler on conns.
func APIHandler(cfg config.Config, conns *Conns, tel *Telemetry, fp *failpoint.Set, log *slog.Logger) (http.Handler, error) {
	d, err := Deriver(cfg)
	if err != nil {
		return nil, err
	}
	authn, err := gatewayAuthenticator(cfg, conns, log)
	if err != nil {
		return nil, err
	}
	opt := reservation.Options{
		Topic: cfg.TopicOrderCreate, SendTimeout: cfg.MQSendTimeout, SendDueDelay: cfg.SendDueDelay,
		ReservationTTL: cfg.ReservationTTL, RecheckAfter: cfg.SendRecheckAfter, SoldOutMemo: cfg.SoldOutMemo,
		Linger: cfg.SendLinger, NoRefill: !cfg.ReserveRefill,
	}
	if cfg.ReserveAutoPipeline {
		if opt.Scripts, err = redisx.PipelinedScripts(conns.Redis); err != nil {
			return nil, err
		}
	}
	res, err := reservation.NewReserver(conns.Redis, d, conns.Producer, opt, tel.Reservation, fp, log)
	if err != nil {
		return nil, err
	}
	conns.closers = append(conns.closers, res.Close) // flush the gateway's queued sends
	proxies, err := cfg.TrustedProxyPrefixes()
	if err != nil {
		return nil, err
	}
	allow, err := cfg.AdminAllowPrefixes()
	if err != nil {
		return nil, err
	}
	deps := api.Deps{Auth: authn, Reserver: res, Status: reservation.NewStatusReader(conns.Redis, conns.Pool),
		Pool: conns.Pool, Redis: conns.Redis, Log: log, HandlerTimeout: cfg.HandlerTimeout,
		ReserveBudget: cfg.ReserveBudget, ReadBudget: cfg.ReadBudget,
		Limits: api.Limits{PerUser: cfg.RateLimitUser, PerIP: cfg.RateLimitIP, ReadPerUser: cfg.RateLimitRead,
			Callback: cfg.RateLimitCallback, Admin: cfg.RateLimitAdmin,
			Window: cfg.RateLimitWindow, TrustedProxies: proxies}, AdminAllow: allow}
	if deps.Explain, err = Explainer(cfg, conns); err != nil {
		return nil, err
	}
	if conns.Temporal != nil {
		sagas, err := workflows.NewSagas(conns.Temporal, cfg.TemporalTaskQueue)
		if err != nil {
			return nil, err
		}
		co, err := checkout.NewService(conns.Pool, conns.Provider, sagas,
			payments.PaysimVerifier(cfg.PaysimSecretBytes(), cfg.CallbackTolerance), cfg.CallbackURL, log, tel.Saga)
		if err != nil {
			return nil, err
		}
		co.SetFailpoints(fp)
		deps.Checkout = co
	}
	return api.NewRouter(deps), nil
}

// parts is the composition root: every worker part and the function that
// runs it (each returns when ctx ends).
var parts = map[string]func(context.Context, workers.Deps) error{
	PartSendDue:    senddue.Run,
	PartRebalance:  rebalancer.Run,
	PartStarter:    sagastarter.Run,
	PartSaga:       sagaworker.Run,
	PartOutbox:     outboxrelay.Run,
	PartDeadLetter: deadletter.Run,
	PartRefunds:    refundrelay.Run,
}

// RunWorkers runs the given parts on conns until ctx ends (or one fails).
// conns.Temporal must be set for the starter, saga and refunds parts.
func RunWorkers(ctx context.Context, cfg config.Config, conns *Conns, names []string, tel *Telemetry,
	fp *failpoint.Set, log *slog.Logger) error {
	if NeedsTemporal(names) && conns.Temporal == nil {
		return errors.New("app: the starter, saga and refunds parts need a Temporal client")
	}
	deriver, err := Deriver(cfg)
	if err != nil {
		return fmt.Errorf("app: SECKILL_ID_SECRETS: %w", err)
	}
	d := workers.Deps{Config: cfg, Pool: conns.Pool, Verify: conns.Verify, Redis: conns.Redis, Producer: conns.Producer,
		Temporal: conns.Temporal, Provider: conns.Provider, IDs: deriver, Registry: tel.Registry, Reservation: tel.Reservation,
		Saga: tel.Saga, Reconcile: tel.Reconcile, Failpoints: fp, Log: log}
	if _, versioned := sagaworker.Version(cfg); versioned && slices.Contains(names, PartSaga) {
		sw, err := temporalx.Detached(ctx, conns.Temporal, cfg, log, conns.temporalOpts...)
		if err != nil {
			return err
		}
		defer sw.Close()
		d.SagaWorker = sw
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, name := range names {
		run, ok := parts[name]
		if !ok {
			return fmt.Errorf("app: unknown worker part %q", name)
		}
		g.Go(func() error {
			if err := run(gctx, d); err != nil {
				return fmt.Errorf("worker part %s: %w", name, err)
			}
			return nil
		})
	}
	log.Info("worker.started", "parts", names)
	return g.Wait()
}

// Explainer builds `seckill explain` on conns; with conns.Temporal the saga
// is described too. Its verdict judges with reconciliation's rules and watermark.
func Explainer(cfg config.Config, conns *Conns) (*explain.Explainer, error) {
	var sagas explain.Sagas
	if conns.Temporal != nil {
		c, err := sagastarter.NewControl(conns.Temporal, cfg.TemporalTaskQueue)
		if err != nil {
			return nil, err
		}
		sagas = c
	}
	ex, err := explain.New(conns.Pool, conns.Redis, sagas)
	if err != nil {
		return nil, err
	}
	ex.SetWatermark(cfg.ReconcileWatermark) // judge as reconciliation does
	return ex, nil
}

// StartBulkRepair starts BulkRepairWorkflow for in (ValidateBulkRepair
// first): the query is narrowed to running reservation sagas and checked by
// Temporal (with ManualReviewOf, PostgreSQL lists the reservations instead),
// the workflow ID and the repair_ids derive from the query (or sale), action,
// operator and reason, so the same bulk repair started again attaches to
// the running one or, once it is done, signals the same repair_ids (which
// the sagas record once). A dry run gets an ID of its own.
func StartBulkRepair(ctx context.Context, tc client.Client, taskQueue string, in workflows.BulkRepairInput) (client.WorkflowRun, error) {
	if err := workflows.ValidateBulkRepair(in); err != nil {
		return nil, err
	}
	if in.ManualReviewOf == 0 {
		in.Query = fmt.Sprintf(`(%s) AND WorkflowType = "ReservationSaga" AND ExecutionStatus = "Running"`, in.Query)
		if _, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: in.Query}); err != nil {
			return nil, fmt.Errorf("--query: Temporal refuses it: %w", err)
		}
	}
	parts := []string{in.Query, in.Action, in.Operator, in.Reason}
	if in.ManualReviewOf != 0 { // the ids of query-based bulk repairs stay as they were
		parts = append(parts, fmt.Sprintf("manual-review-of:%d", in.ManualReviewOf))
	}
	key := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	id := workflows.BulkRepairWorkflowIDPrefix + hex.EncodeToString(key[:8])
	in.RepairIDPrefix = "bulk-" + hex.EncodeToString(key[:6]) + "-"
	if in.DryRun {
		id += "-dry-" + uuid.NewString()[:8]
	}
	return tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: taskQueue, StaticSummary: "bulk repair: " + in.Action,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.BulkRepairWorkflow, in)
}

// ServeHTTP runs srv until ctx ends, then shuts it down gracefully.
func ServeHTTP(ctx context.Context, srv *http.Server, log *slog.Logger, what string) error {
	errc := make(chan error, 1)
	go func() {
		log.Info("http.listening", "what", what, "addr", srv.Addr)
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("%s on %s: %w", what, srv.Addr, err)
		}
		close(errc)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
