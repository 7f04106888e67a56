// Package config holds the one configuration struct of every seckill process:
// defaults, environment overrides and validation. An error always names the
// environment variable at fault.
package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Config is the whole configuration. Every field is read from the environment
// variable in its `env` tag; `envDefault` is the value used on a developer
// machine with the project's stack (scripts/stack.sh) running.
type Config struct {
	// Env is "production" (the default) or "development". Only a development
	// deployment may run with the public development secrets below (the local
	// stack and the tests set SECKILL_ENV=development).
	Env string `env:"SECKILL_ENV" envDefault:"production"`

	PostgresDSN string `env:"SECKILL_PG_DSN" envDefault:"postgres://seckill:seckill@127.0.0.1:15432/seckill?sslmode=disable"`
	PGMaxConns  int32  `env:"SECKILL_PG_MAX_CONNS" envDefault:"16"`

	RedisAddr string `env:"SECKILL_REDIS_ADDR" envDefault:"127.0.0.1:16379"`
	// RedisClusterAddrs are seed addresses of a Redis Cluster (host:port,
	// comma-separated, e.g. 127.0.0.1:17001,127.0.0.1:17002,127.0.0.1:17003;
	// `scripts/stack.sh redis-cluster up` starts one). Set, every process
	// uses the cluster (go-redis cluster client) and SECKILL_REDIS_ADDR is
	// not used; empty (the default), the single Redis at SECKILL_REDIS_ADDR.
	RedisClusterAddrs []string `env:"SECKILL_REDIS_CLUSTER_ADDRS" envSeparator:","`
	// RedisPoolSize is the connection pool per Redis node.
	RedisPoolSize int `env:"SECKILL_REDIS_POOL_SIZE" envDefault:"64"`
	// RedisDB selects the logical database (tests isolate with it); a
	// cluster has only database 0.
	RedisDB int `env:"SECKILL_REDIS_DB" envDefault:"0"`
	// RedisUsername and RedisPassword authenticate to Redis (AUTH with an
	// ACL user, or the default user's requirepass when RedisUsername is
	// empty). The default is the local stack's requirepass (scripts/stack.sh),
	// a public development secret that production refuses, as it refuses an
	// empty one.
	RedisUsername string `env:"SECKILL_REDIS_USERNAME"`
	RedisPassword string `env:"SECKILL_REDIS_PASSWORD" envDefault:"dev-redis-password-change-me" secret:"dev"`
	// RedisTLS speaks TLS to every Redis node, verifying the server against
	// RedisCAFile (PEM) when set, else against the system roots.
	RedisTLS    bool   `env:"SECKILL_REDIS_TLS" envDefault:"false"`
	RedisCAFile string `env:"SECKILL_REDIS_CA_FILE"`

	RocketMQNameServers []string `env:"SECKILL_ROCKETMQ_NAMESRV" envDefault:"127.0.0.1:9876" envSeparator:","`
	// RocketMQAccessKey and RocketMQSecretKey are the ACL 2.0 user every
	// producer and consumer signs its requests with (the broker's
	// authenticationEnabled); the defaults are the local stack's user
	// (scripts/stack/rocketmq.sh), whose public secret production refuses.
	RocketMQAccessKey string `env:"SECKILL_ROCKETMQ_ACCESS_KEY" envDefault:"seckill"`
	RocketMQSecretKey string `env:"SECKILL_ROCKETMQ_SECRET_KEY" envDefault:"dev-rocketmq-secret-change-me" secret:"dev"`
	// TopicOrderCreate carries ORDER_CREATE_REQUESTED from the gateway to the saga starter.
	TopicOrderCreate string `env:"SECKILL_TOPIC_ORDER_CREATE" envDefault:"seckill_order_create"`
	// TopicEvents carries the outbox events (ORDER_CREATED, ORDER_PAID, ...).
	TopicEvents   string        `env:"SECKILL_TOPIC_EVENTS" envDefault:"seckill_order_events"`
	MQSendTimeout time.Duration `env:"SECKILL_MQ_SEND_TIMEOUT" envDefault:"3s"`

	TemporalAddress   string `env:"SECKILL_TEMPORAL_ADDR" envDefault:"127.0.0.1:7233"`
	TemporalNamespace string `env:"SECKILL_TEMPORAL_NAMESPACE" envDefault:"default"`
	TemporalTaskQueue string `env:"SECKILL_TEMPORAL_TASK_QUEUE" envDefault:"seckill-saga"`
	// TemporalTLS speaks TLS to the frontend, verifying it against
	// TemporalCAFile (PEM) when set, else the system roots; TemporalCertFile
	// and TemporalKeyFile add a client certificate (mutual TLS, the server's
	// own authentication). TemporalAPIKey is sent as a bearer token on every
	// call (Temporal Cloud, or a server with an authorizer) and implies TLS.
	TemporalTLS      bool   `env:"SECKILL_TEMPORAL_TLS" envDefault:"false"`
	TemporalCAFile   string `env:"SECKILL_TEMPORAL_CA_FILE"`
	TemporalCertFile string `env:"SECKILL_TEMPORAL_CERT_FILE"`
	TemporalKeyFile  string `env:"SECKILL_TEMPORAL_KEY_FILE"`
	TemporalAPIKey   string `env:"SECKILL_TEMPORAL_API_KEY"`
	// TemporalCompression is the gRPC compression of requests to Temporal:
	// none (default) or gzip (the SDK's own default). Payloads are
	// encrypted (incompressible) and the rest are ids and small protos, so
	// gzip only costs CPU on both ends unless the link is slow (a WAN).
	TemporalCompression string `env:"SECKILL_TEMPORAL_COMPRESSION" envDefault:"none"`
	// TemporalUI is where people find stuck sagas; printed by the demo.
	TemporalUI string `env:"SECKILL_TEMPORAL_UI" envDefault:"http://127.0.0.1:8233"`

	HTTPAddr string `env:"SECKILL_HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	// MetricsAddr serves /metrics (every process, the gateway too): keep it on
	// a network only the scraper reaches; the public listener has no /metrics.
	// Unset, each process takes its own (app.MetricsAddr): the gateway
	// 127.0.0.1:9464, a worker of every part 127.0.0.1:9465, a worker of some
	// parts a port of its own per set of parts.
	MetricsAddr string `env:"SECKILL_METRICS_ADDR"`
	// HandlerTimeout is the deadline of every HTTP request's handling.
	HandlerTimeout time.Duration `env:"SECKILL_HANDLER_TIMEOUT" envDefault:"10s"`
	// ReserveBudget bounds a reserve request and ReadBudget a reservation or
	// order read, whatever a dependency does: past it the answer is 503
	// UNAVAILABLE with Retry-After, and a retry with the same key gets the true
	// outcome (docs/architecture.md, "Time budgets"). Each must be below
	// SECKILL_HANDLER_TIMEOUT.
	ReserveBudget time.Duration `env:"SECKILL_RESERVE_BUDGET" envDefault:"1s"`
	ReadBudget    time.Duration `env:"SECKILL_READ_BUDGET" envDefault:"1s"`
	// RateLimitUser and RateLimitIP bound the business flows (reserve, start
	// payment, cancel): requests per RateLimitWindow by one user, and from one
	// client address (before authentication). RateLimitRead bounds one user's
	// status reads (reservation, order), with the address limit counted apart.
	// 0 switches a limit off.
	RateLimitUser int `env:"SECKILL_RATE_LIMIT_USER" envDefault:"10"`
	RateLimitIP   int `env:"SECKILL_RATE_LIMIT_IP" envDefault:"200"`
	RateLimitRead int `env:"SECKILL_RATE_LIMIT_READ" envDefault:"50"`
	// RateLimitCallback and RateLimitAdmin bound payment callbacks and admin
	// requests per window from one client address.
	RateLimitCallback int           `env:"SECKILL_RATE_LIMIT_CALLBACK" envDefault:"500"`
	RateLimitAdmin    int           `env:"SECKILL_RATE_LIMIT_ADMIN" envDefault:"20"`
	RateLimitWindow   time.Duration `env:"SECKILL_RATE_LIMIT_WINDOW" envDefault:"1s"`
	// TrustedProxies are the CIDRs of the proxies in front of the gateway
	// (comma-separated, e.g. 10.0.0.0/8): a request from one is counted by the
	// client address in its X-Forwarded-For. Empty: the peer's address counts
	// (behind a proxy, every client would share the proxy's limit).
	TrustedProxies []string `env:"SECKILL_TRUSTED_PROXIES" envSeparator:","`

	// IDSecrets are the HMAC keys for stable business IDs, as "version:hexkey"
	// pairs; IDKeyVersion selects the one used for new reservations. Old
	// versions stay so that a retry of an old request derives the same IDs.
	IDSecrets    []string `env:"SECKILL_ID_SECRETS" envDefault:"1:6465762d6f6e6c792d69642d7365637265742d6368616e67652d6d652d313233" envSeparator:"," secret:"dev"`
	IDKeyVersion int      `env:"SECKILL_ID_KEY_VERSION" envDefault:"1"`
	// AuthSecrets sign user bearer tokens (JWT HS256): "version:hexkey"
	// pairs, each key at least 32 bytes; AuthKeyVersion signs new tokens
	// (its version is the token's kid) and every listed version verifies, so
	// a key is rotated by adding the new one, switching the version, and
	// dropping the old one once its tokens have expired (docs/operations.md).
	AuthSecrets    []string `env:"SECKILL_AUTH_SECRETS" envDefault:"1:6465762d6f6e6c792d617574682d7365637265742d6368616e67652d6d652d31" envSeparator:"," secret:"dev"`
	AuthKeyVersion int      `env:"SECKILL_AUTH_KEY_VERSION" envDefault:"1"`
	// PayloadSecrets encrypt Temporal payloads (AES-256-GCM, temporalx.Codec):
	// "version:hexkey" pairs of exactly 32 bytes; PayloadKeyVersion encrypts
	// new payloads and every listed version decrypts (docs/operations.md,
	// "Payload encryption").
	PayloadSecrets    []string `env:"SECKILL_PAYLOAD_SECRETS" envDefault:"1:6465762d6f6e6c792d7061796c6f61642d6b65792d6368616e67652d6d652d31" envSeparator:"," secret:"dev"`
	PayloadKeyVersion int      `env:"SECKILL_PAYLOAD_KEY_VERSION" envDefault:"1"`
	// AuthMaxTTL is the longest lifetime (exp - iat) a user token may have.
	AuthMaxTTL time.Duration `env:"SECKILL_AUTH_MAX_TTL" envDefault:"24h"`
	// AuthRevocationRefresh is how often a gateway reloads the users' token
	// epochs (`seckill token revoke`): the longest a revoked token still works.
	AuthRevocationRefresh time.Duration `env:"SECKILL_AUTH_REVOCATION_REFRESH" envDefault:"5s"`
	// AdminToken guards the admin endpoints (sale set-up, reconcile, repair).
	AdminToken string `env:"SECKILL_ADMIN_TOKEN" envDefault:"dev-admin-token-change-me" secret:"dev"`
	// AdminTokens are one admin credential per operator, "name:token,...";
	// the audit line names the operator (docs/operations.md#secrets-and-their-rotation).
	AdminTokens []string `env:"SECKILL_ADMIN_TOKENS" envSeparator:","`
	// AdminAllow are the client addresses (CIDRs; behind SECKILL_TRUSTED_PROXIES
	// the address they name) the admin endpoints answer; anyone else gets 403.
	AdminAllow []string `env:"SECKILL_ADMIN_ALLOW" envDefault:"127.0.0.0/8,::1/128" envSeparator:","`

	// SendDueDelay is how long after a reservation the send-due scanner may
	// re-send it if the gateway has not confirmed its own send.
	SendDueDelay time.Duration `env:"SECKILL_SEND_DUE_DELAY" envDefault:"3s"`
	// SendLease is how long a scanner owns a claimed send_due item.
	SendLease time.Duration `env:"SECKILL_SEND_LEASE" envDefault:"10s"`
	// SendMaxBackoff caps the scanner's backoff between re-sends of a
	// reservation whose message the broker did not take. There is no attempt
	// limit: an unsent reservation is re-sent at this pace until it is sent
	// or, past its business deadline, reconciliation rejects it durably.
	SendMaxBackoff time.Duration `env:"SECKILL_SEND_MAX_BACKOFF" envDefault:"30s"`
	// SendRecheckAfter: a published reservation still unsettled (no order, no
	// compensation) this long after its business deadline is re-sent.
	SendRecheckAfter time.Duration `env:"SECKILL_SEND_RECHECK_AFTER" envDefault:"1m"`
	// ReservationTTL is garbage collection for Redis reservation keys: longer
	// than every replay, payment and reconcile window.
	ReservationTTL time.Duration `env:"SECKILL_RESERVATION_TTL" envDefault:"168h"`
	// SendLinger is how long the gateway's sender waits to fill a batch of
	// ORDER_CREATE_REQUESTED after its first message. The client's answer
	// never waits for it (it follows reserve.lua); a longer linger fills
	// batches at moderate rates, so each message costs the broker and Redis
	// less (one send and one send_done.lua per batch and SKU).
	SendLinger time.Duration `env:"SECKILL_SEND_LINGER" envDefault:"5ms"`
	// ReserveAutoPipeline runs the gateway's reserve.lua calls through
	// go-redis's auto-pipeliner: the calls of concurrent requests share one
	// write and one read on a Redis connection (one pipeline) instead of a
	// round trip each. A lone request still goes out at once. false: one
	// EVALSHA round trip per call.
	ReserveAutoPipeline bool `env:"SECKILL_RESERVE_AUTOPIPELINE" envDefault:"true"`
	// SoldOutMemo is how long the gateway trusts a sold-out answer from Redis
	// before asking again (compensation can return stock).
	SoldOutMemo time.Duration `env:"SECKILL_SOLD_OUT_MEMO" envDefault:"500ms"`
	// ReserveRefill: on a SOLD_OUT of one bucket of a SKU of several, the
	// gateway moves stock on demand from the sibling bucket holding the most
	// and asks again (internal/reservation/refill.go), so SOLD_OUT is said
	// only when no bucket has a unit. false leaves the moves to the rebalancer.
	ReserveRefill bool `env:"SECKILL_RESERVE_REFILL" envDefault:"true"`
	// RebalanceInterval is the period of the bucket rebalancer (the worker's
	// "rebalance" part, docs/scale.md); 0 switches it off.
	RebalanceInterval time.Duration `env:"SECKILL_REBALANCE_INTERVAL" envDefault:"100ms"`
	// RebalanceGrace: a transfer still SENT this long after its take is
	// finished by the rebalancer's recovery (given again with its id, closed).
	RebalanceGrace time.Duration `env:"SECKILL_REBALANCE_GRACE" envDefault:"2s"`

	// ConsumerConcurrency bounds the saga starter's RocketMQ consumer so a
	// backlog cannot overrun Temporal or PostgreSQL.
	ConsumerConcurrency int `env:"SECKILL_CONSUMER_CONCURRENCY" envDefault:"16"`
	// StarterGroup is the RocketMQ consumer group of the saga starter.
	StarterGroup string `env:"SECKILL_STARTER_GROUP" envDefault:"saga-starter"`
	// StarterFromLatest: a starter group new to the broker asks to begin
	// after the last stored message instead of the first. Never in
	// production (a new group would skip requests sent before it first ran);
	// the crash-point matrix uses a fresh group per run that must ignore
	// earlier runs. The broker does not always grant it: when a queue still
	// holds its first message (min offset 0) in memory, RocketMQ answers a
	// new group with offset 0 (ConsumerManageProcessor.queryConsumerOffset;
	// rocketmq-client-go does not send setZeroIfNotFound=false). The tests
	// stay correct because an earlier run's message names a saga Temporal
	// already has (the start reuses it); with Temporal's data wiped and the
	// broker's kept, such messages start sagas of sales no database knows.
	StarterFromLatest bool `env:"SECKILL_STARTER_FROM_LATEST" envDefault:"false"`

	// The payment provider (the project's simulator, `seckill-dev paysim`).
	PaysimURL         string `env:"SECKILL_PAYSIM_URL" envDefault:"http://127.0.0.1:18090"`
	PaysimAddr        string `env:"SECKILL_PAYSIM_ADDR" envDefault:"127.0.0.1:18090"`
	PaysimSecret      string `env:"SECKILL_PAYSIM_SECRET" envDefault:"6465762d6f6e6c792d70617973696d2d7365637265742d6368616e67652d6d65" secret:"dev"`
	PaysimMerchantKey string `env:"SECKILL_PAYSIM_MERCHANT_KEY" envDefault:"dev-merchant-key" secret:"dev"`
	// CallbackURL is where the provider sends signed payment callbacks (this gateway).
	CallbackURL string `env:"SECKILL_CALLBACK_URL" envDefault:"http://127.0.0.1:8080/v1/payments/callback"`
	// CallbackTolerance is how far a callback's signed timestamp may be from our clock.
	CallbackTolerance time.Duration `env:"SECKILL_CALLBACK_TOLERANCE" envDefault:"5m"`

	// ReconcileWatermark: reconciliation judges only what changed longer ago
	// than this (max transaction + outbox lag + projection lag + margin).
	ReconcileWatermark time.Duration `env:"SECKILL_RECONCILE_WATERMARK" envDefault:"2m"`
	// ReconcileEvery is the period of the Temporal Schedule that runs it.
	ReconcileEvery time.Duration `env:"SECKILL_RECONCILE_EVERY" envDefault:"5m"`
	// ReconcileSchedule: a worker with the saga part makes sure the Schedule
	// exists. Off for workers that share a Temporal namespace with another
	// deployment and run reconciliation themselves (the crash-point matrix).
	ReconcileSchedule bool `env:"SECKILL_RECONCILE_SCHEDULE" envDefault:"true"`

	// WorkerVersioning: the saga part runs as a Temporal worker deployment
	// version (docs/operations.md, "Deploying the saga worker"), named
	// WorkerDeployment (unset: the task queue's name) and BuildID (unset:
	// the binary's vcs.revision, "-dirty" when modified). A binary without a
	// revision (go test, go run) and no SECKILL_BUILD_ID runs unversioned.
	WorkerVersioning bool   `env:"SECKILL_WORKER_VERSIONING" envDefault:"true"`
	WorkerDeployment string `env:"SECKILL_WORKER_DEPLOYMENT"`
	BuildID          string `env:"SECKILL_BUILD_ID"`
	// WorkerSetCurrent is what a versioned saga worker does to the
	// deployment's current version at start: "auto" makes its own version
	// current when there is none, or when the current one was chosen before
	// this version first polled (a new build takes over once; a choice made
	// after it appeared, a rollback, stands); "never" leaves it to the
	// operator (temporal worker deployment set-current-version).
	WorkerSetCurrent string `env:"SECKILL_WORKER_SET_CURRENT" envDefault:"auto"`

	// ActivityAttemptsAlert is the attempt at which a Temporal activity
	// execution counts as retrying too long: it is counted in
	// seckill_activity_attempts_exceeded_total and logged once
	// (internal/platform/temporalx.ActivityInterceptor; alert SeckillActivityRetryingTooLong).
	ActivityAttemptsAlert int `env:"SECKILL_ACTIVITY_ATTEMPTS_ALERT" envDefault:"10"`

	LogLevel string `env:"SECKILL_LOG_LEVEL" envDefault:"info"`
}

// PaysimSecretBytes is the webhook signing secret shared with the provider.
func (c Config) PaysimSecretBytes() []byte {
	b, _ := hex.DecodeString(c.PaysimSecret) // validated by Validate
	return b
}

// Load reads the environment over the defaults and validates the result.
func Load() (Config, error) {
	var c Config
	if err := env.Parse(&c); err != nil {
		return Config{}, nameVariables(err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// nameVariables rewrites the parser's errors, which name struct fields, to
// name the environment variables a person actually sets.
func nameVariables(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return fmt.Errorf("config: %w", err)
	}
	typ := reflect.TypeOf(Config{})
	msgs := make([]string, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := typ.FieldByName(pe.Name); ok {
				msgs = append(msgs, fmt.Sprintf("%s: cannot parse as %s: %v", f.Tag.Get("env"), pe.Type, pe.Err))
				continue
			}
		}
		msgs = append(msgs, e.Error())
	}
	return fmt.Errorf("config: %s", strings.Join(msgs, "; "))
}

// FieldError is a validation failure of one environment variable.
type FieldError struct {
	Var    string
	Value  string
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("config: %s=%q: %s", e.Var, e.Value, e.Reason)
}

// Validate checks values that parse but make no sense.
func (c Config) Validate() error {
	for _, check := range []func() error{c.validateRequired, c.validateNetwork, c.validateSecrets, c.validateVersioning} {
		if err := check(); err != nil {
			return err
		}
	}
	if c.Env != EnvDevelopment {
		if err := c.refuseDevSecrets(); err != nil {
			return err
		}
		return c.refuseUnsafe()
	}
	return nil
}

// validateRequired checks the settings that must be positive or non-empty.
func (c Config) validateRequired() error {
	positive := []struct {
		name string
		v    int64
	}{
		{"SECKILL_PG_MAX_CONNS", int64(c.PGMaxConns)},
		{"SECKILL_REDIS_POOL_SIZE", int64(c.RedisPoolSize)},
		{"SECKILL_SEND_MAX_BACKOFF", int64(c.SendMaxBackoff)},
		{"SECKILL_SEND_RECHECK_AFTER", int64(c.SendRecheckAfter)},
		{"SECKILL_CONSUMER_CONCURRENCY", int64(c.ConsumerConcurrency)},
		{"SECKILL_MQ_SEND_TIMEOUT", int64(c.MQSendTimeout)},
		{"SECKILL_SEND_DUE_DELAY", int64(c.SendDueDelay)},
		{"SECKILL_SEND_LINGER", int64(c.SendLinger)},
		{"SECKILL_SEND_LEASE", int64(c.SendLease)},
		{"SECKILL_RESERVATION_TTL", int64(c.ReservationTTL)},
		{"SECKILL_REBALANCE_GRACE", int64(c.RebalanceGrace)},
		{"SECKILL_RECONCILE_WATERMARK", int64(c.ReconcileWatermark)},
		{"SECKILL_RECONCILE_EVERY", int64(c.ReconcileEvery)},
		{"SECKILL_HANDLER_TIMEOUT", int64(c.HandlerTimeout)},
		{"SECKILL_RESERVE_BUDGET", int64(c.ReserveBudget)},
		{"SECKILL_READ_BUDGET", int64(c.ReadBudget)},
		{"SECKILL_RATE_LIMIT_WINDOW", int64(c.RateLimitWindow)},
		{"SECKILL_ACTIVITY_ATTEMPTS_ALERT", int64(c.ActivityAttemptsAlert)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return &FieldError{Var: p.name, Value: fmt.Sprint(p.v), Reason: "must be positive"}
		}
	}
	nonEmpty := []struct{ name, v string }{
		{"SECKILL_PG_DSN", c.PostgresDSN},
		{"SECKILL_REDIS_ADDR", c.RedisAddr},
		{"SECKILL_TEMPORAL_ADDR", c.TemporalAddress},
		{"SECKILL_TEMPORAL_NAMESPACE", c.TemporalNamespace},
		{"SECKILL_TEMPORAL_TASK_QUEUE", c.TemporalTaskQueue},
		{"SECKILL_TOPIC_ORDER_CREATE", c.TopicOrderCreate},
		{"SECKILL_TOPIC_EVENTS", c.TopicEvents},
		{"SECKILL_STARTER_GROUP", c.StarterGroup},
		{"SECKILL_PAYSIM_URL", c.PaysimURL},
		{"SECKILL_PAYSIM_MERCHANT_KEY", c.PaysimMerchantKey},
		{"SECKILL_CALLBACK_URL", c.CallbackURL},
		{"SECKILL_ADMIN_TOKEN", c.AdminToken},
	}
	for _, p := range nonEmpty {
		if strings.TrimSpace(p.v) == "" {
			return &FieldError{Var: p.name, Reason: "must not be empty"}
		}
	}
	return nil
}

// validateNetwork checks addresses, limits, the environment and the log level.
func (c Config) validateNetwork() error {
	if len(c.RocketMQNameServers) == 0 || strings.TrimSpace(c.RocketMQNameServers[0]) == "" {
		return &FieldError{Var: "SECKILL_ROCKETMQ_NAMESRV", Reason: "must name at least one host:port"}
	}
	if _, err := c.TrustedProxyPrefixes(); err != nil {
		return &FieldError{Var: "SECKILL_TRUSTED_PROXIES", Value: strings.Join(c.TrustedProxies, ","), Reason: err.Error()}
	}
	if p, err := c.AdminAllowPrefixes(); err != nil || len(p) == 0 {
		reason := "must name at least one CIDR (0.0.0.0/0,::/0 for anyone)"
		if err != nil {
			reason = err.Error()
		}
		return &FieldError{Var: "SECKILL_ADMIN_ALLOW", Value: strings.Join(c.AdminAllow, ","), Reason: reason}
	}
	if err := c.validateRedis(); err != nil {
		return err
	}
	if err := c.validateTemporalTLS(); err != nil {
		return err
	}
	for _, l := range []struct {
		name string
		v    int
	}{{"SECKILL_RATE_LIMIT_USER", c.RateLimitUser}, {"SECKILL_RATE_LIMIT_IP", c.RateLimitIP}, {"SECKILL_RATE_LIMIT_READ", c.RateLimitRead},
		{"SECKILL_RATE_LIMIT_CALLBACK", c.RateLimitCallback}, {"SECKILL_RATE_LIMIT_ADMIN", c.RateLimitAdmin}} {
		if l.v < 0 {
			return &FieldError{Var: l.name, Value: fmt.Sprint(l.v), Reason: "must be 0 (off) or positive"}
		}
	}
	for _, b := range []struct {
		name string
		v    time.Duration
	}{{"SECKILL_RESERVE_BUDGET", c.ReserveBudget}, {"SECKILL_READ_BUDGET", c.ReadBudget}} {
		if b.v >= c.HandlerTimeout {
			return &FieldError{Var: b.name, Value: b.v.String(),
				Reason: "must be below SECKILL_HANDLER_TIMEOUT (" + c.HandlerTimeout.String() + "): the budget is the answer's bound, the handler timeout the backstop"}
		}
	}
	if c.Env != EnvProduction && c.Env != EnvDevelopment {
		return &FieldError{Var: "SECKILL_ENV", Value: c.Env, Reason: "must be production or development"}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return &FieldError{Var: "SECKILL_LOG_LEVEL", Value: c.LogLevel, Reason: "must be debug, info, warn or error"}
	}
	return nil
}
