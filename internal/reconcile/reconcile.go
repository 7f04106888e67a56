// Package reconcile is the last safety net (docs/spec.md#reconciliation):
// per (activity, sku) it checks stock conservation in PostgreSQL and Redis
// and their cross-system relation, walks reservations older than a
// watermark, classifies every anomaly, and repairs only on clear evidence,
// through the standard state machine (the same store transitions the saga's activities run).
// Each repair is a repair_task row with a fixed repair_id, so a rerun, or two
// runs at once, repair nothing twice. Everything else is left MANUAL with its
// evidence. A run's report is stored in reconcile_report.
package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/invariants"
	"github.com/seckill/seckill/internal/inventory"
	"github.com/seckill/seckill/internal/outbox"
	"github.com/seckill/seckill/internal/payments"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/internal/platform/skuloop"
	"github.com/seckill/seckill/internal/repairs"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

// Anomaly types and what reconciliation does about them.
const (
	PGInvariant        = "PG_INVARIANT_BROKEN"           // MANUAL
	RedisInvariant     = "REDIS_INVARIANT_BROKEN"        // MANUAL (rebuild Redis from PostgreSQL)
	CrossSystemDelta   = "CROSS_SYSTEM_DELTA"            // MANUAL
	ProjectionBehind   = "ORDER_PROJECTION_BEHIND"       // AUTO: rebuild the Redis projection, no stock change
	CompensationStall  = "COMPENSATION_STALLED"          // AUTO: the standard compensation
	DeadlinePassed     = "RESERVED_PAST_DEADLINE"        // AUTO: durable rejection, then compensation
	PaidButCompensated = "PAID_BUT_REDIS_COMPENSATED"    // MANUAL, critical
	CompensatedDiffers = "COMPENSATED_BUT_REDIS_DIFFERS" // MANUAL
	OutboxLeaseExpired = "OUTBOX_LEASE_EXPIRED"          // AUTO: back to RETRY for the relay
	UnsentPastDeadline = "UNSENT_PAST_DEADLINE"          // AUTO: Redis-only reservation past its deadline: durable rejection, then compensation
	ReleaseMissing     = "CANCELLED_BUT_REDIS_HELD"      // AUTO: the standard Redis release of a cancelled order
	LostSaga           = "LOST_SAGA"                     // AUTO: open order past expiry, no saga running: resume it
	RefundOwed         = "PAYMENT_ON_CANCELLED_ORDER"    // AUTO: refund obligation made due for the refund relay
	ProviderUnsettled  = "PROVIDER_TRANSACTION_OPEN"     // AUTO: ask the provider; a payment it reports is recorded
)

// Actions taken on an anomaly.
const (
	ActionRepaired = "AUTO_REPAIRED"
	ActionManual   = "MANUAL"
	// ActionAlreadyRecorded: the same repair_id exists (an earlier or
	// concurrent run): nothing done now.
	ActionAlreadyRecorded = "ALREADY_RECORDED"
	ActionRepairFailed    = "REPAIR_FAILED"
	// ActionLeft: looked at and left as it is (e.g. its saga is running).
	ActionLeft = "LEFT"
)

// Anomaly is one finding.
type Anomaly struct {
	Type     string         `json:"type"`
	Object   string         `json:"object"`
	Action   string         `json:"action"`
	RepairID string         `json:"repair_id"`
	Detail   string         `json:"detail,omitempty"`
	Evidence map[string]any `json:"evidence,omitempty"`
}

// Report is one run.
type Report struct {
	ReportID   uuid.UUID      `json:"report_id"`
	ActivityID int64          `json:"activity_id,omitempty"`
	Watermark  time.Time      `json:"watermark"`
	StartedAt  time.Time      `json:"started_at"`
	FinishedAt time.Time      `json:"finished_at"`
	SKUs       int            `json:"skus"`
	Checked    int            `json:"reservations_checked"`
	Summary    map[string]int `json:"summary"`
	Anomalies  []Anomaly      `json:"anomalies"`
}

// Reconciler runs reconciliation.
type Reconciler struct {
	pool      *pgxpool.Pool
	rdb       redis.Cmdable
	stores    Stores
	m         *metrics.Reconcile
	log       *slog.Logger
	watermark time.Duration
	now       func() time.Time
	sagas     Sagas
}

// Sagas is what reconciliation needs of Temporal: whether a reservation's
// saga runs, resuming one that is gone, and telling one that its order was
// paid.
type Sagas interface {
	// Running reports whether the reservation's saga runs, and the run id
	// of its latest run ("" when it never ran).
	Running(ctx context.Context, reservationID uuid.UUID) (running bool, runID string, err error)
	// Resume starts a new run that carries on from PostgreSQL (SagaInput.Resume).
	Resume(ctx context.Context, m events.OrderCreateRequested) error
	// NotifyPaid signals the saga that its order was paid (a hint).
	NotifyPaid(ctx context.Context, reservationID uuid.UUID, transactionID string) error
}

// SetSagas gives the reconciler Temporal; without it, lost sagas are
// reported (MANUAL), not resumed.
func (r *Reconciler) SetSagas(s Sagas) { r.sagas = s }

// Stores are the owners of the rows the reconciler repairs: it runs their
// transitions, the same ones the sagas run.
type Stores struct {
	Inventory *inventory.Store
	Payments  *payments.Store
	// Provider may be nil: the provider's payments are then not checked.
	Provider payments.Provider
}

// New returns a Reconciler; every dependency but stores.Provider is required.
func New(pool *pgxpool.Pool, rdb redis.Cmdable, stores Stores, m *metrics.Reconcile, log *slog.Logger, watermark time.Duration) (*Reconciler, error) {
	if pool == nil || rdb == nil || stores.Inventory == nil || stores.Payments == nil || m == nil || log == nil || watermark <= 0 {
		return nil, errors.New("reconcile: nil dependency")
	}
	return &Reconciler{pool: pool, rdb: rdb, stores: stores, m: m, log: log, watermark: watermark, now: time.Now}, nil
}

// RepairID is the fixed id of a repair (docs/spec.md#repair-ids).
func RepairID(rule, object string, version int64, target string) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d|%s", rule, object, version, target)))
	return hex.EncodeToString(h[:])
}

// Run reconciles activityID (0: every activity whose sale ended less than a
// week ago or is running) and stores the report. A SKU it cannot check (its
// Redis shard down, a key of the wrong type) does not stop the run: it is
// counted, logged and reported (SKUNotReconciled), the other SKUs and every
// PostgreSQL backstop (outbox, LOST_SAGA, refunds, provider intents) run
// all the same, and the error returned at the end is a *skuloop.Error
// naming the SKUs (joined with any backstop's error). See run.go.
func (r *Reconciler) Run(ctx context.Context, activityID int64) (Report, error) {
	start := r.now()
	rep := Report{ReportID: uuid.New(), ActivityID: activityID, StartedAt: start, Watermark: start.Add(-r.watermark),
		Summary: map[string]int{}, Anomalies: []Anomaly{}}
	r.m.WatermarkLag.Set(r.watermark.Seconds())
	skus, err := r.listSKUs(ctx, activityID)
	if err != nil {
		return rep, err
	}
	pass := skuloop.NewPass("reconcile", r.m.SKUFailures, r.log, r.rdb)
	var pgDelta, redisDelta, crossDelta int64
	for _, k := range skus {
		d1, d2, d3, err := r.skuOnce(ctx, pass, k, &rep)
		if err != nil {
			if ctx.Err() != nil {
				return rep, fmt.Errorf("reconcile %d/%d: %w", k.ActivityID, k.SKUID, err)
			}
			r.skuFailed(&rep, pass, k, err)
			continue
		}
		pgDelta, redisDelta, crossDelta = pgDelta+abs(d1), redisDelta+abs(d2), crossDelta+abs(d3)
	}
	rep.SKUs = len(skus)
	errs := append([]error{pass.Err()}, r.backstops(ctx, &rep, activityID)...)
	r.m.PGDelta.Set(float64(pgDelta))
	r.m.RedisDelta.Set(float64(redisDelta))
	r.m.CrossDelta.Set(float64(crossDelta))
	r.m.TransferStale.Set(float64(rep.Summary[SummaryTransferStale]))
	r.compensationGauges(ctx)
	rep.FinishedAt = r.now()
	r.m.RunDuration.Observe(rep.FinishedAt.Sub(start).Seconds())
	for _, a := range rep.Anomalies {
		rep.Summary[a.Action]++
	}
	rep.Summary["anomalies"] = len(rep.Anomalies)
	return rep, join(append(errs, r.store(ctx, rep))...)
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func (r *Reconciler) sku(ctx context.Context, k lua.SKU, rep *Report) (pgD, redisD, crossD int64, err error) {
	snap, err := invariants.Take(ctx, r.pool, r.rdb, k.ActivityID, k.SKUID)
	if err != nil {
		return 0, 0, 0, err
	}
	skuObj := fmt.Sprintf("sku:%d:%d", k.ActivityID, k.SKUID)
	evidence := map[string]any{"snapshot": snap}
	if pgD = snap.PGInitial - snap.PGAvailable - snap.PGOccupied - snap.PGSold; pgD != 0 {
		r.manual(ctx, rep, PGInvariant, skuObj, pgD, fmt.Sprintf("PostgreSQL initial - available - occupied - sold = %d", pgD), evidence)
	}
	if snap.RedisPresent {
		if redisD = snap.RedisDelta(); redisD != 0 {
			r.manual(ctx, rep, RedisInvariant, skuObj, redisD, fmt.Sprintf("Redis initial - available - in transfer - open_reserved - committed = %d (over %d buckets): rebuild Redis from PostgreSQL (seckill redis rebuild)", redisD, k.Buckets), evidence)
		}
	}
	if err := r.transfers(ctx, k, rep); err != nil {
		return 0, 0, 0, err
	}
	n, err := r.reservations(ctx, k, rep)
	if err != nil {
		return 0, 0, 0, err
	}
	rep.Checked += n
	for _, b := range k.All() {
		if n, err = r.unsettled(ctx, b, rep); err != nil {
			return 0, 0, 0, err
		}
		rep.Checked += n
	}
	// The cross-system relation holds exactly only when nothing is in flight.
	if snap.RedisPresent && snap.RedisOpen == 0 {
		var inFlight int
		if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM inventory_reservation WHERE activity_id = $1 AND sku_id = $2
			AND status IN ('RESERVED', 'ORDER_REJECTED', 'COMPENSATING')`, k.ActivityID, k.SKUID).Scan(&inFlight); err != nil {
			return 0, 0, 0, err
		}
		snap, err = invariants.Take(ctx, r.pool, r.rdb, k.ActivityID, k.SKUID)
		if err == nil && inFlight == 0 && snap.RedisOpen == 0 {
			if crossD = snap.RedisCommitted - snap.PGOccupied - snap.PGSold; crossD != 0 {
				r.manual(ctx, rep, CrossSystemDelta, skuObj, crossD, fmt.Sprintf("Redis committed - (PostgreSQL occupied + sold) = %d", crossD), map[string]any{"snapshot": snap})
			}
		}
	}
	return pgD, redisD, crossD, nil
}

func (r *Reconciler) outbox(ctx context.Context, rep *Report) error {
	list, err := outbox.ExpiredLeases(ctx, r.pool, rep.Watermark)
	if err != nil {
		return err
	}
	for _, o := range list {
		r.auto(ctx, rep, OutboxLeaseExpired, "outbox:"+o.EventID.String(), o.Attempts, "RETRY", map[string]any{"lease_owner": o.Owner}, func() (string, error) {
			n, err := outbox.RetryExpired(ctx, r.pool, o.EventID, rep.Watermark)
			return fmt.Sprintf("%d rows back to RETRY", n), err
		})
	}
	return nil
}

// auto records a repair by its fixed id and, if this run recorded it first,
// executes it.
func (r *Reconciler) auto(ctx context.Context, rep *Report, typ, object string, version int64, target string, ev map[string]any, do func() (string, error)) {
	r.autoKeyed(ctx, rep, typ, object, version, target, "", ev, do)
}

// autoKeyed is auto whose repair_id also depends on key: one repair per
// distinct occurrence (e.g. per lost saga run) of the same object at the same
// version.
func (r *Reconciler) autoKeyed(ctx context.Context, rep *Report, typ, object string, version int64, target, key string, ev map[string]any, do func() (string, error)) {
	idTarget := target
	if key != "" {
		idTarget += "|" + key
	}
	a := Anomaly{Type: typ, Object: object, RepairID: RepairID(typ, object, version, idTarget), Evidence: ev}
	r.m.Anomaly.WithLabelValues(typ).Inc()
	first, err := r.record(ctx, a, version, target, state.RepairPending)
	switch {
	case err != nil:
		a.Action, a.Detail = ActionRepairFailed, err.Error()
	case !first:
		a.Action = ActionAlreadyRecorded
	default:
		detail, err := do()
		status := state.RepairApplied
		a.Action, a.Detail = ActionRepaired, detail
		if err != nil {
			// FAILED, not MANUAL: the next run retries it under the same repair_id.
			status, a.Action, a.Detail = state.RepairFailed, ActionRepairFailed, err.Error()
		}
		if uerr := repairs.Finish(ctx, r.pool, a.RepairID, status, a.Detail); uerr != nil {
			r.log.Error("reconcile.repair_update_failed", "repair_id", a.RepairID, "error", uerr)
		}
		if err == nil {
			r.m.AutoRepair.WithLabelValues(typ).Inc()
		}
	}
	r.log.Warn("reconcile.anomaly_detected", "type", typ, "object", object, "action", a.Action, "repair_id", a.RepairID, "detail", a.Detail)
	rep.Anomalies = append(rep.Anomalies, a)
}

// manual records an anomaly people must decide, with its evidence.
func (r *Reconciler) manual(ctx context.Context, rep *Report, typ, object string, version int64, detail string, ev map[string]any) {
	a := Anomaly{Type: typ, Object: object, RepairID: RepairID(typ, object, version, "MANUAL"), Detail: detail, Evidence: ev, Action: ActionManual}
	r.m.Anomaly.WithLabelValues(typ).Inc()
	r.m.Manual.WithLabelValues(typ).Inc()
	if first, err := r.record(ctx, a, version, "MANUAL", state.RepairManual); err != nil {
		a.Detail += " (not recorded: " + err.Error() + ")"
	} else if !first {
		a.Action = ActionAlreadyRecorded
	}
	r.log.Error("reconcile.anomaly_detected", "type", typ, "object", object, "action", a.Action, "repair_id", a.RepairID, "detail", detail)
	rep.Anomalies = append(rep.Anomalies, a)
}

// record writes the repair_task of an anomaly; true means this run owns the
// repair: it recorded it first, or takes over one that FAILED before or was
// left PENDING by a run that died (older than staleRepair).
func (r *Reconciler) record(ctx context.Context, a Anomaly, version int64, target string, status state.Repair) (bool, error) {
	objType, objID, _ := strings.Cut(a.Object, ":")
	return repairs.Claim(ctx, r.pool, repairs.Entry{RepairID: a.RepairID, ObjectType: strings.ToUpper(objType), ObjectID: objID,
		Rule: "RECONCILE:" + a.Type, ExpectedVersion: version, Target: target, Status: status, Operator: "reconciler",
		Reason: nonEmpty(a.Detail, a.Type), Evidence: a.Evidence, Before: nonEmpty(a.Detail, a.Type)}, staleRepair)
}

// staleRepair is how long a PENDING repair may belong to a run before
// another run takes it over (the first died mid-repair).
const staleRepair = 10 * time.Minute

func (r *Reconciler) compensationGauges(ctx context.Context) {
	var n int64
	var age float64
	if err := r.pool.QueryRow(ctx, `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(created_at)), 0)
		FROM compensation_task WHERE status IN ('PENDING', 'CLAIMED', 'RETRY')`).Scan(&n, &age); err == nil {
		r.m.CompPending.Set(float64(n))
		r.m.CompOldestAge.Set(age)
	}
}

func (r *Reconciler) store(ctx context.Context, rep Report) error {
	var act *int64
	if rep.ActivityID != 0 {
		act = &rep.ActivityID
	}
	_, err := r.pool.Exec(ctx, `INSERT INTO reconcile_report (report_id, activity_id, watermark, started_at, finished_at, summary, anomalies,
		skus, reservations_checked)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, rep.ReportID, act, rep.Watermark, rep.StartedAt, rep.FinishedAt,
		mustJSON(rep.Summary), mustJSON(rep.Anomalies), rep.SKUs, rep.Checked)
	if err != nil {
		return fmt.Errorf("store report: %w", err)
	}
	return nil
}

// Load reads a stored report (uuid.Nil: the newest).
func Load(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) (Report, error) {
	var rep Report
	var act *int64
	var summary, anomalies []byte
	err := pool.QueryRow(ctx, `SELECT report_id, activity_id, watermark, started_at, finished_at, summary, anomalies, skus, reservations_checked
		FROM reconcile_report WHERE ($1 = '00000000-0000-0000-0000-000000000000'::uuid OR report_id = $1)
		ORDER BY started_at DESC LIMIT 1`, id).Scan(&rep.ReportID, &act, &rep.Watermark, &rep.StartedAt, &rep.FinishedAt, &summary, &anomalies,
		&rep.SKUs, &rep.Checked)
	if errors.Is(err, pgx.ErrNoRows) {
		return rep, fmt.Errorf("no reconcile report %v", id)
	}
	if err != nil {
		return rep, err
	}
	if act != nil {
		rep.ActivityID = *act
	}
	_ = json.Unmarshal(summary, &rep.Summary)
	_ = json.Unmarshal(anomalies, &rep.Anomalies)
	return rep, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{}`)
	}
	if string(b) == "null" {
		return []byte(`{}`)
	}
	return b
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Summarize is what a run returns to its workflow (the full report is in
// reconcile_report).
func (rep Report) Summarize() steps.ReconcileSummary {
	return steps.ReconcileSummary{ReportID: rep.ReportID, SKUs: rep.SKUs, Checked: rep.Checked, Anomalies: len(rep.Anomalies), Counts: rep.Summary}
}

// leaseOwner names one compensation attempt of the reconciler.
func leaseOwner() string { return "reconciler/" + uuid.NewString() }
