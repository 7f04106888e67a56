package bench

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/lua"
)

// Output of redis-benchmark 7.0.15 with --csv for a custom command.
const csv70 = `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"EVALSHA 2db71225a37d3e22232d15dbfc7aa2bc6d553bd1 6 seckill:{1:1}:counter seckill:{1:1}:meta","16938.16","2.640","0.304","2.479","4.999","7.975","41.407"
`

func TestParseCSVRedis7(t *testing.T) {
	rows, err := ParseCSV(strings.NewReader(csv70))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("rows = %d, want 1", len(rows))
	}
	r := rows[0]
	want := CSVRow{Test: "EVALSHA 2db71225a37d3e22232d15dbfc7aa2bc6d553bd1 6 seckill:{1:1}:counter seckill:{1:1}:meta",
		RPS: 16938.16, AvgMS: 2.640, MinMS: 0.304, P50MS: 2.479, P95MS: 4.999, P99MS: 7.975, MaxMS: 41.407, HasLatency: true}
	if r != want {
		t.Fatalf("row = %+v\nwant  %+v", r, want)
	}
}

func TestParseCSVSkipsWarningsAndCarriageReturns(t *testing.T) {
	out := "WARNING: Could not fetch server CONFIG\r\n" + strings.ReplaceAll(csv70, "\n", "\r\n")
	rows, err := ParseCSV(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].RPS != 16938.16 || rows[0].P99MS != 7.975 {
		t.Fatalf("rows = %+v", rows)
	}
}

func TestParseCSVOldFormatHasNoLatency(t *testing.T) {
	// redis-benchmark 6.0 printed only test and rps.
	rows, err := ParseCSV(strings.NewReader("\"test\",\"rps\"\n\"PING_INLINE\",\"80000.00\"\n\"PING_MBULK\",\"81000.00\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[1].RPS != 81000 || rows[0].HasLatency {
		t.Fatalf("rows = %+v", rows)
	}
}

func TestParseCSVErrors(t *testing.T) {
	for name, in := range map[string]string{
		"empty":      "",
		"no header":  "PING: 80000.00 requests per second, p50=0.103 msec\n",
		"bad number": "\"test\",\"rps\"\n\"PING\",\"fast\"\n",
		"short row":  "\"test\",\"rps\",\"p50_latency_ms\"\n\"PING\",\"1\"\n",
	} {
		if _, err := ParseCSV(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestReserveCallArgsMatchKeyLayout(t *testing.T) {
	c := ReserveCall{SHA: lua.ReserveSHA(), ActivityID: 77, SKUID: 3, NowMS: 1000, KeyVersion: 1, SchemaVersion: 1,
		TTL: 2 * time.Hour, SendDueAtMS: 5000}
	args := c.Args()
	if len(args) != 3+7+12 {
		t.Fatalf("%d args, want EVALSHA sha numkeys + 7 keys + 12 argv: %q", len(args), args)
	}
	if args[0] != "EVALSHA" || args[1] != lua.ReserveSHA() || args[2] != "7" {
		t.Fatalf("head = %q", args[:3])
	}
	// What redis-benchmark makes of the placeholders: 12-digit numbers.
	const n = "000000004242"
	sub := func(s string) string { return strings.ReplaceAll(s, RandInt, n) }
	k := lua.Keys{ActivityID: 77, SKUID: 3}
	id := "00000000-0000-4000-8000-" + n
	req := "00000000-0000-4000-a000-" + n
	wantKeys := []string{k.Counter(), k.Meta(), k.Reservation(id),
		strings.Replace(k.Request(4242, req), ":4242:", ":"+n+":", 1),
		strings.Replace(k.User(4242), ":4242", ":"+n, 1), k.SendDue(), k.Holders()}
	for i, w := range wantKeys {
		if got := sub(args[3+i]); got != w {
			t.Errorf("KEYS[%d] = %q, want %q", i+1, got, w)
		}
	}
	for i, a := range []int{3 + 7, 3 + 7 + 1, 3 + 7 + 2} { // reservation, message and request ids
		if got := sub(args[a]); len(got) != 36 {
			t.Errorf("ARGV[%d] = %q: not 36 characters like a UUID", i+1, got)
		}
	}
	wantTail := []string{"77", "3", "1000", "1", "1", "7200000", "5000", "0"} // ARGV[12]: bucket 0
	if got := args[3+7+4:]; strings.Join(got, " ") != strings.Join(wantTail, " ") {
		t.Errorf("ARGV[5..12] = %q, want %q", got, wantTail)
	}
	if sub(args[3+7+3]) != n {
		t.Errorf("ARGV[4] user = %q", args[3+7+3])
	}
}

func TestRedisBenchmarkArgv(t *testing.T) {
	b := RedisBenchmark{Path: "redis-benchmark", Host: "127.0.0.1", Port: 16379, Clients: 50, Requests: 1000, KeySpace: MaxKeySpace, Password: "pw"}
	got := strings.Join(b.Argv([]string{"PING"}), " ")
	want := "redis-benchmark -h 127.0.0.1 -p 16379 -c 50 -n 1000 -r 2000000000 -a pw --csv PING"
	if got != want {
		t.Fatalf("argv = %q, want %q", got, want)
	}
}

func TestPercentiles(t *testing.T) {
	d := make([]time.Duration, 0, 100)
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	l := Summarize(d)
	if l.P50 != 50*time.Millisecond || l.P99 != 99*time.Millisecond || l.Max != 100*time.Millisecond {
		t.Fatalf("summary = %+v", l)
	}
	if d[0] != 100*time.Millisecond {
		t.Fatal("Summarize sorted its input")
	}
	if (Summarize(nil) != Latency{}) {
		t.Fatal("empty input")
	}
	if got := Percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Fatalf("single sample p99 = %v", got)
	}
}

// The machine's and every process's CPU come from /proc (prometheus/procfs):
// this process is there, under its own name, and the machine has run.
func TestReadCPUFromProc(t *testing.T) {
	busy, total, err := ReadMachineCPU()
	if err != nil || busy <= 0 || total < busy {
		t.Fatalf("busy %v total %v err %v", busy, total, err)
	}
	me, ok := ReadProcTicks()[os.Getpid()]
	if !ok || me.Name != "bench.test" {
		t.Fatalf("this process: %+v (found %v)", me, ok)
	}
	if memTotalGiB() <= 0 {
		t.Fatal("no MemTotal")
	}
}

func TestProcDelta(t *testing.T) {
	a := ProcTicks{1: {"redis-server", 100}, 2: {"go", 50}, 3: {"gone", 10}, 6: {"old", 500},
		7: {"kworker/0:1-events", 900}}
	b := ProcTicks{1: {"redis-server", 350}, 2: {"go", 60}, 4: {"compile", 30}, 5: {"idle", 0},
		6: {"new", 5},                        // pid 6 reused
		7: {"kworker/0:1-mm_percpu_wq", 902}} // renamed kernel worker
	got := ProcDelta(a, b)
	want := []ProcCPU{{"redis-server", 2.5}, {"compile", 0.3}, {"go", 0.1}, {"new", 0.05}, {"kworker/0:1-mm_percpu_wq", 0.02}}
	if len(got) != len(want) {
		t.Fatalf("delta = %+v", got)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Seconds < want[i].Seconds-1e-9 || got[i].Seconds > want[i].Seconds+1e-9 {
			t.Fatalf("delta = %+v, want %+v", got, want)
		}
	}
}

func TestRedisInfoParsers(t *testing.T) {
	cpu, forks, err := RedisCPU(map[string]string{"used_cpu_sys": "12.5", "used_cpu_user": "30.25", "used_cpu_sys_children": "0.5",
		"used_cpu_user_children": "1.25", "used_cpu_sys_main_thread": "10.0"})
	if err != nil || cpu != 42.75 || forks != 1.75 {
		t.Fatalf("cpu %v forks %v err %v", cpu, forks, err)
	}
	if _, _, err := RedisCPU(map[string]string{}); err == nil {
		t.Fatal("missing fields accepted")
	}
	calls, failed := CommandStat("calls=200004,usec=1,usec_per_call=5.0,rejected_calls=1,failed_calls=2")
	if calls != 200004 || failed != 3 {
		t.Fatalf("calls %d failed %d", calls, failed)
	}
}

func TestRatio(t *testing.T) {
	if r := NewRatio("x", 6, 10, ">=", 0.6); !r.Met || r.Value != 0.6 {
		t.Fatalf("%+v", r)
	}
	if r := NewRatio("x", 10, 10, ">", 1); r.Met {
		t.Fatalf("equal is not faster: %+v", r)
	}
	if r := NewRatio("x", 1, 0, ">=", 0.6); r.Met {
		t.Fatalf("zero denominator met: %+v", r)
	}
}

func TestStatusText(t *testing.T) {
	if got := StatusText(map[int]int{409: 3, 202: 200}); got != "202×200 409×3" {
		t.Fatalf("status text %q", got)
	}
}

// The benches load only this machine: every store and broker address, and
// any other the bench names, must be a loopback one.
func TestLoopbackGuard(t *testing.T) {
	cfg := config.Config{RedisAddr: "127.0.0.1:16379", RocketMQNameServers: []string{"127.0.0.1:9876"}}
	if err := loopbackAll(cfg, "SECKILL_TEMPORAL_ADDR", "localhost:7233"); err != nil {
		t.Fatal(err)
	}
	cfg.RocketMQNameServers = append(cfg.RocketMQNameServers, "10.0.0.5:9876")
	if err := loopbackAll(cfg); err == nil || !strings.Contains(err.Error(), "SECKILL_ROCKETMQ_NAMESRV") {
		t.Fatalf("a remote name server: %v", err)
	}
	cfg.RocketMQNameServers = cfg.RocketMQNameServers[:1]
	if err := loopbackAll(cfg, "--broker-addr", "192.168.1.2:10911"); err == nil || !strings.Contains(err.Error(), "--broker-addr") {
		t.Fatalf("a remote broker: %v", err)
	}
}
