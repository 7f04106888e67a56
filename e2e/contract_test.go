package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/testenv"
)

// TestAPIContract runs Schemathesis (e2e/schemathesis) against a real
// gateway and real workers on the stack (a Cluster, without
// failpoints): generated valid and invalid requests to every operation of
// api/openapi.yaml, then invalid ones by the coverage phase's rules, then
// chains that follow the answers' links. Every answer must match the
// document, no valid request may be refused with a 400 and no invalid one
// accepted, nothing may answer 5xx. Afterwards the user's sale, which every
// call was aimed at, must settle with its invariants holding.
//
// SECKILL_SCHEMATHESIS names the tool (make test points it at the one
// scripts/stack.sh up installs); SECKILL_CONTRACT_EXAMPLES the examples per
// operation (100; make contract runs 1000); SECKILL_CONTRACT_SEED the
// generator's seed: a fixed one by default, so that a run in CI tries the
// same cases as the one before it, "random" for a new one each run (make
// contract), or a number to replay the seed a failed run printed.
// defaultContractSeed is the seed of a run that does not name one.
const defaultContractSeed = "20261201"

func TestAPIContract(t *testing.T) {
	st := os.Getenv("SECKILL_SCHEMATHESIS")
	if st == "" {
		t.Skip("SECKILL_SCHEMATHESIS is not set (make test sets it to the Schemathesis that scripts/stack.sh up installs)")
	}
	if _, err := os.Stat(st); err != nil {
		t.Fatalf("SECKILL_SCHEMATHESIS=%s: %v (scripts/stack.sh up installs it)", st, err)
	}
	examples := 100
	if v, err := strconv.Atoi(os.Getenv("SECKILL_CONTRACT_EXAMPLES")); err == nil && v > 0 {
		examples = v
	}
	seed := os.Getenv("SECKILL_CONTRACT_SEED")
	switch seed {
	case "":
		seed = defaultContractSeed
	case "random":
		seed = ""
	}
	cfg := testenv.Require(t)
	if cfg.RedisCluster() {
		t.Skip(ErrRedisCluster)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	bin := filepath.Join(t.TempDir(), "seckill")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/seckill/seckill/cmd/seckill").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	logs := t.TempDir()
	c, err := NewCluster(ctx, ClusterOptions{Bin: bin, Dir: logs, Config: cfg, Log: logger(), Kind: KindContract,
		// One user's token drives every call: the per-user limit would answer
		// most of them 429 (api/edge_test.go covers the limits).
		Env: []string{"SECKILL_RATE_LIMIT_USER=0", "SECKILL_RATE_LIMIT_IP=0", "SECKILL_RATE_LIMIT_READ=0",
			"SECKILL_RATE_LIMIT_CALLBACK=0", "SECKILL_RATE_LIMIT_ADMIN=0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Cleanup(func() {
		if t.Failed() { // the processes' logs go with the temporary directory
			files, _ := filepath.Glob(filepath.Join(logs, "*"))
			for _, f := range files {
				b, _ := os.ReadFile(f)
				t.Logf("---- %s ----\n%s", filepath.Base(f), contractTail(string(b), 40))
			}
		}
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// The user's sale (SKU 1, as Sale judges), reservation and order.
	activity := int64(7_000_000_000) + int64(testenv.RandomUint64()%1_000_000_000)
	const user = 4242
	authn, err := app.Authenticator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	userToken, err := authn.Mint(user, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	contractCall(t, c.APIBase(), http.MethodPost, "/v1/admin/activities", cfg.AdminToken, "", map[string]any{
		"activity_id": activity, "name": "contract", "starts_at": now.Add(-time.Minute), "ends_at": now.Add(time.Hour),
		"payment_timeout_seconds": 20, "order_deadline_seconds": 60,
		"skus": []map[string]any{{"sku_id": 1, "stock": 5, "price_cents": 1000}}}, http.StatusOK)
	queued := contractCall(t, c.APIBase(), http.MethodPost, fmt.Sprintf("/v1/activities/%d/skus/1/reservations", activity),
		userToken, uuid.NewString(), nil, http.StatusAccepted)
	var orderID string
	eventually(t, time.Minute, "the reservation's order", func() error {
		return c.Pool.QueryRow(ctx, `SELECT order_id::text FROM orders WHERE activity_id = $1 AND user_id = $2`, activity, user).Scan(&orderID)
	})
	t.Logf("sale %d, reservation %v, order %s", activity, queued["reservation_id"], orderID)

	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(self), "schemathesis")
	work := t.TempDir() // Schemathesis keeps its cache in the working directory
	report := filepath.Join(work, "report.json")
	cmd := exec.CommandContext(ctx, st, "--config-file", filepath.Join(dir, "schemathesis.toml"), "run",
		c.APIBase()+"/v1/openapi.yaml", "--max-examples", strconv.Itoa(examples), "--report", "json",
		"--report-json-path", report, "--no-color")
	if seed != "" {
		cmd.Args = append(cmd.Args, "--seed", seed)
	}
	cmd.Dir = work
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+dir, "SCHEMATHESIS_HOOKS=hooks",
		"SECKILL_ST_BASE_URL="+c.APIBase(),
		"SECKILL_ST_USER_TOKEN="+userToken,
		"SECKILL_ST_ADMIN_TOKEN="+cfg.AdminToken,
		"SECKILL_ST_ACTIVITY_ID="+strconv.FormatInt(activity, 10),
		"SECKILL_ST_SKU_ID=1",
		"SECKILL_ST_ORDER_ID="+orderID,
		"SECKILL_ST_WEBHOOK_SECRET="+cfg.PaysimSecret)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("schemathesis (%d examples per operation) ran %s", examples, time.Since(start).Round(time.Second))
	if runErr != nil {
		t.Fatalf("schemathesis: %v\n%s", runErr, contractTail(out.String(), 200))
	}
	var rep struct {
		ExitCode   int `json:"exit_code"`
		Operations struct {
			Total, Selected, Tested, Errored, Skipped int
		} `json:"operations"`
		TestCases struct {
			Generated    int `json:"generated"`
			WithFailures int `json:"with_failures"`
		} `json:"test_cases"`
		Failures   []json.RawMessage                    `json:"failures"`
		Errors     []json.RawMessage                    `json:"errors"`
		ValidRates map[string]map[string]map[string]int `json:"valid_rates"`
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report: %v", err)
	}
	o := rep.Operations
	if rep.ExitCode != 0 || o.Total < 8 || o.Tested != o.Total || o.Errored != 0 || o.Skipped != 0 ||
		len(rep.Failures) != 0 || len(rep.Errors) != 0 || rep.TestCases.WithFailures != 0 {
		t.Fatalf("report: exit %d, operations %+v, %d failures, %d errors\n%s", rep.ExitCode, o, len(rep.Failures), len(rep.Errors),
			contractTail(out.String(), 200))
	}
	t.Logf("%d test cases over %d operations", rep.TestCases.Generated, o.Tested)
	// Valid input reached the handlers' real work (an answer other than
	// "unreachable", 404) on every operation that has a fixed target.
	for op, phases := range rep.ValidRates {
		reached := 0
		for _, r := range phases {
			reached += r["accepted"] + r["conflicts"]
		}
		t.Logf("%s: %v", op, phases)
		if reached == 0 && !strings.Contains(op, "{reservation_id}") && !strings.Contains(op, "/payments/callback") {
			t.Errorf("%s: no valid request reached the handler (%v)", op, phases)
		}
	}

	// Whatever the calls did to the user's sale (reserve, pay, cancel), it
	// settles and its invariants hold.
	s := &Sale{ActivityID: activity, Started: start, Codes: map[int]int{http.StatusAccepted: 1}}
	if err := c.AwaitSettled(ctx, s, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, v := range s.Violations {
		t.Errorf("sale %d: %s", activity, v)
	}
	left, err := c.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		t.Errorf("left over: %s", l)
	}
}

// contractCall sends one JSON request and wants one of the statuses.
func contractCall(t *testing.T, base, method, path, token, key string, body any, want int) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %v, want %d", method, path, resp.StatusCode, m, want)
	}
	return m
}

func contractTail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
