package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/sale"
	"github.com/seckill/seckill/lua"
)

// loopbackAddr splits host:port and refuses anything but a loopback host:
// the bench loads only this machine.
func loopbackAddr(name, addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%s=%q: %w", name, addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("%s=%q: bad port", name, addr)
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", 0, fmt.Errorf("%s=%q: the bench only loads 127.0.0.1 (loopback)", name, addr)
	}
	return host, port, nil
}

// loopbackAll refuses a Redis or RocketMQ name server of cfg, or any other
// address of the name, address pairs, that is not on this machine.
func loopbackAll(cfg config.Config, pairs ...string) error {
	pairs = append(pairs, "SECKILL_REDIS_ADDR", cfg.RedisAddr)
	for _, ns := range cfg.RocketMQNameServers {
		pairs = append(pairs, "SECKILL_ROCKETMQ_NAMESRV", ns)
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		if _, _, err := loopbackAddr(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// singleRedis refuses a Redis Cluster: the benches measure the single Redis
// (redis-benchmark drives one server).
func singleRedis(cfg config.Config) error {
	if cfg.RedisCluster() {
		return errors.New("SECKILL_REDIS_CLUSTER_ADDRS is set: the benches measure the single Redis (SECKILL_REDIS_ADDR); unset it")
	}
	return nil
}

// unlinkTag deletes every key of k's hash tag (SCAN + UNLINK in batches on
// the node that owns its slot).
func unlinkTag(ctx context.Context, rdb redis.UniversalClient, k lua.Keys) (int64, error) {
	pattern := strings.TrimSuffix(k.Counter(), "counter") + "*" // no glob characters in the prefix
	node, err := redisx.NodeFor(ctx, rdb, k.Counter())
	if err != nil {
		return 0, err
	}
	var deleted int64
	var cursor uint64
	for {
		keys, next, err := node.Scan(ctx, cursor, pattern, 2000).Result()
		if err != nil {
			return deleted, fmt.Errorf("scan %s: %w", pattern, err)
		}
		for len(keys) > 0 {
			batch := keys[:min(len(keys), 500)]
			keys = keys[len(batch):]
			n, err := node.Unlink(ctx, batch...).Result()
			if err != nil {
				return deleted, fmt.Errorf("unlink: %w", err)
			}
			deleted += n
		}
		if cursor = next; cursor == 0 {
			return deleted, nil
		}
	}
}

// benchCleanup deletes the bench activity's Redis keys (SCAN + UNLINK in
// batches, per SKU, on the node that holds the SKU's slot), its active_skus
// members and its PostgreSQL rows.
func benchCleanup(ctx context.Context, rdb redis.UniversalClient, pool *pgxpool.Pool, activityID int64, skus []sale.SKU,
	progress func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var deleted int64
	members := make([]any, 0, len(skus))
	for _, s := range skus {
		for _, k := range (lua.SKU{ActivityID: activityID, SKUID: s.SKUID, Buckets: max(s.Buckets, 1)}).All() {
			n, err := unlinkTag(ctx, rdb, k)
			deleted += n
			if err != nil {
				return err
			}
			members = append(members, k.Member())
		}
	}
	if err := rdb.SRem(ctx, lua.ActiveSKUs, members...).Err(); err != nil {
		return fmt.Errorf("srem %s: %w", lua.ActiveSKUs, err)
	}
	var rows [3]int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i, q := range []string{
			`DELETE FROM inventory_reservation WHERE activity_id = $1`,
			`DELETE FROM sku_inventory WHERE activity_id = $1`,
			`DELETE FROM sale_activity WHERE activity_id = $1`,
		} {
			tag, err := tx.Exec(ctx, q, activityID)
			if err != nil {
				return err
			}
			rows[i] = tag.RowsAffected()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete PostgreSQL rows: %w", err)
	}
	progress("deleted %d Redis keys; PostgreSQL rows: %d inventory_reservation, %d sku_inventory, %d sale_activity",
		deleted, rows[0], rows[1], rows[2])
	return nil
}

func skuMember(activityID, skuID int64) string {
	return strconv.FormatInt(activityID, 10) + ":" + strconv.FormatInt(skuID, 10)
}

// probeTopic sends one probe message (nobody reads it) to topic.
func probeTopic(ctx context.Context, p *mq.Producer, topic string, timeout time.Duration) error {
	pctx, c := context.WithTimeout(ctx, timeout)
	defer c()
	_, err := p.Send(pctx, mq.Message{Topic: topic, Key: "bench-probe", ID: uuid.NewString(),
		Tag: "BENCH_PROBE", Body: []byte(`{"bench_probe":true}`)})
	return err
}
