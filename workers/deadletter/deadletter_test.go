package deadletter

import (
	"github.com/seckill/seckill/internal/platform/mq"

	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

func TestNewRefusesMissingDependencies(t *testing.T) {
	// pgxpool connects lazily: this pool is never used.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ok := Options{Broker: mq.Endpoint{NameServers: []string{"127.0.0.1:9876"}}, Group: "g", DefaultTopic: "t"}
	for _, tc := range []struct {
		name string
		pool *pgxpool.Pool
		opt  Options
		reg  prometheus.Registerer
		log  *slog.Logger
	}{
		{"nil pool", nil, ok, prometheus.NewRegistry(), log},
		{"nil registerer", pool, ok, nil, log},
		{"nil logger", pool, ok, prometheus.NewRegistry(), nil},
		{"no name servers", pool, Options{Group: "g", DefaultTopic: "t"}, prometheus.NewRegistry(), log},
		{"no group", pool, Options{Broker: ok.Broker, DefaultTopic: "t"}, prometheus.NewRegistry(), log},
		{"no default topic", pool, Options{Broker: ok.Broker, Group: "g"}, prometheus.NewRegistry(), log},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.pool, tc.opt, tc.reg, tc.log); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
	c, err := New(pool, ok, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatalf("New with every dependency: %v", err)
	}
	if c.opt.RetryEvery != DefaultRetryEvery || c.opt.Concurrency != DefaultConcurrency {
		t.Errorf("defaults not applied: %+v", c.opt)
	}
}

func TestReplayRefusesBadInput(t *testing.T) {
	if _, err := Replay(context.Background(), nil, nil, ReplayOptions{Group: "g"}); err == nil {
		t.Fatal("Replay accepted nil dependencies")
	}
}

func TestNames(t *testing.T) {
	if got := Topic("saga-starter"); got != "%DLQ%saga-starter" {
		t.Errorf("Topic = %q", got)
	}
	if got := ConsumerGroup("saga-starter"); got != "saga-starter-dlq" {
		t.Errorf("ConsumerGroup = %q", got)
	}
}

func TestRedeliveries(t *testing.T) {
	for _, tc := range []struct{ reconsume, want int }{{0, 0}, {1, 0}, {2, 1}, {17, 16}} {
		if got := Redeliveries(tc.reconsume); got != tc.want {
			t.Errorf("Redeliveries(%d) = %d, want %d", tc.reconsume, got, tc.want)
		}
	}
}
