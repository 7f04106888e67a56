package temporalx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/seckill/seckill/internal/platform/logx"
)

// The saga's activities run under retry policies without a maximum number of
// attempts (workflows/saga.go dbActivity): an unknown commit outcome, a lease
// held by another worker or PostgreSQL being down must retry until they pass.
// A deterministic failure would retry the same way, silently and forever, and
// block its saga. The interceptor below, installed on every worker NewWorker
// builds, turns the failures that can never pass into non-retryable
// application errors, and makes long retrying visible (metrics, a log line,
// alerts in deploy/prometheus/alerts.yml).

// Application error types of the failures the interceptor makes
// non-retryable; workflows branch on them with errors.As and Type().
const (
	// ErrTypePermanentDatabase: PostgreSQL refused the statement for a reason
	// a retry cannot change (SQLSTATE classes 22, 23 except 23505, 42; a
	// 23505 from UniqueViolationAttempts on).
	ErrTypePermanentDatabase = "PermanentDatabaseError"
	// ErrTypeInvalidInput: the activity refused its input (ErrInvalidInput).
	ErrTypeInvalidInput = "InvalidInput"
)

// DefaultAttemptsAlert is the attempt at which an activity execution counts
// as retrying too long when InterceptorOptions.AttemptsAlert is 0.
const DefaultAttemptsAlert = 10

// Failure classes, the class label of seckill_activity_failures_total.
const (
	// ClassRetryable: the server retries it as the retry policy says.
	ClassRetryable = "retryable"
	// ClassPermanent: non-retryable; the workflow gets the error now.
	ClassPermanent = "permanent"
)

// ErrInvalidInput is what an activity returns (wrapped, or through
// InvalidInputError) for input it validated and refuses: no retry can make
// such input acceptable, so the interceptor fails the activity at once with
// an application error of type ErrTypeInvalidInput instead of retrying it
// forever. Return it only for the input itself, never for state read from a
// store (that may change) nor for infrastructure errors.
var ErrInvalidInput = errors.New("invalid input")

// InvalidInputError is an ErrInvalidInput that names the refused field and
// why; errors.Is(err, ErrInvalidInput) holds for it. Keep Reason free of
// personal data: it reaches logs and the workflow history.
type InvalidInputError struct {
	Field  string // the input field, e.g. "sku_id"
	Reason string // e.g. "must be positive, got -1"
}

// Error says which field was refused and why.
func (e *InvalidInputError) Error() string {
	return fmt.Sprintf("invalid input: %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidInput) true.
func (e *InvalidInputError) Is(target error) bool { return target == ErrInvalidInput }

// Classify returns the class of an activity's err (ClassRetryable or
// ClassPermanent) and the error the worker reports for it:
//   - an error that is a *temporal.ApplicationError is returned as it is,
//     permanent when it is non-retryable;
//   - an ErrInvalidInput becomes a non-retryable ErrTypeInvalidInput;
//   - a *pgconn.PgError of SQLSTATE class 22 (data exception, e.g. 22001
//     value too long), 23 except 23505 (check, not-null, foreign-key,
//     exclusion violation) or 42 except 42501 (syntax error, undefined
//     column or table: a bug) becomes a non-retryable
//     ErrTypePermanentDatabase carrying the SQLSTATE as its detail;
//   - everything else (unique violations, serialization failures,
//     connection and context errors, unknown commit outcomes, leases held
//     elsewhere) is returned unchanged and retries.
//
// 23505 stays retryable because the activities resolve unique conflicts by
// re-reading (ON CONFLICT, inbox); 42501 (insufficient privilege) because an
// operator's GRANT fixes it without a new release.
//
// A 23505 that keeps coming back is not a race the next read resolves but a
// constraint the activity does not expect (a row that will not go away):
// ClassifyAttempt makes it permanent from UniqueViolationAttempts on, so no
// unexpected constraint violation retries forever.
//
// Only the returned error itself counts as an ApplicationError: the SDK
// reports a wrapped one (fmt.Errorf("...: %w", appErr)) as a retryable
// failure whatever the inner error says, so such a chain is classified like
// any other.
func Classify(err error) (class string, out error) {
	if err == nil {
		return "", nil
	}
	if appErr, ok := err.(*temporal.ApplicationError); ok {
		if appErr.NonRetryable() {
			return ClassPermanent, err
		}
		return ClassRetryable, err
	}
	if errors.Is(err, ErrInvalidInput) {
		return ClassPermanent, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidInput, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && permanentSQLState(pgErr.Code) {
		return ClassPermanent, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypePermanentDatabase, err, pgErr.Code)
	}
	return ClassRetryable, err
}

// UniqueViolationAttempts is the attempt from which a unique violation
// (23505) is permanent: the conflicts the activities expect are resolved by
// re-reading within the first attempts (ON CONFLICT, the inbox); one still
// there after 0.5+1+2+4 s of backoff (dbRetry) is a constraint no retry
// satisfies.
const UniqueViolationAttempts = 5

// ClassifyAttempt is Classify for the attempt-th attempt of an activity: a
// unique violation is retryable before UniqueViolationAttempts and a
// non-retryable ErrTypePermanentDatabase (detail 23505) from it on.
func ClassifyAttempt(err error, attempt int32) (class string, out error) {
	class, out = Classify(err)
	var pgErr *pgconn.PgError
	if class == ClassRetryable && attempt >= UniqueViolationAttempts && errors.As(err, &pgErr) && pgErr.Code == "23505" {
		if _, isApp := err.(*temporal.ApplicationError); !isApp {
			return ClassPermanent, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypePermanentDatabase, err, pgErr.Code)
		}
	}
	return class, out
}

// permanentSQLState reports whether a statement that failed with code fails
// again however often it is retried.
func permanentSQLState(code string) bool {
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "22":
		return true
	case "23":
		return code != "23505"
	case "42":
		return code != "42501"
	}
	return false
}

// InterceptorOptions configure the activity interceptor of a worker
// (NewActivityInterceptor, NewWorker).
type InterceptorOptions struct {
	// Registerer receives the interceptor's metrics (required). Several
	// workers may share one: the second finds the metrics registered and
	// uses them.
	Registerer prometheus.Registerer
	// AttemptsAlert is the attempt at which an execution counts as retrying
	// too long (SECKILL_ACTIVITY_ATTEMPTS_ALERT); 0 means
	// DefaultAttemptsAlert.
	AttemptsAlert int
	// Logger receives activity.attempts_exceeded and
	// activity.permanent_failure; nil means slog.Default().
	Logger *slog.Logger
}

// ActivityInterceptor is the worker interceptor NewWorker installs: for
// every activity execution it observes the attempt number, counts and logs
// an execution that reaches the alert attempt, and classifies the returned
// error with Classify.
//
// Metrics (label activity is the activity type, e.g. CreateOrder):
//   - seckill_activity_attempt{activity}: histogram of attempt numbers;
//   - seckill_activity_attempts_exceeded_total{activity}: executions that
//     reached the alert attempt (once each, when attempt == AttemptsAlert);
//   - seckill_activity_failures_total{activity,class}: failed attempts by
//     class (retryable, permanent).
//
// An attempt the server times out (start-to-close) returns nothing to the
// interceptor: it is not counted as a failure and shows only as the next
// attempt's number.
type ActivityInterceptor struct {
	interceptor.WorkerInterceptorBase

	alertAt  int32
	log      *slog.Logger
	attempt  *prometheus.HistogramVec
	exceeded *prometheus.CounterVec
	failures *prometheus.CounterVec
	previous *failureMemo
}

var _ interceptor.WorkerInterceptor = (*ActivityInterceptor)(nil)

// NewActivityInterceptor registers the interceptor's metrics on
// o.Registerer and returns the interceptor.
func NewActivityInterceptor(o InterceptorOptions) (*ActivityInterceptor, error) {
	if o.Registerer == nil {
		return nil, errors.New("temporalx: the activity interceptor needs a prometheus.Registerer")
	}
	if o.AttemptsAlert < 0 || o.AttemptsAlert > 1<<30 {
		return nil, fmt.Errorf("temporalx: attempts alert %d out of range", o.AttemptsAlert)
	}
	if o.AttemptsAlert == 0 {
		o.AttemptsAlert = DefaultAttemptsAlert
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := &ActivityInterceptor{alertAt: int32(o.AttemptsAlert), log: o.Logger, previous: newFailureMemo()}
	var err error
	if a.attempt, err = registerOrReuse(o.Registerer, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "seckill_activity_attempt",
		Help:    "Attempt number of each activity execution attempt, by activity type (1 = first try).",
		Buckets: []float64{1, 2, 3, 5, 10, 20, 50},
	}, []string{"activity"})); err != nil {
		return nil, err
	}
	if a.exceeded, err = registerOrReuse(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_activity_attempts_exceeded_total",
		Help: "Activity executions that reached SECKILL_ACTIVITY_ATTEMPTS_ALERT attempts (counted once each).",
	}, []string{"activity"})); err != nil {
		return nil, err
	}
	if a.failures, err = registerOrReuse(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_activity_failures_total",
		Help: "Failed activity attempts by activity type and class (retryable: retried by policy; permanent: non-retryable, the workflow sees it).",
	}, []string{"activity", "class"})); err != nil {
		return nil, err
	}
	return a, nil
}

// registerOrReuse registers c on reg, or returns the equal collector
// registered before (a second worker in the same process).
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("temporalx: register activity metrics: %w", err)
}

// InterceptActivity wraps each activity execution.
func (a *ActivityInterceptor) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &activityInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, a: a}
}

type activityInbound struct {
	interceptor.ActivityInboundInterceptorBase
	a *ActivityInterceptor
}

// ExecuteActivity observes the attempt, runs the activity and classifies its
// error. Arguments and results are never logged (they carry user data).
func (i *activityInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	a := i.a
	info := activity.GetInfo(ctx)
	typ := info.ActivityType.Name
	key := executionKey(info)
	a.attempt.WithLabelValues(typ).Observe(float64(info.Attempt))
	// Counted when the attempt starts, so a hanging attempt or a worker
	// crash during it cannot hide the execution from the alert.
	if info.Attempt == a.alertAt {
		a.exceeded.WithLabelValues(typ).Inc()
		prev, ok := a.previous.take(key)
		if !ok {
			prev = "not seen by this worker"
		}
		a.log.Error("activity.attempts_exceeded", "activity", typ, "workflow_id", info.WorkflowExecution.ID,
			"run_id", info.WorkflowExecution.RunID, "activity_id", info.ActivityID, "attempt", info.Attempt,
			"threshold", a.alertAt, "previous_failure", prev)
	}

	// Every line the activity's stores log with ctx names the saga step.
	ctx = logx.With(ctx, slog.String("workflow_id", info.WorkflowExecution.ID), slog.String("run_id", info.WorkflowExecution.RunID),
		slog.String("activity", typ), slog.Int("attempt", int(info.Attempt)))
	res, err := i.Next.ExecuteActivity(ctx, in)
	if err == nil {
		return res, nil
	}
	class, out := ClassifyAttempt(err, info.Attempt)
	a.failures.WithLabelValues(typ, class).Inc()
	switch {
	case class == ClassPermanent:
		errType := ""
		if appErr, ok := out.(*temporal.ApplicationError); ok {
			errType = appErr.Type()
		}
		a.log.Error("activity.permanent_failure", "activity", typ, "workflow_id", info.WorkflowExecution.ID,
			"run_id", info.WorkflowExecution.RunID, "activity_id", info.ActivityID, "attempt", info.Attempt,
			"type", errType, "err", summarize(err))
	case info.Attempt == a.alertAt-1:
		a.previous.put(key, fmt.Sprintf("attempt %d: %s", info.Attempt, summarize(err)))
	}
	return res, out
}

// executionKey names one activity execution across its attempts.
func executionKey(info activity.Info) string {
	if info.WorkflowExecution.RunID != "" {
		return info.WorkflowExecution.RunID + "/" + info.ActivityID
	}
	return info.ActivityRunID + "/" + info.ActivityID
}

// maxErrorText bounds the error text of a log line.
const maxErrorText = 512

// summarize is err's text cut to maxErrorText bytes. A *pgconn.PgError's
// text is severity, message and SQLSTATE: its Detail (which quotes row
// values) is not part of it.
func summarize(err error) string {
	s := err.Error()
	if len(s) > maxErrorText {
		s = s[:maxErrorText] + "…"
	}
	return s
}

// Bounds of failureMemo: an entry lives until the next attempt claims it,
// which the retry policy's maximum interval (1 min for dbActivity) makes
// quick; entries no attempt claims (it ran on another worker, the workflow
// was terminated) are dropped after failureMemoTTL.
const (
	failureMemoMax = 1024
	failureMemoTTL = 30 * time.Minute
)

// failureMemo keeps the failure of the attempt just before the alert attempt
// of each execution, so activity.attempts_exceeded can say what kept
// failing: the SDK tells an activity its attempt number but not the previous
// attempt's failure. Only executions at that one attempt are kept, so it
// stays small.
type failureMemo struct {
	mu sync.Mutex
	m  map[string]memoEntry
}

type memoEntry struct {
	text string
	at   time.Time
}

func newFailureMemo() *failureMemo { return &failureMemo{m: map[string]memoEntry{}} }

func (f *failureMemo) put(key, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if len(f.m) >= failureMemoMax {
		for k, e := range f.m {
			if now.Sub(e.at) > failureMemoTTL {
				delete(f.m, k)
			}
		}
		if len(f.m) >= failureMemoMax {
			return // the log line says "not seen by this worker" instead
		}
	}
	f.m[key] = memoEntry{text: text, at: now}
}

func (f *failureMemo) take(key string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.m[key]
	delete(f.m, key)
	return e.text, ok
}
