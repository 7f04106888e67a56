package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Saga holds the metrics of the order saga's activities: MQ to
// PostgreSQL, compensation, payments.
type Saga struct {
	// OrderCreate counts CreateOrder outcomes: created, duplicate, rejected_stock,
	// rejected_deadline, rejected_duplicate_order, rejected_unknown_sku, rejected_user_cap, late, manual.
	OrderCreate *prometheus.CounterVec // seckill_order_create_total{result}
	// InboxPayloadConflict: same message_id, different payload (security-grade alert).
	InboxPayloadConflict prometheus.Counter // seckill_inbox_payload_conflict_total
	// CommitUnknown: a commit returned an error; resolved by the inbox row.
	CommitUnknown prometheus.Counter // seckill_db_commit_unknown_total
	// Compensation counts Compensate outcomes: applied, already_applied,
	// redis_missing, state_conflict, lease_held.
	Compensation *prometheus.CounterVec // seckill_compensation_total{result}
	// Payment counts recorded payments by outcome: paid, already_paid,
	// paid_after_cancel, already_refunding.
	Payment *prometheus.CounterVec // seckill_payment_total{result}
	// Cancel counts finished cancels by result: cancelled, paid_won.
	Cancel *prometheus.CounterVec // seckill_order_cancel_total{result}
	// Refund counts finished refunds.
	Refund prometheus.Counter // seckill_refund_total
}

// NewSaga registers the saga metrics on reg.
func NewSaga(reg prometheus.Registerer) *Saga {
	f := promauto.With(reg)
	return &Saga{
		OrderCreate: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_order_create_total",
			Help: "CreateOrder outcomes."}, []string{"result"}),
		InboxPayloadConflict: f.NewCounter(prometheus.CounterOpts{Name: "seckill_inbox_payload_conflict_total",
			Help: "Messages whose message_id was seen before with a different payload."}),
		CommitUnknown: f.NewCounter(prometheus.CounterOpts{Name: "seckill_db_commit_unknown_total",
			Help: "Order transactions whose commit outcome was unknown (resolved by the inbox row)."}),
		Compensation: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_compensation_total",
			Help: "Compensation attempts by result."}, []string{"result"}),
		Payment: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_payment_total",
			Help: "Recorded payments by outcome."}, []string{"result"}),
		Cancel: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_order_cancel_total",
			Help: "Finished cancels by result (cancelled, paid_won)."}, []string{"result"}),
		Refund: f.NewCounter(prometheus.CounterOpts{Name: "seckill_refund_total",
			Help: "Refunds of payments that landed after a cancel."}),
	}
}

// Reconcile holds the reconciler's metrics.
type Reconcile struct {
	Anomaly       *prometheus.CounterVec // seckill_reconcile_anomaly_total{type}
	AutoRepair    *prometheus.CounterVec // seckill_reconcile_auto_repair_total{type}
	Manual        *prometheus.CounterVec // seckill_reconcile_manual_total{type}
	RunDuration   prometheus.Histogram   // seckill_reconcile_run_duration_seconds
	WatermarkLag  prometheus.Gauge       // seckill_reconcile_watermark_lag_seconds
	PGDelta       prometheus.Gauge       // seckill_inventory_pg_invariant_delta (sum of |delta| over SKUs)
	RedisDelta    prometheus.Gauge       // seckill_inventory_redis_invariant_delta
	CrossDelta    prometheus.Gauge       // seckill_inventory_cross_system_delta
	CompPending   prometheus.Gauge       // seckill_compensation_pending
	CompOldestAge prometheus.Gauge       // seckill_compensation_oldest_age_seconds
	SKUFailures   *SKUFailures           // seckill_loop_sku_failures_total{loop="reconcile"}
	// TransferStale is the stock units in flight between buckets longer
	// than the watermark that the last run left so (internal/reconcile, transfers.go).
	TransferStale prometheus.Gauge // seckill_inventory_transfer_stale_units
}

// NewReconcile registers the reconciliation metrics on reg.
func NewReconcile(reg prometheus.Registerer) *Reconcile {
	f := promauto.With(reg)
	return &Reconcile{
		Anomaly: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_reconcile_anomaly_total",
			Help: "Anomalies found by reconciliation, by type."}, []string{"type"}),
		AutoRepair: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_reconcile_auto_repair_total",
			Help: "Automatic repairs created by reconciliation, by type."}, []string{"type"}),
		Manual: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_reconcile_manual_total",
			Help: "Anomalies left for people, by type."}, []string{"type"}),
		RunDuration: f.NewHistogram(prometheus.HistogramOpts{Name: "seckill_reconcile_run_duration_seconds",
			Help: "Duration of one reconciliation run.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}),
		WatermarkLag: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_reconcile_watermark_lag_seconds",
			Help: "How far behind now the reconciliation watermark is."}),
		PGDelta: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_inventory_pg_invariant_delta",
			Help: "Sum over SKUs of |initial - available - occupied - sold| in PostgreSQL (0 when conserved)."}),
		RedisDelta: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_inventory_redis_invariant_delta",
			Help: "Sum over SKUs of |initial - available - open_reserved - committed| in Redis."}),
		CrossDelta: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_inventory_cross_system_delta",
			Help: "Sum over SKUs of |Redis committed - (PostgreSQL occupied + sold)| past the watermark."}),
		CompPending: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_compensation_pending",
			Help: "Compensation tasks not yet applied."}),
		CompOldestAge: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_compensation_oldest_age_seconds",
			Help: "Age of the oldest unapplied compensation task."}),
		SKUFailures: NewSKUFailures(reg, "reconcile"),
		TransferStale: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_inventory_transfer_stale_units",
			Help: "Stock units taken from a bucket and not in their target longer than the reconcile watermark, over the bucketed SKUs, as the last reconcile run left them."}),
	}
}
