package redisx_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// On a Redis Cluster, the scripts are loaded on every master, and SKUs
// whose hash tags land on different masters each run their scripts on
// their own master: the stock of one SKU moves there and nowhere else.
func TestClusterSpreadsSKUsOverMasters(t *testing.T) {
	cfg := testenv.Require(t)
	if !cfg.RedisCluster() {
		t.Skip("no Redis Cluster: SECKILL_REDIS_CLUSTER_ADDRS is not set (make test-redis-cluster sets it)")
	}
	ctx := context.Background()
	rdb := testenv.Redis(t, cfg)
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("SECKILL_REDIS_CLUSTER_ADDRS is set but the client is a %T", rdb)
	}
	masters := scriptsOnEveryMaster(t, cc)
	if len(masters) < 2 {
		t.Fatalf("%d master(s): a cluster of one proves nothing", len(masters))
	}
	// One SKU per master: try SKU ids until each master holds one.
	activity := testenv.ActivityID()
	bySKU := map[string]lua.Keys{} // master address -> the SKU it holds
	for sku := int64(1); len(bySKU) < len(masters) && sku < 1000; sku++ {
		k := lua.Keys{ActivityID: activity, SKUID: sku}
		node, err := redisx.NodeFor(ctx, cc, k.Counter())
		if err != nil {
			t.Fatal(err)
		}
		if _, taken := bySKU[node.Options().Addr]; !taken {
			bySKU[node.Options().Addr] = k
		}
	}
	d := testenv.Deriver(t, cfg)
	now := time.Now()
	for addr, k := range bySKU {
		t.Cleanup(func() { testenv.DeleteSKUKeys(context.Background(), cc, k) })
		if res, err := lua.InitSKU(ctx, cc, k, lua.InitSKUArgs{Initial: 5, Available: 5, StartMS: now.Add(-time.Hour).UnixMilli(),
			EndMS: now.Add(time.Hour).UnixMilli(), OrderDeadline: time.Minute, PaymentTimeout: time.Minute, Unmoved: true}); err != nil || res.Code != lua.InitSKUCreated {
			t.Fatalf("init sku %d on %s: %+v %v", k.SKUID, addr, res, err)
		}
		testenv.MustReserve(t, cc, d, k, 1)
		testenv.MustReserve(t, cc, d, k, 2)
		// The master that owns the tag's slot holds the counter, moved by
		// reserve.lua (it answers without MOVED); no other master has a key
		// in that slot.
		owner := masters[addr]
		slot, err := owner.ClusterKeySlot(ctx, k.Counter()).Result()
		if err != nil {
			t.Fatal(err)
		}
		v, err := owner.HMGet(ctx, k.Counter(), "available", "open_reserved").Result()
		if err != nil || v[0] != "3" || v[1] != "2" {
			t.Fatalf("sku %d (slot %d) on its master %s: available, open_reserved = %v %v, want 3 2", k.SKUID, slot, addr, v, err)
		}
		for other, n := range masters {
			if other == addr {
				continue
			}
			if c, err := n.ClusterCountKeysInSlot(ctx, int(slot)).Result(); err != nil || c != 0 {
				t.Fatalf("sku %d's slot %d has %d keys on %s too (%v)", k.SKUID, slot, c, other, err)
			}
		}
		t.Logf("sku %d: slot %d on master %s", k.SKUID, slot, addr)
	}
	if len(bySKU) < 2 {
		t.Fatalf("the SKUs landed on %d master(s)", len(bySKU))
	}
}

// scriptsOnEveryMaster checks SCRIPT EXISTS of every script on each master
// and returns the masters by address.
func scriptsOnEveryMaster(t *testing.T, cc *redis.ClusterClient) map[string]*redis.Client {
	t.Helper()
	var hashes []string
	for _, s := range lua.All() {
		hashes = append(hashes, s.Hash())
	}
	var mu sync.Mutex
	masters := map[string]*redis.Client{}
	err := cc.ForEachMaster(context.Background(), func(ctx context.Context, n *redis.Client) error {
		exists, err := n.ScriptExists(ctx, hashes...).Result()
		if err != nil {
			return err
		}
		for i, ok := range exists {
			if !ok {
				t.Errorf("master %s lacks script %s", n.Options().Addr, hashes[i])
			}
		}
		mu.Lock()
		masters[n.Options().Addr] = n
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return masters
}
