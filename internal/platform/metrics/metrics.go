// Package metrics defines the Prometheus metrics of seckill. Labels are low-cardinality
// outcomes only: IDs go to logs, never to labels (one bounded exception:
// SKUFailures, loops.go).
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry with the Go and process collectors.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Handler serves reg on /metrics.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Reservation holds the gateway's and the send-due scanner's metrics.
type Reservation struct {
	Requests       *prometheus.CounterVec // seckill_reserve_requests_total{result}
	Created        prometheus.Counter     // seckill_reservation_created_total
	SoldOutMemo    prometheus.Counter     // seckill_reserve_sold_out_memo_total
	Refills        *prometheus.CounterVec // seckill_reserve_refills_total{result}
	RefillUnits    prometheus.Counter     // seckill_reserve_refill_units_total
	FalseSoldOut   prometheus.Counter     // seckill_reserve_false_sold_out_total
	HoldsHealed    prometheus.Counter     // seckill_reserve_holds_healed_total
	SendTotal      *prometheus.CounterVec // seckill_reservation_send_total{source,result}
	SendUnknown    prometheus.Counter     // seckill_reservation_send_unknown_total
	Resend         prometheus.Counter     // seckill_reservation_resend_total
	SendMissing    prometheus.Counter     // seckill_reservation_send_missing_total
	SendRecheck    prometheus.Counter     // seckill_reservation_send_recheck_total
	SendStranded   prometheus.Counter     // seckill_reservation_send_stranded_total
	SendPending    prometheus.Gauge       // seckill_reservation_send_pending
	SendOldestAge  prometheus.Gauge       // seckill_reservation_send_oldest_age_seconds
	Unsettled      prometheus.Gauge       // seckill_reservation_unsettled
	SendAttempts   prometheus.Histogram   // seckill_reservation_send_attempts
	ReserveLatency prometheus.Histogram   // seckill_reserve_duration_seconds
	// ActiveSKUsPruned: finished buckets the scanner took out of seckill:active_skus.
	ActiveSKUsPruned prometheus.Counter // seckill_active_skus_pruned_total
	// SendDueSKUFailures: scans of the send-due scanner that failed on a SKU.
	SendDueSKUFailures *SKUFailures // seckill_loop_sku_failures_total{loop="senddue"}
}

// NewReservation registers the reservation metrics on reg.
func NewReservation(reg prometheus.Registerer) *Reservation {
	f := promauto.With(reg)
	return &Reservation{
		Requests: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_reserve_requests_total",
			Help: "Reservation requests by result code."}, []string{"result"}),
		Created: f.NewCounter(prometheus.CounterOpts{Name: "seckill_reservation_created_total",
			Help: "Reservations admitted by Redis."}),
		SoldOutMemo: f.NewCounter(prometheus.CounterOpts{Name: "seckill_reserve_sold_out_memo_total",
			Help: "Sold-out answers given from the gateway's in-memory memo without running the reserve script."}),
		Refills: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_reserve_refills_total",
			Help: "On-demand stock moves into a sold-out bucket by the gateway, by result (moved; short: the sibling emptied first; in_flight: units between buckets, looked again; no_stock; no_counter: the bucket needs a rebuild; failed: a Redis error)."},
			[]string{"result"}),
		RefillUnits: f.NewCounter(prometheus.CounterOpts{Name: "seckill_reserve_refill_units_total",
			Help: "Units the gateway moved on demand into sold-out buckets."}),
		FalseSoldOut: f.NewCounter(prometheus.CounterOpts{Name: "seckill_reserve_false_sold_out_total",
			Help: "SOLD_OUT answers given while another bucket of the SKU still had an unreserved unit (every on-demand move lost its units to other buyers)."}),
		HoldsHealed: f.NewCounter(prometheus.CounterOpts{Name: "seckill_reserve_holds_healed_total",
			Help: "Entries of users' per-sale holds released because their reservation was compensated, cancelled or never written (docs/spec.md#user-cap)."}),
		SendTotal: f.NewCounterVec(prometheus.CounterOpts{Name: "seckill_reservation_send_total",
			Help: "Sends of ORDER_CREATE_REQUESTED by source (gateway, scanner) and result (published, unknown, failed)."},
			[]string{"source", "result"}),
		SendUnknown: f.NewCounter(prometheus.CounterOpts{Name: "seckill_reservation_send_unknown_total",
			Help: "Sends whose outcome is unknown (timeout); the scanner re-sends with the same message_id."}),
		Resend: f.NewCounter(prometheus.CounterOpts{Name: "seckill_reservation_resend_total",
			Help: "Re-sends by the send-due scanner."}),
		SendMissing: f.NewCounter(prometheus.CounterOpts{Name: "seckill_reservation_send_missing_total",
			Help: "send_due items whose reservation hash was gone (removed and left to reconciliation; Redis lost data)."}),
		SendRecheck: f.NewCounter(prometheus.CounterOpts{Name: "seckill_reservation_send_recheck_total",
			Help: "Published reservations still unsettled past their business deadline, re-sent by the scanner."}),
		SendStranded: f.NewCounter(prometheus.CounterOpts{Name: "seckill_reservation_send_stranded_total",
			Help: "Waiting send_due items made due at once because a broker group left the topic's route (its stored messages may never be read)."}),
		SendPending: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_reservation_send_pending",
			Help: "Reservations whose message is not confirmed sent (a failed or unknown last send), as this scanner last saw them."}),
		SendOldestAge: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_reservation_send_oldest_age_seconds",
			Help: "Age since admission of the oldest reservation whose message is not confirmed sent (0: none)."}),
		Unsettled: f.NewGauge(prometheus.GaugeOpts{Name: "seckill_reservation_unsettled",
			Help: "Reservations in send_due, all SKUs: admitted in Redis, neither projected as an order nor compensated yet."}),
		SendAttempts: f.NewHistogram(prometheus.HistogramOpts{Name: "seckill_reservation_send_attempts",
			Help: "Send attempts per reservation when it was confirmed sent.", Buckets: []float64{1, 2, 3, 5, 10, 20}}),
		ReserveLatency: f.NewHistogram(prometheus.HistogramOpts{Name: "seckill_reserve_duration_seconds",
			Help: "Gateway reserve latency (Redis script and immediate send).", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 14)}),
		ActiveSKUsPruned: f.NewCounter(prometheus.CounterOpts{Name: "seckill_active_skus_pruned_total",
			Help: "Buckets of finished sales (ended past the grace, nothing in send_due or xfer_out) taken out of seckill:active_skus by the send-due scanner."}),
		SendDueSKUFailures: NewSKUFailures(reg, "senddue"),
	}
}
