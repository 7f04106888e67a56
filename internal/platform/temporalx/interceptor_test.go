package temporalx

import (
	"bytes"
	"encoding/json"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/seckill/seckill/internal/platform/logx"
)

// connectError is what pgx really returns when PostgreSQL cannot be
// reached (port 1 on loopback refuses at once).
func connectError(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil {
		conn.Close(ctx)
		t.Fatal("connected to 127.0.0.1:1")
	}
	return fmt.Errorf("open pool: %w", err)
}

func pgErr(code, msg string) error {
	// Detail quotes row values; it must not reach messages or logs.
	return &pgconn.PgError{Severity: "ERROR", Code: code, Message: msg, Detail: "Failing row contains (secret-value)."}
}

func TestClassify(t *testing.T) {
	retryableApp := temporal.NewApplicationError("lease held", "LeaseHeld")
	businessApp := temporal.NewNonRetryableApplicationError("sold out", "SoldOut", nil)
	cases := []struct {
		name      string
		err       error
		class     string
		unchanged bool   // the very error comes back
		errType   string // else: the ApplicationError's type
		sqlstate  string // and the PgError still in its chain
	}{
		{"22001 value too long", fmt.Errorf("insert order: %w", pgErr("22001", "value too long for type character varying(64)")),
			ClassPermanent, false, ErrTypePermanentDatabase, "22001"},
		{"23514 check violation", fmt.Errorf("update stock: %w", pgErr("23514", `new row violates check constraint "available_nonnegative"`)),
			ClassPermanent, false, ErrTypePermanentDatabase, "23514"},
		{"23503 foreign key violation", pgErr("23503", "insert violates foreign key constraint"),
			ClassPermanent, false, ErrTypePermanentDatabase, "23503"},
		{"23505 unique violation retries", fmt.Errorf("insert inbox: %w", pgErr("23505", "duplicate key value")),
			ClassRetryable, true, "", ""},
		{"42703 undefined column", fmt.Errorf("select: %w", pgErr("42703", `column "nope" does not exist`)),
			ClassPermanent, false, ErrTypePermanentDatabase, "42703"},
		{"42501 insufficient privilege retries", pgErr("42501", "permission denied for table orders"),
			ClassRetryable, true, "", ""},
		{"40001 serialization failure retries", fmt.Errorf("commit: %w", pgErr("40001", "could not serialize access")),
			ClassRetryable, true, "", ""},
		{"connection error retries", connectError(t), ClassRetryable, true, "", ""},
		{"context canceled retries", fmt.Errorf("query: %w", context.Canceled), ClassRetryable, true, "", ""},
		{"deadline exceeded retries", context.DeadlineExceeded, ClassRetryable, true, "", ""},
		{"plain error retries", errors.New("commit outcome unknown"), ClassRetryable, true, "", ""},
		{"ErrInvalidInput wrapped", fmt.Errorf("create order for sku 7: %w", ErrInvalidInput),
			ClassPermanent, false, ErrTypeInvalidInput, ""},
		{"InvalidInputError wrapped", fmt.Errorf("apply repair: %w", &InvalidInputError{Field: "action", Reason: `unknown action "explode"`}),
			ClassPermanent, false, ErrTypeInvalidInput, ""},
		{"retryable ApplicationError kept", retryableApp, ClassRetryable, true, "", ""},
		{"non-retryable ApplicationError kept", businessApp, ClassPermanent, true, "", ""},
		// The SDK reports a wrapped ApplicationError as a retryable failure.
		{"wrapped ApplicationError is not one", fmt.Errorf("compensate: %w", businessApp), ClassRetryable, true, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			class, out := Classify(c.err)
			if class != c.class {
				t.Errorf("class = %q, want %q", class, c.class)
			}
			if c.unchanged {
				if out != c.err {
					t.Fatalf("error changed: %v (%T), want %v unchanged", out, out, c.err)
				}
				return
			}
			appErr, ok := out.(*temporal.ApplicationError)
			if !ok {
				t.Fatalf("got %T %v, want *temporal.ApplicationError", out, out)
			}
			if appErr.Type() != c.errType || !appErr.NonRetryable() {
				t.Errorf("type %q non-retryable %v, want %q non-retryable", appErr.Type(), appErr.NonRetryable(), c.errType)
			}
			if !errors.Is(out, c.err) {
				t.Errorf("cause %v not kept in %v", c.err, out)
			}
			if strings.Contains(appErr.Error(), "secret-value") {
				t.Errorf("message %q carries the PgError's Detail", appErr.Error())
			}
			if c.sqlstate != "" {
				var pe *pgconn.PgError
				if !errors.As(out, &pe) || pe.Code != c.sqlstate {
					t.Errorf("PgError %s not in the chain of %v", c.sqlstate, out)
				}
				var code string
				if err := appErr.Details(&code); err != nil || code != c.sqlstate {
					t.Errorf("details = %q (%v), want the SQLSTATE %s", code, err, c.sqlstate)
				}
			}
		})
	}
	if class, out := Classify(nil); class != "" || out != nil {
		t.Errorf("Classify(nil) = %q, %v", class, out)
	}
}

func TestInvalidInputError(t *testing.T) {
	err := fmt.Errorf("apply repair: %w", &InvalidInputError{Field: "operator", Reason: "empty"})
	if !errors.Is(err, ErrInvalidInput) {
		t.Fatal("InvalidInputError is not ErrInvalidInput")
	}
	if got, want := err.Error(), "apply repair: invalid input: operator: empty"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

// recorder is a slog.Handler that keeps every record.
type recorder struct {
	mu   sync.Mutex
	recs []map[string]string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	m := map[string]string{"msg": rec.Message, "level": rec.Level.String()}
	rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	r.mu.Lock()
	r.recs = append(r.recs, m)
	r.mu.Unlock()
	return nil
}

func (r *recorder) find(msg string) []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, m := range r.recs {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// counter reads one series of a counter vector from reg (0 if absent).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	if m := series(t, reg, name, labels); m != nil {
		return m.GetCounter().GetValue()
	}
	return 0
}

// histogram reads one series of a histogram vector: sample count and sum.
func histogram(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	if m := series(t, reg, name, labels); m != nil {
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	return 0, 0
}

func series(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// retryForeverInput is the retry policy of retryForever: the test suite
// runs it with dbActivity's intervals, the dev-server test with short ones.
type retryForeverInput struct {
	Initial, Max time.Duration
}

const (
	retryForeverName = "InterceptorRetryForever"
	flakyName        = "Flaky"
)

// retryForever runs the Flaky activity under a retry policy without a
// maximum number of attempts (as workflows/saga.go's dbActivity does) and
// returns the attempt that succeeded.
func retryForever(ctx workflow.Context, in retryForeverInput) (int32, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    in.Initial,
			BackoffCoefficient: 2,
			MaximumInterval:    in.Max,
		},
	})
	var attempt int32
	err := workflow.ExecuteActivity(ctx, flakyName).Get(ctx, &attempt)
	return attempt, err
}

// flaky returns an activity that fails its first len(errs) attempts with
// errs[attempt-1], then returns its attempt; calls counts the executions.
func flaky(calls *atomic.Int32, errs ...error) func(context.Context) (int32, error) {
	return func(ctx context.Context) (int32, error) {
		calls.Add(1)
		n := activity.GetInfo(ctx).Attempt
		if int(n) <= len(errs) {
			return 0, errs[n-1]
		}
		return n, nil
	}
}

// runSuite runs retryForever in the SDK's test environment (time skipping:
// the backoff takes no wall time) on a worker with the interceptor.
func runSuite(t *testing.T, ai *ActivityInterceptor, act func(context.Context) (int32, error)) (int32, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{ai}})
	env.RegisterWorkflowWithOptions(retryForever, workflow.RegisterOptions{Name: retryForeverName})
	env.RegisterActivityWithOptions(act, activity.RegisterOptions{Name: flakyName})
	env.ExecuteWorkflow(retryForeverName, retryForeverInput{Initial: 500 * time.Millisecond, Max: time.Minute})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return 0, err
	}
	var got int32
	if err := env.GetWorkflowResult(&got); err != nil {
		t.Fatal(err)
	}
	return got, nil
}

func newTestInterceptor(t *testing.T, alertAt int) (*ActivityInterceptor, *prometheus.Registry, *recorder) {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	ai, err := NewActivityInterceptor(InterceptorOptions{Registerer: reg, AttemptsAlert: alertAt, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	return ai, reg, rec
}

var flakyLabel = map[string]string{"activity": flakyName}

func TestPermanentDatabaseErrorFailsAfterOneAttempt(t *testing.T) {
	ai, reg, rec := newTestInterceptor(t, 3)
	var calls atomic.Int32
	tooLong := pgErr("22001", "value too long for type character varying(64)")
	_, err := runSuite(t, ai, flaky(&calls, tooLong, tooLong, tooLong, tooLong))
	assertPermanentFailure(t, err, calls.Load(), reg)
	logs := rec.find("activity.permanent_failure")
	if len(logs) != 1 || logs[0]["type"] != ErrTypePermanentDatabase || logs[0]["activity"] != flakyName ||
		!strings.Contains(logs[0]["err"], "22001") || strings.Contains(logs[0]["err"], "secret-value") {
		t.Errorf("permanent failure logs = %v", logs)
	}
}

// assertPermanentFailure checks a workflow error from Flaky failing with
// 22001 under an unlimited retry policy: one attempt, a non-retryable
// PermanentDatabaseError, and the metrics saying so.
func assertPermanentFailure(t *testing.T, err error, calls int32, reg *prometheus.Registry) {
	t.Helper()
	if err == nil {
		t.Fatal("workflow succeeded, want it failed by the 22001")
	}
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("workflow error %v has no ApplicationError", err)
	}
	if appErr.Type() != ErrTypePermanentDatabase || !appErr.NonRetryable() {
		t.Errorf("ApplicationError type %q non-retryable %v, want %s non-retryable", appErr.Type(), appErr.NonRetryable(), ErrTypePermanentDatabase)
	}
	var code string
	if err := appErr.Details(&code); err != nil || code != "22001" {
		t.Errorf("details = %q (%v), want 22001", code, err)
	}
	if calls != 1 {
		t.Errorf("activity ran %d times, want 1", calls)
	}
	if n, sum := histogram(t, reg, "seckill_activity_attempt", flakyLabel); n != 1 || sum != 1 {
		t.Errorf("seckill_activity_attempt count %d sum %v, want one observation of 1", n, sum)
	}
	if v := counter(t, reg, "seckill_activity_failures_total", map[string]string{"activity": flakyName, "class": ClassPermanent}); v != 1 {
		t.Errorf("failures{class=permanent} = %v, want 1", v)
	}
	if v := counter(t, reg, "seckill_activity_failures_total", map[string]string{"activity": flakyName, "class": ClassRetryable}); v != 0 {
		t.Errorf("failures{class=retryable} = %v, want 0", v)
	}
	if v := counter(t, reg, "seckill_activity_attempts_exceeded_total", flakyLabel); v != 0 {
		t.Errorf("attempts exceeded = %v, want 0", v)
	}
}

func TestInvalidInputFailsAfterOneAttempt(t *testing.T) {
	ai, reg, _ := newTestInterceptor(t, 3)
	var calls atomic.Int32
	bad := fmt.Errorf("create order: %w", &InvalidInputError{Field: "sku_id", Reason: "must be positive, got 0"})
	_, err := runSuite(t, ai, flaky(&calls, bad, bad))
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrTypeInvalidInput || !appErr.NonRetryable() {
		t.Fatalf("workflow error = %v, want a non-retryable %s", err, ErrTypeInvalidInput)
	}
	if calls.Load() != 1 {
		t.Errorf("activity ran %d times, want 1", calls.Load())
	}
	if v := counter(t, reg, "seckill_activity_failures_total", map[string]string{"activity": flakyName, "class": ClassPermanent}); v != 1 {
		t.Errorf("failures{class=permanent} = %v, want 1", v)
	}
}

func TestRetryableErrorRetriesAndCrossesTheThresholdOnce(t *testing.T) {
	ai, reg, rec := newTestInterceptor(t, 3)
	var calls atomic.Int32
	serial := fmt.Errorf("commit: %w", pgErr("40001", "could not serialize access"))
	got, err := runSuite(t, ai, flaky(&calls, serial, serial, serial, serial))
	if err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	assertRetriedPastThreshold(t, got, calls.Load(), reg, 4)
	logs := rec.find("activity.attempts_exceeded")
	if len(logs) != 1 {
		t.Fatalf("attempts_exceeded logged %d times, want once: %v", len(logs), logs)
	}
	l := logs[0]
	if l["level"] != "ERROR" || l["activity"] != flakyName || l["attempt"] != "3" || l["workflow_id"] == "" {
		t.Errorf("attempts_exceeded log = %v", l)
	}
	if p := l["previous_failure"]; !strings.Contains(p, "attempt 2") || !strings.Contains(p, "40001") || strings.Contains(p, "secret-value") {
		t.Errorf("previous_failure = %q, want attempt 2's 40001 without its Detail", p)
	}
}

// assertRetriedPastThreshold checks Flaky failing fails times retryably and
// then succeeding, with the alert threshold at 3.
func assertRetriedPastThreshold(t *testing.T, got, calls int32, reg *prometheus.Registry, fails int32) {
	t.Helper()
	if got != fails+1 || calls != fails+1 {
		t.Errorf("succeeded at attempt %d after %d runs, want %d", got, calls, fails+1)
	}
	wantSum := float64((fails + 1) * (fails + 2) / 2) // 1+2+...+(fails+1)
	if n, sum := histogram(t, reg, "seckill_activity_attempt", flakyLabel); n != uint64(fails+1) || sum != wantSum {
		t.Errorf("seckill_activity_attempt count %d sum %v, want %d and %v", n, sum, fails+1, wantSum)
	}
	if v := counter(t, reg, "seckill_activity_attempts_exceeded_total", flakyLabel); v != 1 {
		t.Errorf("attempts exceeded = %v, want 1 (once per execution)", v)
	}
	if v := counter(t, reg, "seckill_activity_failures_total", map[string]string{"activity": flakyName, "class": ClassRetryable}); v != float64(fails) {
		t.Errorf("failures{class=retryable} = %v, want %d", v, fails)
	}
	if v := counter(t, reg, "seckill_activity_failures_total", map[string]string{"activity": flakyName, "class": ClassPermanent}); v != 0 {
		t.Errorf("failures{class=permanent} = %v, want 0", v)
	}
}

func TestBelowThresholdIsNotExceeded(t *testing.T) {
	ai, reg, rec := newTestInterceptor(t, 0) // DefaultAttemptsAlert
	var calls atomic.Int32
	down := connectError(t)
	errs := make([]error, DefaultAttemptsAlert-2)
	for i := range errs {
		errs[i] = down
	}
	if _, err := runSuite(t, ai, flaky(&calls, errs...)); err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	if v := counter(t, reg, "seckill_activity_attempts_exceeded_total", flakyLabel); v != 0 {
		t.Errorf("attempts exceeded = %v after %d attempts, want 0 below %d", v, calls.Load(), DefaultAttemptsAlert)
	}
	if n, _ := histogram(t, reg, "seckill_activity_attempt", flakyLabel); n != uint64(DefaultAttemptsAlert-1) {
		t.Errorf("attempts observed %d, want %d", n, DefaultAttemptsAlert-1)
	}
	if logs := rec.find("activity.attempts_exceeded"); len(logs) != 0 {
		t.Errorf("attempts_exceeded logged: %v", logs)
	}
}

func TestNewActivityInterceptor(t *testing.T) {
	if _, err := NewActivityInterceptor(InterceptorOptions{}); err == nil {
		t.Error("no Registerer accepted")
	}
	if _, err := NewActivityInterceptor(InterceptorOptions{Registerer: prometheus.NewRegistry(), AttemptsAlert: -1}); err == nil {
		t.Error("negative AttemptsAlert accepted")
	}

	// Two workers in one process share the metrics of one registry.
	reg := prometheus.NewRegistry()
	a, err := NewActivityInterceptor(InterceptorOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewActivityInterceptor(InterceptorOptions{Registerer: reg})
	if err != nil {
		t.Fatalf("second interceptor on the same registry: %v", err)
	}
	a.exceeded.WithLabelValues("X").Inc()
	b.exceeded.WithLabelValues("X").Inc()
	if v := testutil.ToFloat64(a.exceeded.WithLabelValues("X")); v != 2 {
		t.Errorf("shared counter = %v, want 2", v)
	}
	if a.alertAt != DefaultAttemptsAlert {
		t.Errorf("alert at %d, want the default %d", a.alertAt, DefaultAttemptsAlert)
	}

	// Another metric under one of its names is a conflict, not a reuse.
	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_activity_failures_total", Help: "other"}))
	if _, err := NewActivityInterceptor(InterceptorOptions{Registerer: clash}); err == nil {
		t.Error("conflicting registration accepted")
	}
}

func TestFailureMemoIsBounded(t *testing.T) {
	f := newFailureMemo()
	for i := range failureMemoMax + 10 {
		f.put(fmt.Sprint(i), "x")
	}
	if len(f.m) != failureMemoMax {
		t.Fatalf("memo holds %d entries, want at most %d", len(f.m), failureMemoMax)
	}
	if _, ok := f.take("0"); !ok {
		t.Error("entry 0 lost")
	}
	if _, ok := f.take("0"); ok {
		t.Error("entry 0 taken twice")
	}
	f.put("again", "x") // full again
	// Stale entries make room.
	for k, e := range f.m {
		e.at = e.at.Add(-2 * failureMemoTTL)
		f.m[k] = e
	}
	f.put("fresh", "y")
	if got, ok := f.take("fresh"); !ok || got != "y" {
		t.Errorf("fresh entry = %q, %v", got, ok)
	}
	if len(f.m) != 0 {
		t.Errorf("%d stale entries kept", len(f.m))
	}
}

// An activity's own log lines, written with its context through a logx
// logger, carry the saga step they belong to: workflow id, run id, activity
// type and attempt.
func TestActivityLogLinesNameWorkflowRunAndAttempt(t *testing.T) {
	ai, _, _ := newTestInterceptor(t, 10)
	var buf bytes.Buffer
	log := logx.New(&buf, "info")
	var calls atomic.Int32
	act := func(ctx context.Context) (int32, error) {
		log.InfoContext(ctx, "store.step")
		return flaky(&calls, errors.New("transient"))(ctx)
	}
	if _, err := runSuite(t, ai, act); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("got %d log lines, want one per attempt: %v", len(lines), lines)
	}
	for i, l := range lines {
		if l["workflow_id"] == "" || l["workflow_id"] == nil || l["run_id"] == nil || l["activity"] != flakyName || l["attempt"] != float64(i+1) {
			t.Errorf("line %d = %v, want workflow_id, run_id, activity %s, attempt %d", i, l, flakyName, i+1)
		}
	}
}

// A unique violation may be a race the next attempt's read resolves, but one
// that is still there at UniqueViolationAttempts is a constraint no retry
// satisfies: it fails the activity for good instead of retrying forever.
func TestUniqueViolationIsPermanentFromItsBoundOn(t *testing.T) {
	ai, reg, rec := newTestInterceptor(t, 100)
	var calls atomic.Int32
	dup := fmt.Errorf("order transaction: %w", pgErr("23505", `duplicate key value violates unique constraint "x"`))
	errs := make([]error, 20)
	for i := range errs {
		errs[i] = dup
	}
	_, err := runSuite(t, ai, flaky(&calls, errs...))
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrTypePermanentDatabase || !appErr.NonRetryable() {
		t.Fatalf("workflow error = %v, want a non-retryable %s", err, ErrTypePermanentDatabase)
	}
	var code string
	if err := appErr.Details(&code); err != nil || code != "23505" {
		t.Errorf("details = %q (%v), want 23505", code, err)
	}
	if calls.Load() != UniqueViolationAttempts {
		t.Errorf("activity ran %d times, want %d", calls.Load(), UniqueViolationAttempts)
	}
	if v := counter(t, reg, "seckill_activity_failures_total", map[string]string{"activity": flakyName, "class": ClassRetryable}); v != UniqueViolationAttempts-1 {
		t.Errorf("failures{class=retryable} = %v, want %d", v, UniqueViolationAttempts-1)
	}
	if logs := rec.find("activity.permanent_failure"); len(logs) != 1 || !strings.Contains(logs[0]["err"], "23505") {
		t.Errorf("permanent failure logs = %v", logs)
	}
	// Before the bound, the same error retries.
	if class, out := ClassifyAttempt(dup, UniqueViolationAttempts-1); class != ClassRetryable || out != dup {
		t.Errorf("ClassifyAttempt(23505, %d) = %s %v, want retryable and unchanged", UniqueViolationAttempts-1, class, out)
	}
}
