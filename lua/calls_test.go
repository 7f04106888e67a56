package lua

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var tk = Keys{ActivityID: 77, SKUID: 3}

// Each script's KEYS and ARGV, in the order of its file's header.
func TestRender(t *testing.T) {
	for _, c := range []struct {
		name     string
		keys     []string
		argv     []any
		wantKeys []string
		wantArgv []any
	}{
		{name: "reserve.lua",
			wantKeys: []string{"seckill:{77:3}:counter", "seckill:{77:3}:meta", "seckill:{77:3}:r:rid",
				"seckill:{77:3}:req:42:req", "seckill:{77:3}:user:42", "seckill:{77:3}:send_due", "seckill:{77:3}:holders"},
			wantArgv: []any{"rid", "mid", "req", "42", "77", "3", "1000", "2", "1", "7200000", "5000", "0"}},
		{name: "send_claim.lua", wantKeys: []string{"seckill:{77:3}:send_due"}, wantArgv: []any{int64(10), int64(20), 5}},
		{name: "send_done.lua",
			wantKeys: []string{"seckill:{77:3}:send_due", "seckill:{77:3}:counter", "seckill:{77:3}:r:rid", "seckill:{77:3}:r:rid2"},
			wantArgv: []any{OutcomeUnknown, int64(10), "boom", "rid", int64(20), "rid2", int64(30)}},
		{name: "init_sku.lua", wantKeys: []string{"seckill:{77:3}:counter", "seckill:{77:3}:meta"},
			wantArgv: []any{int64(5), int64(4), int64(100), int64(200), int64(300000), int64(60000), "0", 1, 3}},
		{name: "order_created.lua",
			wantKeys: []string{"seckill:{77:3}:r:rid", "seckill:{77:3}:counter", "seckill:{77:3}:send_due"},
			wantArgv: []any{"rid", "oid"}},
		{name: "compensate.lua",
			wantKeys: []string{"seckill:{77:3}:r:rid", "seckill:{77:3}:counter", "seckill:{77:3}:comp:rid",
				"seckill:{77:3}:send_due", "seckill:{77:3}:user:42", "seckill:{77:3}:holders"},
			wantArgv: []any{"rid", "cid", int64(1000), int64(3600000), "1", int64(42)}},
		{name: "release.lua",
			wantKeys: []string{"seckill:{77:3}:r:rid", "seckill:{77:3}:counter", "seckill:{77:3}:rel:rid"},
			wantArgv: []any{"rid", "RELEASE:oid", int64(1000), int64(3600000)}},
		{name: "xfer_take.lua",
			wantKeys: []string{"seckill:{77:3:2}:counter", "seckill:{77:3:2}:xfer:tid", "seckill:{77:3:2}:xfer_out"},
			wantArgv: []any{"tid", "1", int64(4), int64(1000)}},
		{name: "xfer_give.lua", wantKeys: []string{"seckill:{77:3}:counter", "seckill:{77:3}:xin:tid"},
			wantArgv: []any{"tid", "2", int64(4), int64(3600000)}},
		{name: "xfer_close.lua", wantKeys: []string{"seckill:{77:3:2}:xfer:tid", "seckill:{77:3:2}:xfer_out",
			"seckill:{77:3:2}:xfer_closed"},
			wantArgv: []any{"tid", int64(3600000)}},
	} {
		switch c.name {
		case "reserve.lua":
			c.keys, c.argv = ReserveArgs{ReservationID: "rid", MessageID: "mid", RequestID: "req", UserID: 42, NowMS: 1000,
				KeyVersion: 2, SchemaVersion: 1, TTL: 2 * time.Hour, SendDueAtMS: 5000}.Render(tk)
		case "send_claim.lua":
			c.keys, c.argv = SendClaimArgs{NowMS: 10, LeaseUntilMS: 20, Max: 5}.Render(tk)
		case "send_done.lua":
			c.keys, c.argv = SendDoneArgs{Outcome: OutcomeUnknown, NextDueMS: 10, ErrText: "boom",
				Items: []SendDoneItem{{ReservationID: "rid", RecheckMS: 20}, {ReservationID: "rid2", RecheckMS: 30}}}.Render(tk)
		case "init_sku.lua":
			c.keys, c.argv = InitSKUArgs{Initial: 5, Available: 4, StartMS: 100, EndMS: 200, OrderDeadline: 5 * time.Minute,
				PaymentTimeout: time.Minute, MaxPerUser: 3}.Render(tk)
		case "order_created.lua":
			c.keys, c.argv = OrderCreatedArgs{ReservationID: "rid", OrderID: "oid"}.Render(tk)
		case "compensate.lua":
			c.keys, c.argv = CompensateArgs{ReservationID: "rid", CompensationID: "cid", UserID: 42, NowMS: 1000,
				TTL: time.Hour, FreeUserGuard: true}.Render(tk)
		case "release.lua":
			c.keys, c.argv = ReleaseArgs{ReservationID: "rid", ReleaseID: "RELEASE:oid", NowMS: 1000, TTL: time.Hour}.Render(tk)
		case "xfer_take.lua":
			c.keys, c.argv = XferTakeArgs{TransferID: "tid", To: 1, K: 4, NowMS: 1000}.Render(tk.InBucket(2))
		case "xfer_give.lua":
			c.keys, c.argv = XferGiveArgs{TransferID: "tid", From: 2, K: 4, TTL: time.Hour}.Render(tk)
		case "xfer_close.lua":
			c.keys, c.argv = XferCloseArgs{TransferID: "tid", TTL: time.Hour}.Render(tk.InBucket(2))
		}
		if !reflect.DeepEqual(c.keys, c.wantKeys) {
			t.Errorf("%s KEYS = %q, want %q", c.name, c.keys, c.wantKeys)
		}
		if !reflect.DeepEqual(c.argv, c.wantArgv) {
			t.Errorf("%s ARGV = %#v, want %#v", c.name, c.argv, c.wantArgv)
		}
		if src := scriptSrc(t, c.name); c.name == "send_done.lua" {
			// Two fixed KEYS and three fixed ARGV, then one key and two ARGV per reservation.
			for _, w := range []string{"KEYS[2] ", "KEYS[2+i] ", "ARGV[3] ", "ARGV[2+2i] ", "ARGV[3+2i] ", "ARGV[2 * i - 2]", "ARGV[2 * i - 1]"} {
				if !strings.Contains(src, w) || strings.Contains(src, "KEYS[3] ") || strings.Contains(src, "ARGV[4] ") {
					t.Errorf("send_done.lua: the header or body does not use %q as rendered", w)
				}
			}
		} else if !strings.Contains(src, fmt.Sprintf("KEYS[%d]", len(c.keys))) ||
			strings.Contains(src, fmt.Sprintf("KEYS[%d]", len(c.keys)+1)) ||
			!strings.Contains(src, fmt.Sprintf("ARGV[%d]", len(c.argv))) ||
			strings.Contains(src, fmt.Sprintf("ARGV[%d]", len(c.argv)+1)) {
			t.Errorf("%s: %d KEYS and %d ARGV rendered, the script uses another number", c.name, len(c.keys), len(c.argv))
		}
	}
}

func scriptSrc(t *testing.T, name string) string {
	t.Helper()
	s, ok := map[string]string{"reserve.lua": reserveSrc, "send_claim.lua": sendClaimSrc, "send_done.lua": sendDoneSrc,
		"init_sku.lua": initSKUSrc, "order_created.lua": orderCreatedSrc, "compensate.lua": compensateSrc,
		"release.lua": releaseSrc, "xfer_take.lua": xferTakeSrc, "xfer_give.lua": xferGiveSrc, "xfer_close.lua": xferCloseSrc}[name]
	if !ok {
		t.Fatalf("no script %s", name)
	}
	return s
}

// Template is Render with the user id as text: the same call for redis-benchmark.
func TestReserveTemplate(t *testing.T) {
	a := ReserveArgs{ReservationID: "rid", MessageID: "mid", RequestID: "req", UserID: 42, NowMS: 1000, TTL: time.Hour}
	keys, argv := a.Render(tk)
	tkeys, targv := a.Template(tk, "42")
	if !reflect.DeepEqual(keys, tkeys) || fmt.Sprint(argv) != fmt.Sprint(targv) {
		t.Fatalf("Render %q %q != Template %q %q", keys, argv, tkeys, targv)
	}
	tkeys, targv = a.Template(tk, "__rand_int__")
	if tkeys[3] != "seckill:{77:3}:req:__rand_int__:req" || tkeys[4] != "seckill:{77:3}:user:__rand_int__" ||
		targv[3] != "__rand_int__" {
		t.Fatalf("placeholder not in the user's places: %q %q", tkeys, targv)
	}
	if k := tk.Request(42, "req"); k != keys[3] {
		t.Fatalf("Keys.Request = %q, rendered %q", k, keys[3])
	}
}

func TestParseReplies(t *testing.T) {
	for _, c := range []struct {
		name  string
		parse func(any) (any, error)
		in    any
		want  any
	}{
		{"reserve admitted", wrap(parseReserve), []any{int64(1), "rid", int64(301000)},
			ReserveReply{Code: ReserveAdmitted, ReservationID: "rid", DeadlineMS: 301000}},
		{"reserve duplicate", wrap(parseReserve), []any{int64(2), "rid", "ORDER_CREATED"},
			ReserveReply{Code: ReserveDuplicate, ReservationID: "rid", Status: "ORDER_CREATED"}},
		{"reserve duplicate without status", wrap(parseReserve), []any{int64(2), "rid", nil},
			ReserveReply{Code: ReserveDuplicate, ReservationID: "rid", Status: "UNKNOWN"}},
		{"reserve already reserved", wrap(parseReserve), []any{int64(-2), "other", "ALREADY_RESERVED"},
			ReserveReply{Code: ReserveAlreadyReserved, ReservationID: "other"}},
		{"reserve sold out", wrap(parseReserve), []any{int64(-1), "", int64(7)}, ReserveReply{Code: ReserveSoldOut, HoldersVersion: 7}},
		{"send_claim", wrap(parseSendClaim), []any{"r1", "1000", "r2", "1700000000123"},
			[]Claimed{{"r1", 1000}, {"r2", 1700000000123}}},
		{"send_claim none", wrap(parseSendClaim), []any{}, []Claimed{}},
		{"send_done", wrap(parseSendDone(1)), []any{int64(1), "UNKNOWN"}, []SendDoneReply{{Code: SendDoneRecorded, State: "UNKNOWN"}}},
		{"send_done of two", wrap(parseSendDone(2)), []any{int64(3), "SETTLED", int64(-1), "MISSING"},
			[]SendDoneReply{{Code: SendDoneSettled, State: "SETTLED"}, {Code: SendDoneMissing, State: "MISSING"}}},
		{"init_sku", wrap(parseInitSKU), []any{int64(0), int64(4)}, InitSKUReply{Code: InitSKUKept, Available: 4}},
		{"order_created", wrap(parseOrderCreated), []any{int64(-4), "COMPENSATED"},
			OrderCreatedReply{Code: OrderCreatedInvalidStatus, Text: "COMPENSATED"}},
		{"compensate", wrap(parseCompensate), []any{int64(2), "ALREADY_COMPENSATED"},
			CompensateReply{Code: AlreadyCompensated, Text: "ALREADY_COMPENSATED"}},
		{"release", wrap(parseRelease), []any{int64(-5), "RELEASE_ID_CONFLICT"},
			ReleaseReply{Code: ReleaseIDConflict, Text: "RELEASE_ID_CONFLICT"}},
		{"xfer_take taken", wrap(parseXferTake), []any{int64(1), "SENT", int64(3)},
			XferTakeReply{Code: XferTaken, State: TransferSent, Available: 3}},
		{"xfer_take short", wrap(parseXferTake), []any{int64(-1), "", int64(0)}, XferTakeReply{Code: XferShort}},
		{"xfer_give", wrap(parseXferGive), []any{int64(2), int64(5)}, XferGiveReply{Code: XferAlreadyGiven, Available: 5}},
		{"xfer_close", wrap(parseXferClose), []any{int64(-1), "MISSING"}, XferCloseReply{Code: XferCloseMissing, State: "MISSING"}},
	} {
		got, err := c.parse(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

func TestParseMalformedReplies(t *testing.T) {
	for _, c := range []struct {
		name   string
		parse  func(any) (any, error)
		in     any
		script string
		reason string
	}{
		{"not an array", wrap(parseReserve), "OK", "reserve.lua", "not an array"},
		{"short", wrap(parseReserve), []any{int64(1), "rid"}, "reserve.lua", "2 elements, want 3"},
		{"unknown code", wrap(parseReserve), []any{int64(7), "rid", "x"}, "reserve.lua", "unknown code 7"},
		{"code not an integer", wrap(parseReserve), []any{"1", "rid", int64(1)}, "reserve.lua", "element 1 is string"},
		{"deadline not an integer", wrap(parseReserve), []any{int64(1), "rid", "soon"}, "reserve.lua", "element 3 is string"},
		{"odd claim", wrap(parseSendClaim), []any{"r1", "1", "r2"}, "send_claim.lua", "pairs"},
		{"claim score", wrap(parseSendClaim), []any{"r1", "soon"}, "send_claim.lua", "score of r1"},
		{"claim id", wrap(parseSendClaim), []any{int64(1), "1"}, "send_claim.lua", "element 1 is int64"},
		{"send_done code", wrap(parseSendDone(1)), []any{int64(2), "X"}, "send_done.lua", "unknown code 2"},
		{"send_done text", wrap(parseSendDone(1)), []any{int64(1), int64(0)}, "send_done.lua", "element 2 is int64"},
		{"send_done count", wrap(parseSendDone(1)), []any{int64(1), "UNKNOWN", int64(1), "UNKNOWN"}, "send_done.lua", "4 elements for 1 reservations"},
		{"init_sku available", wrap(parseInitSKU), []any{int64(1), "5"}, "init_sku.lua", "element 2 is string"},
		{"init_sku code", wrap(parseInitSKU), []any{int64(2), int64(5)}, "init_sku.lua", "unknown code 2"},
		{"order_created", wrap(parseOrderCreated), []any{int64(-3), "X"}, "order_created.lua", "unknown code -3"},
		{"compensate", wrap(parseCompensate), []any{int64(1)}, "compensate.lua", "1 elements, want 2"},
		{"release", wrap(parseRelease), nil, "release.lua", "not an array"},
		{"xfer_take code", wrap(parseXferTake), []any{int64(3), "SENT", int64(1)}, "xfer_take.lua", "unknown code 3"},
		{"xfer_take short reply", wrap(parseXferTake), []any{int64(1), "SENT"}, "xfer_take.lua", "2 elements, want 3"},
		{"xfer_give available", wrap(parseXferGive), []any{int64(1), "5"}, "xfer_give.lua", "element 2 is string"},
		{"xfer_close code", wrap(parseXferClose), []any{int64(3), "X"}, "xfer_close.lua", "unknown code 3"},
	} {
		_, err := c.parse(c.in)
		if !errors.Is(err, ErrBadReply) || !strings.HasPrefix(err.Error(), c.script+": ") ||
			!strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: error %v, want %s: ErrBadReply ... %s", c.name, err, c.script, c.reason)
		}
	}
}

func TestParseSendDoneCmd(t *testing.T) {
	cmd := redis.NewCmd(t.Context())
	cmd.SetVal([]any{int64(-1), "MISSING"})
	if r, err := ParseSendDone(cmd, 1); err != nil || len(r) != 1 || r[0] != (SendDoneReply{Code: SendDoneMissing, State: "MISSING"}) {
		t.Fatalf("ParseSendDone = %+v, %v", r, err)
	}
	noscript := redis.ErrNoScript
	cmd.SetErr(noscript)
	if _, err := ParseSendDone(cmd, 1); !errors.Is(err, noscript) || !strings.HasPrefix(err.Error(), "send_done.lua: ") {
		t.Fatalf("ParseSendDone of a failed command = %v", err)
	}
}

func TestCodeNames(t *testing.T) {
	if s := fmt.Sprint(ReserveSoldOut, Compensated, InitSKUNeedsRebuild, ReserveCode(9)); s != "SOLD_OUT COMPENSATED NEEDS_REBUILD code(9)" {
		t.Fatalf("names = %q", s)
	}
}

func wrap[R any](f func(any) (R, error)) func(any) (any, error) {
	return func(v any) (any, error) { return f(v) }
}

func TestBucketKeysAndMembers(t *testing.T) {
	sku := SKU{ActivityID: 77, SKUID: 3, Buckets: 4}
	all := sku.All()
	if len(all) != 4 || all[0].Counter() != "seckill:{77:3}:counter" || all[2].Counter() != "seckill:{77:3:2}:counter" {
		t.Fatalf("bucket keys %v", all)
	}
	if all[0].Member() != "77:3" || all[3].Member() != "77:3:3" {
		t.Fatalf("members %q %q", all[0].Member(), all[3].Member())
	}
	keys, argv := ReserveArgs{ReservationID: "rid", UserID: 42}.Render(all[2])
	for _, k := range keys {
		if !strings.HasPrefix(k, "seckill:{77:3:2}:") {
			t.Errorf("key %s of bucket 2 is not in its slot", k)
		}
	}
	if argv[len(argv)-1] != "2" {
		t.Errorf("bucket ARGV = %v", argv[len(argv)-1])
	}
}

func TestBucketOfIsStableAndSpreads(t *testing.T) {
	for _, n := range []int{1, 2, 4, 7} {
		counts := make([]int, n)
		for u := int64(1); u <= 40000; u++ {
			b := BucketOf(u, n)
			if b != BucketOf(u, n) || b < 0 || b >= n {
				t.Fatalf("BucketOf(%d, %d) = %d", u, n, b)
			}
			counts[b]++
		}
		for b, c := range counts {
			if want := 40000 / n; c < want*9/10 || c > want*11/10 {
				t.Errorf("B=%d: bucket %d has %d of 40000 users", n, b, c)
			}
		}
		// Ids given out in strides of the bucket count spread too.
		strided := make([]int, n)
		for u := int64(1); u <= 4000; u++ {
			strided[BucketOf(u*int64(n), n)]++
		}
		for b, c := range strided {
			if n > 1 && c == 4000 {
				t.Errorf("B=%d: every strided id lands in bucket %d", n, b)
			}
		}
	}
	if got := Split(10, 4); got[0] != 3 || got[1] != 3 || got[2] != 2 || got[3] != 2 {
		t.Errorf("Split(10, 4) = %v", got)
	}
	if got := Split(7, 1); len(got) != 1 || got[0] != 7 {
		t.Errorf("Split(7, 1) = %v", got)
	}
}

func TestParseMember(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Keys
		ok   bool
	}{
		{"77:3", Keys{ActivityID: 77, SKUID: 3}, true},
		{"77:3:5", Keys{ActivityID: 77, SKUID: 3, Bucket: 5}, true},
		{"77:3:0", Keys{}, false}, // bucket 0's member has no suffix
		{"77:3:64", Keys{}, false},
		{"77", Keys{}, false},
		{"77:x", Keys{}, false},
		{"1:2:3:4", Keys{}, false},
	} {
		got, err := ParseMember(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseMember(%q) = %+v, %v; want %+v ok=%v", c.in, got, err, c.want, c.ok)
		}
		if c.ok && got.Member() != c.in {
			t.Errorf("ParseMember(%q).Member() = %q", c.in, got.Member())
		}
	}
}

func TestSKUStockCheck(t *testing.T) {
	ok := SKUStock{Buckets: []BucketStock{
		{Bucket: 0, Initial: 5, Available: 1, OpenReserved: 1, XferOut: 3},
		{Bucket: 1, Initial: 5, Available: 6, XferIn: 2, Committed: 1},
	}, Initial: 10, Available: 7, OpenReserved: 1, Committed: 1, InFlight: 1, InFlightRecords: 1}
	if err := ok.Check(true); err != nil {
		t.Fatalf("conserved stock: %v", err)
	}
	bad := ok
	bad.InFlightRecords = 0
	if err := bad.Check(false); err != nil {
		t.Fatalf("records are only compared when quiescent: %v", err)
	}
	if err := bad.Check(true); err == nil || !strings.Contains(err.Error(), "SENT records") {
		t.Fatalf("in-flight mismatch: %v", err)
	}
	// Live, in-flight may over-count (a transfer taken while the SKU was
	// read), never fall below the records' or below 0.
	over := ok
	over.InFlight = 3
	if err := over.Check(false); err != nil {
		t.Fatalf("over-counted in-flight during a read: %v", err)
	}
	if err := over.Check(true); err == nil || !strings.Contains(err.Error(), "as read with them") {
		t.Fatalf("over-counted in-flight at rest: %v", err)
	}
	under := ok
	under.InFlightRecords = 2
	if err := under.Check(false); err == nil || !strings.Contains(err.Error(), "less than") {
		t.Fatalf("in-flight below the records: %v", err)
	}
	under.InFlight, under.InFlightRecords = -1, 0
	if err := under.Check(false); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("negative in-flight: %v", err)
	}
	bad = ok
	bad.Buckets = []BucketStock{ok.Buckets[0], {Bucket: 1, Initial: 5, Available: 7, XferIn: 2, Committed: 1}}
	if err := bad.Check(false); err == nil || !strings.Contains(err.Error(), "bucket 1") {
		t.Fatalf("broken bucket: %v", err)
	}
}
