package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/orders"
	"github.com/seckill/seckill/internal/platform/auth"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/platform/temporalx"
	"github.com/seckill/seckill/migrations"
	"github.com/seckill/seckill/paysim"
)

// The processes of a cluster. The workers are split by part so a crash of
// one (say the saga worker at after_order_insert) leaves the others running,
// as separate deployments would.
const (
	ProcAPI     = "api"
	ProcStarter = "worker-starter"
	ProcSaga    = "worker-saga"
	ProcRest    = "worker-rest" // send-due scanner, outbox relay, dead-letter consumer, refund relay
)

// A Kind of cluster has its own names on the shared stack, apart from
// everything else and from the other kinds: topics (created by
// scripts/stack.sh), a Redis logical database (0 is everyone else's) and a
// consumer group prefix. Each run adds its own database, consumer group and
// task queue. Two clusters of one kind cannot share the machine: NewCluster
// waits for the other to close (a lock file in the temporary directory).
type Kind struct {
	Name    string
	RedisDB int
}

// The kinds of cluster: crash-point matrix and kill soak; API contract test.
var (
	KindChaos    = Kind{Name: "chaos", RedisDB: 7}
	KindContract = Kind{Name: "contract", RedisDB: 8}
)

func (k Kind) topicCreate() string  { return "seckill_" + k.Name + "_create" }
func (k Kind) topicEvents() string  { return "seckill_" + k.Name + "_events" }
func (k Kind) starterGroup() string { return "saga-starter-" + k.Name }

// ErrRedisCluster: a cluster of processes keeps apart from everything else
// on the shared stack by its Redis logical database, which a Redis Cluster
// (SECKILL_REDIS_CLUSTER_ADDRS) does not have; on database 0 its send-due
// scanner would re-send other sales' reservations to its own topics.
var ErrRedisCluster = errors.New("chaos: needs a Redis logical database of its own (Kind.RedisDB); a Redis Cluster has only database 0: run it on the single Redis (unset SECKILL_REDIS_CLUSTER_ADDRS)")

// ClusterOptions shape a Cluster.
type ClusterOptions struct {
	// Bin is the seckill binary to run (go build -o ... ./cmd/seckill).
	Bin string
	// Dir receives the processes' logs (one file per process).
	Dir string
	// Config is the stack's configuration (config.Load()); the cluster
	// overrides what must be its own.
	Config config.Config
	Log    *slog.Logger
	// Env is added to every process's environment, after (so over) the
	// cluster's own settings.
	Env []string
	// Kind names the cluster's topics and Redis database (KindChaos if zero).
	Kind Kind
	// Replicas runs this many of the gateway and of each worker process
	// (default 1). With more than one, each process is named with its
	// number ("api-1", "worker-saga-2"; see ReplicaName), has its own ports,
	// and the replicas of a kind share the consumer groups and the task queue.
	Replicas int
}

// Cluster is the gateway and the workers of one chaos run, with clients of
// the stores to drive and judge.
type Cluster struct {
	Procs map[string]*Proc
	cfg   config.Config
	log   *slog.Logger

	Pool     *pgxpool.Pool
	Redis    redis.UniversalClient
	Temporal client.Client
	auth     *auth.Authenticator
	provider *paysim.Client
	apiBase  string
	apiBases []string // every gateway's, apiBase first
	replicas int
	dropDB   func()
	kind     Kind
	unlock   func()

	// What callers saw during freezes (freeze.go).
	calls     callLog
	inFlight  atomic.Int64
	probeSale atomic.Int64
}

// NewCluster creates the run's database and the processes (not started).
func NewCluster(ctx context.Context, o ClusterOptions) (*Cluster, error) {
	if o.Bin == "" || o.Dir == "" || o.Log == nil {
		return nil, errors.New("chaos: Bin, Dir and Log are required")
	}
	if err := os.MkdirAll(o.Dir, 0o750); err != nil {
		return nil, err
	}
	if o.Config.RedisCluster() {
		return nil, ErrRedisCluster
	}
	if o.Kind.Name == "" {
		o.Kind = KindChaos
	}
	unlock, err := lockKind(ctx, o.Kind, o.Log)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: o.Config, log: o.Log, Procs: map[string]*Proc{}, kind: o.Kind, unlock: unlock}
	dsn, drop, err := createDatabase(ctx, o.Config.PostgresDSN)
	if err != nil {
		return nil, err
	}
	c.dropDB = drop
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	c.replicas = max(o.Replicas, 1)
	ports, err := freePorts(5 * c.replicas)
	if err != nil {
		return nil, err
	}
	for i := range c.replicas {
		c.apiBases = append(c.apiBases, "http://127.0.0.1:"+strconv.Itoa(ports[i]))
	}
	c.apiBase = c.apiBases[0]
	c.cfg.PostgresDSN = dsn
	c.cfg.RedisDB = o.Kind.RedisDB
	c.cfg.TemporalTaskQueue = "chaos-" + randomHex(4)
	c.addProcs(o, dsn, ports)
	if err := c.openClients(ctx, dsn); err != nil {
		return nil, err
	}
	c.provider = &paysim.Client{BaseURL: c.cfg.PaysimURL, MerchantKey: c.cfg.PaysimMerchantKey}
	ok = true
	return c, nil
}

// addProcs defines the cluster's processes (not started): the gateways
// and the workers split by part, each with its ports and its log. ports
// holds the gateways' HTTP ports first, then every process's metrics port.
func (c *Cluster) addProcs(o ClusterOptions, dsn string, ports []int) {
	env := []string{
		// As production runs them: as the application's role, which
		// cannot change the schema (docs/deploy.md#database-roles).
		"SECKILL_PG_DSN=" + config.StackAppDSN(dsn),
		"SECKILL_REDIS_DB=" + strconv.Itoa(o.Kind.RedisDB),
		"SECKILL_TOPIC_ORDER_CREATE=" + o.Kind.topicCreate(),
		"SECKILL_TOPIC_EVENTS=" + o.Kind.topicEvents(),
		// A group of its own, from the latest offset: messages other runs left
		// on the topic are not this run's.
		"SECKILL_STARTER_GROUP=" + o.Kind.starterGroup() + "-" + randomHex(4),
		"SECKILL_STARTER_FROM_LATEST=true",
		"SECKILL_TEMPORAL_TASK_QUEUE=" + c.cfg.TemporalTaskQueue,
		// Unversioned: a versioned worker on each run's fresh queue would
		// leave a worker deployment behind, and the server takes at most 100
		// per namespace (docs/operations.md, "Deploying the saga worker").
		"SECKILL_WORKER_VERSIONING=false",
		"SECKILL_SEND_DUE_DELAY=1s",
		"SECKILL_SEND_MAX_BACKOFF=2s",
		"SECKILL_RECONCILE_WATERMARK=3s",
		"SECKILL_RECONCILE_SCHEDULE=false",
		"SECKILL_LOG_LEVEL=warn",
	}
	env = append(env, o.Env...)
	metrics := ports[c.replicas:]
	add := func(name string, i int, args ...string) {
		port := metrics[0]
		metrics = metrics[1:]
		// Each replica's payments call back to its own gateway (the workers
		// to the gateway of their number).
		gw := c.apiBases[i]
		penv := []string{fmt.Sprintf("SECKILL_METRICS_ADDR=127.0.0.1:%d", port),
			"SECKILL_HTTP_ADDR=" + strings.TrimPrefix(gw, "http://"), "SECKILL_CALLBACK_URL=" + gw + "/v1/payments/callback"}
		ready := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
		if strings.HasPrefix(name, ProcAPI) {
			ready = gw + "/healthz"
		}
		name = ReplicaName(name, i, c.replicas)
		c.Procs[name] = &Proc{Name: name, bin: o.Bin, args: args, env: append(penv, env...), ready: ready, logs: o.Dir,
			metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", port)}
	}
	for i := range c.replicas {
		add(ProcAPI, i, "api")
		add(ProcStarter, i, "worker", "--only", "starter")
		add(ProcSaga, i, "worker", "--only", "saga")
		add(ProcRest, i, "worker", "--only", "senddue,outbox,deadletter,refunds")
	}
}

// ReplicaName names replica i (from 0) of a process kind: the kind itself
// when the cluster runs one of each, else "kind-<i+1>".
func ReplicaName(kind string, i, replicas int) string {
	if replicas <= 1 {
		return kind
	}
	return fmt.Sprintf("%s-%d", kind, i+1)
}

// Replicas returns the processes of one kind (ProcAPI, ProcSaga, ...) in
// their order.
func (c *Cluster) Replicas(kind string) []*Proc {
	var out []*Proc
	for i := range c.replicas {
		out = append(out, c.Procs[ReplicaName(kind, i, c.replicas)])
	}
	return out
}

// openClients opens the cluster's own clients of the stores, to drive and
// judge the sales.
func (c *Cluster) openClients(ctx context.Context, dsn string) error {
	var err error
	if c.Pool, err = pg.Open(ctx, dsn, 8); err != nil {
		return err
	}
	if c.Redis, err = redisx.OpenDB(ctx, c.cfg, c.kind.RedisDB, 16); err != nil {
		return err
	}
	if c.Temporal, err = temporalx.Dial(ctx, c.cfg, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	if c.auth, err = app.Authenticator(c.cfg); err != nil {
		return err
	}
	return nil
}

// Start starts every process without failpoints and waits until the saga
// starter consumes (see awaitConsuming).
func (c *Cluster) Start(ctx context.Context) error {
	for _, kind := range []string{ProcSaga, ProcStarter, ProcRest, ProcAPI} {
		for _, p := range c.Replicas(kind) {
			if err := p.Start(ctx, ""); err != nil {
				return err
			}
		}
	}
	return c.awaitConsuming(ctx)
}

// APIBase is the (first) gateway's base URL (http://127.0.0.1:port).
func (c *Cluster) APIBase() string { return c.apiBase }

// TaskQueue is the cluster's Temporal task queue.
func (c *Cluster) TaskQueue() string { return c.cfg.TemporalTaskQueue }

// Close stops the processes, drops the run's database and its Redis
// logical database's keys, and closes the clients.
func (c *Cluster) Close() {
	for _, p := range c.Procs {
		_ = p.Kill(syscall.SIGTERM)
	}
	if c.Redis != nil {
		_ = c.Redis.FlushDB(context.Background()).Err()
		_ = c.Redis.Close()
	}
	if c.Temporal != nil {
		c.terminateLeftovers()
		c.Temporal.Close()
	}
	if c.Pool != nil {
		c.Pool.Close()
	}
	if c.dropDB != nil {
		c.dropDB()
	}
	if c.unlock != nil {
		c.unlock()
	}
}

// lockKind takes the machine-wide lock of a kind of cluster, waiting (and
// saying so) while another process holds it. The kernel drops the lock of a
// process that dies.
func lockKind(ctx context.Context, k Kind, log *slog.Logger) (func(), error) {
	path := filepath.Join(os.TempDir(), "seckill-cluster-"+k.Name+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600) // #nosec G304 -- fixed name in the temporary directory
	if err != nil {
		return nil, err
	}
	for said := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) // #nosec G115 -- a file descriptor
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil // #nosec G115
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !said {
			log.Warn("chaos.waiting_for_cluster", "kind", k.Name, "lock", path,
				"why", "another "+k.Name+" cluster runs on this machine (its topics and Redis database are shared)")
			said = true
		}
		if err := waitGone(ctx, time.Second); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("waiting for the %s cluster lock %s: %w", k.Name, path, err)
		}
	}
}

// createDatabase creates a fresh database next to adminDSN's and migrates it.
func createDatabase(ctx context.Context, adminDSN string) (string, func(), error) {
	name := "seckill_chaos_" + randomHex(4)
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", nil, fmt.Errorf("connect to postgres (is the stack up? make up): %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(adminDSN)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	dsn := u.String()
	drop := func() {
		c, err := pgx.Connect(context.Background(), adminDSN)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	if _, err := migrations.Up(ctx, dsn); err != nil {
		drop()
		return "", nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	// As the owner: the processes run as the application role.
	if err := orders.InstallFailpoints(ctx, dsn); err != nil {
		drop()
		return "", nil, fmt.Errorf("failpoints in %s: %w", name, err)
	}
	return dsn, drop, nil
}

func freePorts(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// logPath is where a process's log is.
func (c *Cluster) logPath(name string) string {
	p := c.Procs[name]
	return filepath.Join(p.logs, p.Name+".log")
}

// tail returns the last n lines of a process's log (for failure reports).
func (c *Cluster) tail(name string, n int) string {
	b, err := os.ReadFile(c.logPath(name))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitGone waits until d passes or ctx ends.
func waitGone(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// terminateLeftovers ends the workflows of the cluster's task queue that
// still run (an interrupted run), so none waits on the shared dev server for
// a worker that is gone.
func (c *Cluster) terminateLeftovers() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	query := fmt.Sprintf(`TaskQueue = %q AND ExecutionStatus = "Running"`, c.TaskQueue())
	var token []byte
	for {
		resp, err := c.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			c.log.Warn("chaos.leftovers", "error", err)
			return
		}
		for _, e := range resp.GetExecutions() {
			_ = c.Temporal.TerminateWorkflow(ctx, e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId(), "chaos run ended")
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return
		}
	}
}
