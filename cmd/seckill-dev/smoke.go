package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/seckill/seckill/activities"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/logx"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/platform/temporalx"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/migrations"
	"github.com/seckill/seckill/workflows"
)

// SmokeTopic is the RocketMQ topic the stack check round-trips a message on.
const SmokeTopic = "seckill_smoke"

func newSmokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "smoke",
		Short: "Prove all four services of the stack work and print their addresses",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load()
			if err != nil {
				return err
			}
			return runSmoke(cmd.Context(), cfg, cmd.OutOrStdout())
		},
	}
}

func runSmoke(ctx context.Context, cfg config.Config, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	checks := []struct {
		name string
		run  func(context.Context, config.Config) (string, error)
	}{
		{"PostgreSQL", smokePostgres},
		{"Redis", smokeRedis},
		{"RocketMQ", smokeRocketMQ},
		{"Temporal", smokeTemporal},
	}
	failed := 0
	for _, c := range checks {
		start := time.Now()
		detail, err := c.run(ctx, cfg)
		if err != nil {
			failed++
			fmt.Fprintf(out, "FAIL  %-10s %v\n", c.name, err)
			continue
		}
		fmt.Fprintf(out, "ok    %-10s %s (%s)\n", c.name, detail, time.Since(start).Round(time.Millisecond))
	}
	fmt.Fprintf(out, "\nTemporal UI  %s\n", cfg.TemporalUI)
	if failed > 0 {
		return fmt.Errorf("%d of %d services failed the smoke check", failed, len(checks))
	}
	return nil
}

func smokePostgres(ctx context.Context, cfg config.Config) (string, error) {
	if _, err := migrations.Up(ctx, cfg.PostgresDSN); err != nil {
		return "", err
	}
	pool, err := pg.Open(ctx, cfg.PostgresDSN, 2)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	var version string
	var tables int
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version'),
		(SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public')`).Scan(&version, &tables); err != nil {
		return "", fmt.Errorf("query postgres: %w", err)
	}
	v, err := migrations.Version(ctx, cfg.PostgresDSN)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s  server %s, schema version %d, %d tables", redactDSN(cfg.PostgresDSN), version, v, tables), nil
}

func smokeRedis(ctx context.Context, cfg config.Config) (string, error) {
	rdb, err := redisx.Dial(ctx, cfg, 2)
	if err != nil {
		return "", err
	}
	defer rdb.Close()
	var mu sync.Mutex
	var version string
	masters := 0
	if err := redisx.ForEachMaster(ctx, rdb, func(ctx context.Context, n *redis.Client) error {
		info, err := n.InfoMap(ctx, "server").Result()
		mu.Lock()
		defer mu.Unlock()
		masters++
		version = info["Server"]["redis_version"]
		return err
	}); err != nil {
		return "", fmt.Errorf("redis info: %w", err)
	}
	where := "redis://" + cfg.RedisAddr
	if cfg.RedisCluster() {
		where = fmt.Sprintf("redis cluster %s (%d masters)", strings.Join(cfg.RedisClusterAddrs, ","), masters)
	}
	return fmt.Sprintf("%s  server %s, %d Lua scripts loaded (EVALSHA)", where, version, len(lua.All())), nil
}

func smokeRocketMQ(ctx context.Context, cfg config.Config) (string, error) {
	id := uuid.NewString()
	got := make(chan string, 16)
	cons, err := mq.NewConsumer(mq.EndpointOf(cfg), "seckill-smoke-"+id[:8], SmokeTopic,
		func(_ context.Context, m mq.Delivered) error {
			got <- m.ID
			return nil
		}, mq.ConsumerOptions{Concurrency: 1})
	if err != nil {
		return "", err
	}
	if err := cons.Start(); err != nil {
		return "", err
	}
	defer cons.Close()
	prod, err := mq.NewProducer(mq.EndpointOf(cfg), "seckill-smoke")
	if err != nil {
		return "", err
	}
	defer prod.Close()
	if _, err := prod.Send(ctx, mq.Message{Topic: SmokeTopic, Key: id, ID: id, Body: []byte(`{"smoke":true}`)}); err != nil {
		return "", err
	}
	for {
		select {
		case m := <-got:
			if m == id {
				return fmt.Sprintf("name server %v  sent and consumed message %s on %s", cfg.RocketMQNameServers, id, SmokeTopic), nil
			}
		case <-ctx.Done():
			return "", fmt.Errorf("message %s sent but not consumed back: %w", id, ctx.Err())
		}
	}
}

func smokeTemporal(ctx context.Context, cfg config.Config) (string, error) {
	logger := logx.New(io.Discard, "error")
	c, err := temporalx.Dial(ctx, cfg, logger)
	if err != nil {
		return "", err
	}
	defer c.Close()
	missing, err := temporalx.MissingSearchAttributes(ctx, c, cfg.TemporalNamespace, workflows.SearchAttributeNames)
	if err != nil {
		return "", err
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("search attributes not registered: %v", missing)
	}
	queue := "seckill-smoke-" + uuid.NewString()[:8]
	// The smoke check serves no /metrics: its worker's metrics go to a
	// registry of its own.
	w, err := temporalx.NewWorker(c, queue, worker.Options{}, temporalx.InterceptorOptions{
		Registerer: prometheus.NewRegistry(), AttemptsAlert: cfg.ActivityAttemptsAlert, Logger: logger})
	if err != nil {
		return "", err
	}
	w.RegisterWorkflow(workflows.Smoke)
	w.RegisterActivity(&activities.Smoke{})
	if err := w.Start(); err != nil {
		return "", fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, workflows.Smoke, "seckill")
	if err != nil {
		return "", fmt.Errorf("start smoke workflow: %w", err)
	}
	var res string
	if err := run.Get(ctx, &res); err != nil {
		return "", fmt.Errorf("smoke workflow: %w", err)
	}
	return fmt.Sprintf("%s namespace %s  workflow %s returned %q; search attributes registered",
		cfg.TemporalAddress, cfg.TemporalNamespace, run.GetID(), res), nil
}
