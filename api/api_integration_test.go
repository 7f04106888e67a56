package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/auth"
	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/reservation"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/lua"
)

// stack is the real router, wired as cmd/internal/cli/api.go wires it, on the
// stack's Redis and RocketMQ and a fresh PostgreSQL database.
type stack struct {
	t    *testing.T
	cfg  config.Config
	pool *pgxpool.Pool
	rdb  redis.UniversalClient
	auth *auth.Authenticator
	ids  *ids.Deriver
	h    http.Handler
	srv  *httptest.Server
	doc  *doc
	// metrics are the gateway's reservation metrics (served elsewhere than the API).
	metrics *metrics.Reservation

	mu       sync.Mutex
	cleaning map[int64]bool
}

func newStack(t *testing.T) *stack { return newStackWith(t, stackOptions{}) }

// stackOptions change what newStackWith wires: another Redis (default the
// stack's), the budgets (default the API's).
type stackOptions struct {
	redis                     redis.UniversalClient
	reserveBudget, readBudget time.Duration
	pipelined                 bool // reserve.lua through the auto-pipeliner, as the gateway runs by default
}

func newStackWith(t *testing.T, o stackOptions) *stack {
	t.Helper()
	cfg := testenv.Require(t)
	_, pool := testenv.Database(t, cfg)
	rdb := o.redis
	if rdb == nil {
		rdb = testenv.Redis(t, cfg)
	}
	prod, err := mq.NewProducer(mq.EndpointOf(cfg), fmt.Sprintf("seckill-api-test-%x", testenv.RandomUint64()),
		mq.WithSendTimeout(cfg.MQSendTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	keys, err := cfg.IDKeys()
	if err != nil {
		t.Fatal(err)
	}
	d, err := ids.NewDeriver(keys, cfg.IDKeyVersion)
	if err != nil {
		t.Fatal(err)
	}
	authn, err := app.Authenticator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := metrics.NewRegistry()
	rm := metrics.NewReservation(reg)
	opt := reservation.Options{
		Topic: cfg.TopicOrderCreate, SendTimeout: cfg.MQSendTimeout, SendDueDelay: cfg.SendDueDelay,
		ReservationTTL: cfg.ReservationTTL, SoldOutMemo: cfg.SoldOutMemo,
	}
	if o.pipelined {
		if opt.Scripts, err = redisx.PipelinedScripts(rdb); err != nil {
			t.Fatal(err)
		}
	}
	res, err := reservation.NewReserver(rdb, d, prod, opt, rm, &failpoint.Set{}, log)
	if err != nil {
		t.Fatal(err)
	}
	h := api.NewRouter(api.Deps{Auth: authn, Reserver: res, Status: reservation.NewStatusReader(rdb, pool),
		Pool: pool, Redis: rdb, Log: log, ReserveBudget: o.reserveBudget, ReadBudget: o.readBudget})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &stack{t: t, cfg: cfg, pool: pool, rdb: rdb, auth: authn, ids: d, h: h, srv: srv, doc: loadDoc(t), metrics: rm,
		cleaning: map[int64]bool{}}
}

func (s *stack) token(user int64) string { return "Bearer " + mint(s.t, s.auth, user, time.Hour) }

// call sends one real HTTP request and checks the answer against openapi.yaml.
func (s *stack) call(method, path string, header http.Header, body string) (int, map[string]any, http.Header) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	maps.Copy(rec.Header(), resp.Header)
	rec.WriteHeader(resp.StatusCode)
	rec.Write(raw)
	s.doc.conform(s.t, s.h, method, path, rec)
	var m map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &m); err != nil {
			s.t.Fatalf("%s %s: %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, m, resp.Header
}

// forget removes every Redis key of an activity when the test ends.
func (s *stack) forget(activityID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cleaning[activityID] {
		return
	}
	s.cleaning[activityID] = true
	s.t.Cleanup(func() {
		ctx := context.Background()
		pattern := fmt.Sprintf("seckill:{%d:*", activityID)
		for _, k := range s.scan(pattern) {
			s.rdb.Del(ctx, k)
		}
		var members []any
		it := s.rdb.SScan(ctx, lua.ActiveSKUs, 0, fmt.Sprintf("%d:*", activityID), 1000).Iterator()
		for it.Next(ctx) {
			members = append(members, it.Val())
		}
		if len(members) > 0 {
			s.rdb.SRem(ctx, lua.ActiveSKUs, members...)
		}
		if left := s.scan(pattern); len(left) > 0 {
			s.t.Errorf("clean-up left Redis keys %v", left)
		}
	})
}

func (s *stack) scan(match string) []string {
	return testenv.ScanKeys(s.t, s.rdb, match)
}

type skuDef struct{ id, stock int64 }

func activityDef(id int64, start, end time.Time, skus ...skuDef) map[string]any {
	var list []any
	for _, k := range skus {
		list = append(list, map[string]any{"sku_id": k.id, "stock": k.stock, "price_cents": 500})
	}
	return map[string]any{"activity_id": id, "name": fmt.Sprintf("api test %d", id),
		"starts_at": start.UTC().Format(time.RFC3339Nano), "ends_at": end.UTC().Format(time.RFC3339Nano),
		"payment_timeout_seconds": 600, "order_deadline_seconds": 300, "skus": list}
}

func (s *stack) setup(def map[string]any) (int, map[string]any) {
	s.t.Helper()
	s.forget(def["activity_id"].(int64))
	st, m, _ := s.call(http.MethodPost, "/v1/admin/activities", hdr("Authorization", "Bearer "+s.cfg.AdminToken), jsonOf(s.t, def))
	return st, m
}

// liveSale sets up an open sale and returns its id.
func (s *stack) liveSale(skus ...skuDef) int64 {
	s.t.Helper()
	id := testenv.ActivityID()
	now := time.Now()
	if st, m := s.setup(activityDef(id, now.Add(-time.Minute), now.Add(time.Hour), skus...)); st != http.StatusOK {
		s.t.Fatalf("set-up = %d %v", st, m)
	}
	return id
}

func reservePathOf(a, sku int64) string {
	return fmt.Sprintf("/v1/activities/%d/skus/%d/reservations", a, sku)
}

func (s *stack) reserve(user, a, sku int64, key string) (int, map[string]any) {
	s.t.Helper()
	st, m, _ := s.call(http.MethodPost, reservePathOf(a, sku), hdr("Authorization", s.token(user), "Idempotency-Key", key), "")
	return st, m
}

// state is everything Redis holds for one SKU: every key, every hash.
type state struct {
	keys    []string
	counter map[string]string
	hashes  map[string]map[string]string
	sendDue []string
}

func (s *stack) state(a, sku int64) state {
	s.t.Helper()
	ctx := context.Background()
	k := lua.Keys{ActivityID: a, SKUID: sku}
	// The gateway sends ORDER_CREATE_REQUESTED after answering: let it record
	// the outcome (every reservation in send_due PUBLISHED: it stays there,
	// unsettled, until its order exists) before taking the picture.
	unsent := func() (out []string) {
		for _, rid := range s.rdb.ZRange(ctx, k.SendDue(), 0, -1).Val() {
			if s.rdb.HGet(ctx, k.Reservation(rid), "mq_state").Val() != "PUBLISHED" {
				out = append(out, rid)
			}
		}
		return out
	}
	for deadline := time.Now().Add(10 * time.Second); len(unsent()) > 0; {
		if time.Now().After(deadline) {
			s.t.Fatalf("the gateway did not confirm its sends within 10s: %v", unsent())
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := state{keys: s.scan(fmt.Sprintf("seckill:{%d:%d}:*", a, sku)), hashes: map[string]map[string]string{}}
	st.counter = s.rdb.HGetAll(ctx, k.Counter()).Val()
	for _, key := range st.keys {
		if s.rdb.Type(ctx, key).Val() == "hash" {
			st.hashes[key] = s.rdb.HGetAll(ctx, key).Val()
		}
	}
	st.sendDue = s.rdb.ZRange(ctx, k.SendDue(), 0, -1).Val()
	return st
}

func (s *stack) sameState(before state, a, sku int64, what string) {
	s.t.Helper()
	after := s.state(a, sku)
	if !slices.Equal(before.keys, after.keys) {
		s.t.Fatalf("%s: Redis keys changed\n before %v\n after  %v", what, before.keys, after.keys)
	}
	if !maps.Equal(before.counter, after.counter) {
		s.t.Fatalf("%s: counters changed %v -> %v", what, before.counter, after.counter)
	}
	for k, h := range before.hashes {
		if !maps.Equal(h, after.hashes[k]) {
			s.t.Fatalf("%s: hash %s changed %v -> %v", what, k, h, after.hashes[k])
		}
	}
	if !slices.Equal(before.sendDue, after.sendDue) {
		s.t.Fatalf("%s: send_due changed %v -> %v", what, before.sendDue, after.sendDue)
	}
}

// noReservation checks that nothing exists in Redis for (user, request).
func (s *stack) noReservation(a, sku, user int64, request string) {
	s.t.Helper()
	ctx := context.Background()
	k := lua.Keys{ActivityID: a, SKUID: sku}
	keys := []string{k.User(user)}
	if rq, err := uuid.Parse(request); err == nil {
		id, err := s.ids.ForRequest(0, a, sku, user, rq)
		if err != nil {
			s.t.Fatal(err)
		}
		keys = append(keys, k.Request(user, rq.String()), k.Reservation(id.ReservationID.String()))
	}
	if n := s.rdb.Exists(ctx, keys...).Val(); n != 0 {
		s.t.Fatalf("user %d request %q: %d of %v exist", user, request, n, keys)
	}
}

func (s *stack) counters(a, sku int64) (avail, open int64) {
	s.t.Helper()
	v := s.rdb.HMGet(context.Background(), lua.Keys{ActivityID: a, SKUID: sku}.Counter(), "available", "open_reserved").Val()
	n := func(x any) int64 {
		i, err := strconv.ParseInt(fmt.Sprint(x), 10, 64)
		if err != nil {
			s.t.Fatalf("counter %v: %v", x, err)
		}
		return i
	}
	return n(v[0]), n(v[1])
}

func (s *stack) count(sql string, args ...any) int {
	s.t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// fieldOf is the error body's field, "" when absent.
func fieldOf(m map[string]any) string { f, _ := m["field"].(string); return f }

func skuResult(t *testing.T, m map[string]any, i int) map[string]any {
	t.Helper()
	list := asSlice(m["skus"])
	if i >= len(list) {
		t.Fatalf("set-up result %v has no sku %d", m, i)
	}
	return obj(list[i])
}

func wantSKU(t *testing.T, got map[string]any, sku int64, created bool, initial, available int64, redisInit bool, redisAvail int64) {
	t.Helper()
	want := map[string]any{"sku_id": float64(sku), "created": created, "initial_stock": float64(initial),
		"available_stock": float64(available), "price_cents": float64(500), "redis_initialised": redisInit,
		"redis_available": float64(redisAvail), "buckets": float64(1)}
	if !maps.Equal(got, want) {
		t.Fatalf("sku result %v, want %v", got, want)
	}
}

// A SKU set up with four buckets answers its count and spreads its stock;
// the same SKU with another count is refused, naming the field, and
// nothing changes.
func TestIntegrationSaleSetupBuckets(t *testing.T) {
	s := newStack(t)
	a := testenv.ActivityID()
	now := time.Now()
	def := activityDef(a, now.Add(-time.Minute), now.Add(time.Hour), skuDef{7, 10})
	def["skus"].([]any)[0].(map[string]any)["buckets"] = 4
	st, m := s.setup(def)
	if st != http.StatusOK {
		t.Fatalf("set-up = %d %v", st, m)
	}
	if r := skuResult(t, m, 0); r["buckets"] != float64(4) || r["redis_available"] != float64(10) {
		t.Fatalf("sku result %v, want 4 buckets holding 10 units", r)
	}
	ctx := context.Background()
	sku := lua.SKU{ActivityID: a, SKUID: 7, Buckets: 4}
	for b, want := range lua.Split(10, 4) {
		if got, _ := s.rdb.HGet(ctx, sku.Bucket(b).Counter(), "available").Int64(); got != want {
			t.Errorf("bucket %d holds %d, want %d", b, got, want)
		}
	}
	def["skus"].([]any)[0].(map[string]any)["buckets"] = 2
	if st, m := s.setup(def); st != http.StatusConflict || m["code"] != "BUCKETS_FIXED" || fieldOf(m) != "skus[0].buckets" {
		t.Fatalf("another bucket count = %d %v, want 409 BUCKETS_FIXED naming skus[0].buckets", st, m)
	}
	if n := s.count(`SELECT buckets FROM sku_inventory WHERE activity_id = $1 AND sku_id = 7`, a); n != 4 {
		t.Fatalf("sku_inventory.buckets = %d after the refused set-up, want 4", n)
	}
}

func TestIntegrationReserveAndStatus(t *testing.T) {
	s := newStack(t)
	a := testenv.ActivityID()
	now := time.Now()
	def := activityDef(a, now.Add(-time.Minute), now.Add(time.Hour), skuDef{7, 5}, skuDef{8, 3})

	st, m := s.setup(def)
	if st != http.StatusOK || m["activity_id"] != float64(a) {
		t.Fatalf("set-up = %d %v", st, m)
	}
	wantSKU(t, skuResult(t, m, 0), 7, true, 5, 5, true, 5)
	wantSKU(t, skuResult(t, m, 1), 8, true, 3, 3, true, 3)
	if n := s.count(`SELECT count(*) FROM sku_inventory WHERE activity_id = $1`, a); n != 2 {
		t.Fatalf("sku_inventory rows = %d, want 2", n)
	}

	const alice, bob = int64(101), int64(202)
	key := uuid.NewString()
	st, m = s.reserve(alice, a, 7, key)
	if st != http.StatusAccepted || m["code"] != "QUEUED" {
		t.Fatalf("reserve = %d %v", st, m)
	}
	rid := m["reservation_id"].(string)
	statusURL := fmt.Sprintf("%s/%s", reservePathOf(a, 7), rid)
	if m["status_url"] != statusURL {
		t.Fatalf("status_url = %v, want %s", m["status_url"], statusURL)
	}
	if av, open := s.counters(a, 7); av != 4 || open != 1 {
		t.Fatalf("after reserve: available %d open %d", av, open)
	}

	t.Run("same key again answers the same reservation", func(t *testing.T) {
		for name, h := range map[string]http.Header{
			"header":             hdr("Authorization", s.token(alice), "Idempotency-Key", key),
			"header, upper case": hdr("Authorization", s.token(alice), "Idempotency-Key", strings.ToUpper(key)),
			"body":               hdr("Authorization", s.token(alice)),
		} {
			st, m, _ := s.call(http.MethodPost, reservePathOf(a, 7), h, `{"request_id":"`+key+`"}`)
			if st != http.StatusAccepted || m["code"] != "QUEUED" || m["reservation_id"] != rid {
				t.Fatalf("%s: retry = %d %v, want 202 %s", name, st, m, rid)
			}
		}
		if av, open := s.counters(a, 7); av != 4 || open != 1 {
			t.Fatalf("retries moved stock: available %d open %d", av, open)
		}
	})

	t.Run("second key of the same user", func(t *testing.T) {
		before := s.state(a, 7)
		key2 := uuid.NewString()
		st, m := s.reserve(alice, a, 7, key2)
		if st != http.StatusConflict || m["code"] != "ALREADY_RESERVED" || m["reservation_id"] != rid {
			t.Fatalf("second key = %d %v, want 409 ALREADY_RESERVED naming %s", st, m, rid)
		}
		s.sameState(before, a, 7, "ALREADY_RESERVED")
	})

	t.Run("status for the owner", func(t *testing.T) {
		st, m, _ := s.call(http.MethodGet, statusURL, hdr("Authorization", s.token(alice)), "")
		if st != http.StatusOK || m["reservation_id"] != rid || m["status"] != "QUEUED" ||
			m["reservation_status"] != "RESERVED" || m["source"] != "redis" {
			t.Fatalf("status = %d %v", st, m)
		}
		deadline, err := time.Parse(time.RFC3339Nano, m["business_deadline"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if want := now.Add(300 * time.Second); deadline.Before(want.Add(-time.Minute)) || deadline.After(want.Add(time.Minute)) {
			t.Fatalf("business_deadline %v, want about %v", deadline, want)
		}
	})

	t.Run("status for another user or an unknown id", func(t *testing.T) {
		before := s.state(a, 7)
		st, m, _ := s.call(http.MethodGet, statusURL, hdr("Authorization", s.token(bob)), "")
		if st != http.StatusNotFound || m["code"] != "NOT_FOUND" || strings.Contains(fmt.Sprint(m), rid) {
			t.Fatalf("other user's status = %d %v, want 404 NOT_FOUND", st, m)
		}
		st, m, _ = s.call(http.MethodGet, fmt.Sprintf("%s/%s", reservePathOf(a, 7), uuid.New()), hdr("Authorization", s.token(alice)), "")
		if st != http.StatusNotFound || m["code"] != "NOT_FOUND" {
			t.Fatalf("unknown reservation = %d %v", st, m)
		}
		// The right id under the wrong SKU is not found either.
		st, m, _ = s.call(http.MethodGet, fmt.Sprintf("%s/%s", reservePathOf(a, 8), rid), hdr("Authorization", s.token(alice)), "")
		if st != http.StatusNotFound || m["code"] != "NOT_FOUND" {
			t.Fatalf("reservation under another sku = %d %v", st, m)
		}
		s.sameState(before, a, 7, "GET of another user's reservation")
	})

	t.Run("set-up again keeps stock and price", func(t *testing.T) {
		before := s.state(a, 7)
		again := maps.Clone(def)
		again["skus"] = []any{map[string]any{"sku_id": 7, "stock": 50, "price_cents": 900}, map[string]any{"sku_id": 8, "stock": 30, "price_cents": 900}}
		st, m := s.setup(again)
		if st != http.StatusOK {
			t.Fatalf("second set-up = %d %v", st, m)
		}
		wantSKU(t, skuResult(t, m, 0), 7, false, 5, 5, false, 4)
		wantSKU(t, skuResult(t, m, 1), 8, false, 3, 3, false, 3)
		s.sameState(before, a, 7, "second set-up")
		if n := s.count(`SELECT count(*) FROM sku_inventory WHERE activity_id = $1`, a); n != 2 {
			t.Fatalf("sku_inventory rows = %d after second set-up", n)
		}
	})

	t.Run("keys are per user", func(t *testing.T) {
		// Bob sending Alice's key is Bob's own request, not Alice's reservation.
		st, m := s.reserve(bob, a, 7, key)
		if st != http.StatusAccepted || m["code"] != "QUEUED" || m["reservation_id"] == rid {
			t.Fatalf("bob with alice's key = %d %v (alice holds %s)", st, m, rid)
		}
		if av, open := s.counters(a, 7); av != 3 || open != 2 {
			t.Fatalf("available %d open %d, want 3 and 2", av, open)
		}
	})

	t.Run("operational endpoints", func(t *testing.T) {
		st, m, _ := s.call(http.MethodGet, "/healthz", nil, "")
		if st != http.StatusOK || m["status"] != "ok" {
			t.Fatalf("healthz = %d %v", st, m)
		}
		// /metrics is served on the metrics listener, not here; the counters
		// the gateway keeps are still there.
		resp, err := s.srv.Client().Get(s.srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET /metrics on the public listener = %d, want 404", resp.StatusCode)
		}
		if n := testutil.ToFloat64(s.metrics.Requests.WithLabelValues("QUEUED")); n != 2 {
			t.Fatalf("QUEUED requests counted %v, want 2", n)
		}
		resp, err = s.srv.Client().Get(s.srv.URL + "/v1/openapi.yaml")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, api.OpenAPI) {
			t.Fatalf("openapi.yaml = %d, %d bytes", resp.StatusCode, len(body))
		}
	})
}

func TestIntegrationBadInputChangesNothing(t *testing.T) {
	s := newStack(t)
	a := s.liveSale(skuDef{7, 5})
	const owner, carol = int64(301), int64(303)
	st, m := s.reserve(owner, a, 7, uuid.NewString())
	if st != http.StatusAccepted {
		t.Fatalf("owner's reserve = %d %v", st, m)
	}
	ownerRID := m["reservation_id"].(string)
	otherKey, err := auth.New(auth.Options{Keys: map[int][]byte{1: []byte("a-different-secret-of-32-bytes-or-more!")}, Current: 1, MaxTTL: 24 * time.Hour, AdminToken: s.cfg.AdminToken})
	if err != nil {
		t.Fatal(err)
	}
	path := reservePathOf(a, 7)
	big := `{"request_id":"%s"}` + strings.Repeat(" ", 2048)

	cases := []struct {
		name    string
		method  string
		path    string
		authz   string // default: carol's token
		key     string // Idempotency-Key (also the request checked for leftovers)
		body    string // %s is replaced by key
		status  int
		code    string
		field   string
		noToken bool
	}{
		{name: "bad JSON", key: uuid.NewString(), body: `{"request_id":`, status: 400, code: "INVALID_ARGUMENT", field: "body"},
		{name: "unknown field", key: uuid.NewString(), body: `{"request_id":"%s","quantity":5}`, status: 400, code: "INVALID_ARGUMENT", field: "body"},
		{name: "trailing data", key: uuid.NewString(), body: `{"request_id":"%s"}}`, status: 400, code: "INVALID_ARGUMENT", field: "body"},
		{name: "oversized body", key: uuid.NewString(), body: big, status: 413, code: "PAYLOAD_TOO_LARGE", field: "body"},
		{name: "missing key", status: 400, code: "INVALID_ARGUMENT", field: "Idempotency-Key"},
		{name: "malformed key", key: "not-a-uuid", status: 400, code: "INVALID_ARGUMENT", field: "Idempotency-Key"},
		{name: "nil key", key: uuid.Nil.String(), status: 400, code: "INVALID_ARGUMENT", field: "Idempotency-Key"},
		{name: "key and body disagree", key: uuid.NewString(), body: `{"request_id":"` + uuid.NewString() + `"}`, status: 400, code: "INVALID_ARGUMENT", field: "request_id"},
		{name: "bad sku id", path: fmt.Sprintf("/v1/activities/%d/skus/0/reservations", a), key: uuid.NewString(), status: 400, code: "INVALID_ARGUMENT", field: "sku_id"},
		{name: "no token", key: uuid.NewString(), noToken: true, status: 401, code: "UNAUTHENTICATED"},
		{name: "garbage token", key: uuid.NewString(), authz: "Bearer garbage", status: 401, code: "UNAUTHENTICATED"},
		{name: "token of another key", key: uuid.NewString(), authz: "Bearer " + mint(t, otherKey, carol, time.Hour), status: 401, code: "UNAUTHENTICATED"},
		{name: "expired token", key: uuid.NewString(), authz: "Bearer " + mint(t, s.auth, carol, -time.Minute), status: 401, code: "UNAUTHENTICATED"},
		{name: "admin token", key: uuid.NewString(), authz: "Bearer " + s.cfg.AdminToken, status: 401, code: "UNAUTHENTICATED"},
		{name: "another user's reservation", method: http.MethodGet, path: path + "/" + ownerRID, status: 404, code: "NOT_FOUND"},
		{name: "wrong method", method: http.MethodDelete, path: path + "/" + ownerRID, status: 405, code: "METHOD_NOT_ALLOWED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := s.state(a, 7)
			h := http.Header{}
			switch {
			case c.noToken:
			case c.authz != "":
				h.Set("Authorization", c.authz)
			default:
				h.Set("Authorization", s.token(carol))
			}
			if c.key != "" {
				h.Set("Idempotency-Key", c.key)
			}
			body := c.body
			if strings.Contains(body, "%s") {
				body = fmt.Sprintf(body, c.key)
			}
			method, p := c.method, c.path
			if method == "" {
				method = http.MethodPost
			}
			if p == "" {
				p = path
			}
			st, m, _ := s.call(method, p, h, body)
			if st != c.status || m["code"] != c.code || fieldOf(m) != c.field {
				t.Fatalf("answer %d %v, want %d %s field %q", st, m, c.status, c.code, c.field)
			}
			s.sameState(before, a, 7, c.name)
			s.noReservation(a, 7, carol, c.key)
		})
	}
	// The owner still sees an untouched reservation.
	st, m, _ = s.call(http.MethodGet, path+"/"+ownerRID, hdr("Authorization", s.token(owner)), "")
	if st != http.StatusOK || m["status"] != "QUEUED" {
		t.Fatalf("owner's status = %d %v", st, m)
	}
	if av, open := s.counters(a, 7); av != 4 || open != 1 {
		t.Fatalf("available %d open %d, want 4 and 1", av, open)
	}
}

func TestIntegrationNotAdmitted(t *testing.T) {
	s := newStack(t)
	now := time.Now()

	t.Run("sold out", func(t *testing.T) {
		a := s.liveSale(skuDef{1, 1}, skuDef{2, 0})
		if st, m := s.reserve(401, a, 1, uuid.NewString()); st != http.StatusAccepted {
			t.Fatalf("first buyer = %d %v", st, m)
		}
		before := s.state(a, 1)
		key := uuid.NewString()
		st, m := s.reserve(402, a, 1, key)
		if st != http.StatusConflict || m["code"] != "SOLD_OUT" {
			t.Fatalf("second buyer = %d %v, want 409 SOLD_OUT", st, m)
		}
		s.sameState(before, a, 1, "SOLD_OUT")
		s.noReservation(a, 1, 402, key)
		if av, open := s.counters(a, 1); av != 0 || open != 1 {
			t.Fatalf("available %d open %d", av, open)
		}
		// A SKU set up with no stock at all.
		before = s.state(a, 2)
		if st, m := s.reserve(403, a, 2, key); st != http.StatusConflict || m["code"] != "SOLD_OUT" {
			t.Fatalf("zero-stock sku = %d %v", st, m)
		}
		s.sameState(before, a, 2, "SOLD_OUT on zero stock")
	})

	for _, c := range []struct {
		name       string
		start, end time.Time
		code       string
	}{
		{"not started", now.Add(time.Hour), now.Add(2 * time.Hour), "SALE_NOT_STARTED"},
		{"ended", now.Add(-2 * time.Hour), now.Add(-time.Hour), "SALE_ENDED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := testenv.ActivityID()
			if st, m := s.setup(activityDef(a, c.start, c.end, skuDef{1, 10})); st != http.StatusOK {
				t.Fatalf("set-up = %d %v", st, m)
			}
			before := s.state(a, 1)
			key := uuid.NewString()
			st, m := s.reserve(501, a, 1, key)
			if st != http.StatusForbidden || m["code"] != c.code {
				t.Fatalf("reserve = %d %v, want 403 %s", st, m, c.code)
			}
			s.sameState(before, a, 1, c.code)
			s.noReservation(a, 1, 501, key)
			if av, open := s.counters(a, 1); av != 10 || open != 0 {
				t.Fatalf("available %d open %d", av, open)
			}
		})
	}

	t.Run("unknown activity or sku", func(t *testing.T) {
		unknown := testenv.ActivityID()
		s.forget(unknown)
		key := uuid.NewString()
		st, m := s.reserve(601, unknown, 1, key)
		if st != http.StatusNotFound || m["code"] != "UNKNOWN_SALE" {
			t.Fatalf("unknown activity = %d %v, want 404 UNKNOWN_SALE", st, m)
		}
		if keys := s.scan(fmt.Sprintf("seckill:{%d:*", unknown)); len(keys) != 0 {
			t.Fatalf("unknown activity: Redis keys written %v", keys)
		}
		a := s.liveSale(skuDef{1, 5})
		st, m = s.reserve(601, a, 99, key)
		if st != http.StatusNotFound || m["code"] != "UNKNOWN_SALE" {
			t.Fatalf("unknown sku = %d %v, want 404 UNKNOWN_SALE", st, m)
		}
		if keys := s.scan(fmt.Sprintf("seckill:{%d:99}:*", a)); len(keys) != 0 {
			t.Fatalf("unknown sku: Redis keys written %v", keys)
		}
	})
}

func TestIntegrationAdminRejectsBadDefinitions(t *testing.T) {
	s := newStack(t)
	now := time.Now()
	existing := testenv.ActivityID()
	good := activityDef(existing, now.Add(-time.Minute), now.Add(time.Hour), skuDef{1, 5}, skuDef{2, 5})
	if st, m := s.setup(good); st != http.StatusOK {
		t.Fatalf("set-up = %d %v", st, m)
	}
	rows := func() string {
		var b strings.Builder
		r, err := s.pool.Query(context.Background(), `SELECT activity_id, name, starts_at, ends_at, payment_timeout_seconds,
			order_deadline_seconds, updated_at FROM sale_activity ORDER BY activity_id`)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			v, _ := r.Values()
			fmt.Fprintln(&b, v...)
		}
		r.Close()
		r, err = s.pool.Query(context.Background(), `SELECT activity_id, sku_id, price_cents, initial_stock, available_stock,
			updated_at FROM sku_inventory ORDER BY activity_id, sku_id`)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			v, _ := r.Values()
			fmt.Fprintln(&b, v...)
		}
		r.Close()
		return b.String()
	}
	fresh := testenv.ActivityID()
	s.forget(fresh)
	variant := func(id int64, mut func(map[string]any)) string {
		d := activityDef(id, now.Add(-time.Minute), now.Add(time.Hour), skuDef{1, 5}, skuDef{2, 5})
		mut(d)
		return jsonOf(t, d)
	}
	skus := func(list ...map[string]any) func(map[string]any) {
		return func(d map[string]any) {
			var l []any
			for _, x := range list {
				l = append(l, x)
			}
			d["skus"] = l
		}
	}
	cases := []struct {
		name, body, authz string
		status            int
		code, field       string
	}{
		{name: "negative stock", body: variant(fresh, skus(map[string]any{"sku_id": 1, "stock": 5}, map[string]any{"sku_id": 2, "stock": -1})),
			status: 400, code: "INVALID_ARGUMENT", field: "skus[1].stock"},
		{name: "duplicate sku ids", body: variant(fresh, skus(map[string]any{"sku_id": 3, "stock": 5}, map[string]any{"sku_id": 3, "stock": 5})),
			status: 400, code: "INVALID_ARGUMENT", field: "skus[1].sku_id"},
		{name: "ends before it starts", body: variant(fresh, func(d map[string]any) { d["ends_at"] = now.Add(-time.Hour).UTC().Format(time.RFC3339) }),
			status: 400, code: "INVALID_ARGUMENT", field: "ends_at"},
		{name: "existing activity redefined badly", body: variant(existing, func(d map[string]any) {
			d["name"] = "renamed"
			d["ends_at"] = now.Add(-time.Hour).UTC().Format(time.RFC3339)
		}), status: 400, code: "INVALID_ARGUMENT", field: "ends_at"},
		{name: "existing activity, bad later sku", body: variant(existing, skus(map[string]any{"sku_id": 9, "stock": 5}, map[string]any{"sku_id": 10, "stock": 5, "price_cents": -5})),
			status: 400, code: "INVALID_ARGUMENT", field: "skus[1].price_cents"},
		{name: "unknown field", body: variant(fresh, func(d map[string]any) { d["owner"] = "x" }), status: 400, code: "INVALID_ARGUMENT", field: "body"},
		{name: "bad JSON", body: `{"activity_id":`, status: 400, code: "INVALID_ARGUMENT", field: "body"},
		{name: "user token", body: variant(fresh, func(map[string]any) {}), authz: s.token(77), status: 401, code: "UNAUTHENTICATED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := rows()
			inventory := s.count(`SELECT count(*) FROM sku_inventory`)
			redisBefore := s.state(existing, 1)
			authz := c.authz
			if authz == "" {
				authz = "Bearer " + s.cfg.AdminToken
			}
			st, m, _ := s.call(http.MethodPost, "/v1/admin/activities", hdr("Authorization", authz), c.body)
			if st != c.status || m["code"] != c.code || fieldOf(m) != c.field {
				t.Fatalf("answer %d %v, want %d %s field %q", st, m, c.status, c.code, c.field)
			}
			if n := s.count(`SELECT count(*) FROM sku_inventory`); n != inventory {
				t.Fatalf("sku_inventory rows %d -> %d", inventory, n)
			}
			if after := rows(); after != before {
				t.Fatalf("PostgreSQL changed:\n%s->\n%s", before, after)
			}
			if keys := s.scan(fmt.Sprintf("seckill:{%d:*", fresh)); len(keys) != 0 {
				t.Fatalf("Redis keys written for a rejected definition: %v", keys)
			}
			s.sameState(redisBefore, existing, 1, c.name)
		})
	}
}
