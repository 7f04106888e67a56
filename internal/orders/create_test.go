package orders

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/inbox"
	"github.com/seckill/seckill/internal/platform/metrics"
	"github.com/seckill/seckill/state/steps"
)

// testStore is a Store with only its logger and metrics: enough for the
// decisions that do no I/O.
func testStore() (*Store, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return &Store{log: slog.New(slog.NewTextHandler(io.Discard, nil)), m: metrics.NewSaga(reg)}, reg
}

// counter returns the value of the counter name{labels} in reg (0 if absent).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestParseResultCode(t *testing.T) {
	tests := []struct {
		code       string
		wantOut    steps.OrderOutcome
		wantReason string
	}{
		{"ORDER_CREATED", steps.OutcomeCreated, ""},
		{"ORDER_REJECTED:STOCK_EXHAUSTED", steps.OutcomeRejected, steps.ReasonStockExhausted},
		{"ORDER_REJECTED:BUSINESS_DEADLINE_EXCEEDED", steps.OutcomeRejected, steps.ReasonDeadline},
		{"LATE_AFTER_COMPENSATION:COMPENSATED", steps.OutcomeLate, "COMPENSATED"},
		{"MANUAL_REVIEW:ORDER_UNPROCESSABLE:23505", steps.OutcomeManual, "ORDER_UNPROCESSABLE:23505"},
		{"", "", ""},
	}
	for _, tt := range tests {
		out, reason := parseResultCode(tt.code)
		if out != tt.wantOut || reason != tt.wantReason {
			t.Errorf("parseResultCode(%q) = %q, %q; want %q, %q", tt.code, out, reason, tt.wantOut, tt.wantReason)
		}
	}
}

func TestOutcomesAreTheReservationStatuses(t *testing.T) {
	// The recorded result codes are reservation statuses: the outcome words
	// must stay those of state.Reservation.
	for out, want := range map[steps.OrderOutcome]string{steps.OutcomeCreated: "ORDER_CREATED", steps.OutcomeRejected: "ORDER_REJECTED",
		steps.OutcomeManual: "MANUAL_REVIEW", steps.OutcomeLate: "LATE_AFTER_COMPENSATION"} {
		if string(out) != want {
			t.Errorf("outcome %q, want %q", out, want)
		}
	}
}

func TestFnRowResult(t *testing.T) {
	oid, exp := uuid.New(), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	out, reason := "ORDER_CREATED", "why"
	tests := []struct {
		name string
		row  fnRow
		want steps.CreateOrderResult
	}{
		{"all set", fnRow{outcome: &out, reason: &reason, orderID: &oid, expiresAt: &exp},
			steps.CreateOrderResult{Outcome: steps.OutcomeCreated, Reason: "why", OrderID: oid, ExpiresAt: exp}},
		{"nulls are zero values", fnRow{}, steps.CreateOrderResult{}},
	}
	for _, tt := range tests {
		if got := tt.row.result(); got != tt.want {
			t.Errorf("%s: result() = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestFnRowRecord(t *testing.T) {
	oid, exp, code := uuid.New(), time.Now(), "ORDER_REJECTED:STOCK_EXHAUSTED"
	rec := fnRow{duplicate: true, hash: []byte{1, 2}, code: &code, orderID: &oid, expiresAt: &exp}.record()
	if !rec.Same([]byte{1, 2}) || rec.Code != code || rec.OrderID != &oid || rec.ExpiresAt != &exp {
		t.Errorf("record() = %+v", rec)
	}
	if rec := (fnRow{}).record(); rec.Code != "" || rec.OrderID != nil || rec.ExpiresAt != nil {
		t.Errorf("record() of nulls = %+v", rec)
	}
}

func TestCount(t *testing.T) {
	tests := []struct {
		res   steps.CreateOrderResult
		label string // "" means no sample at all
	}{
		{steps.CreateOrderResult{Outcome: steps.OutcomeCreated}, "created"},
		{steps.CreateOrderResult{Outcome: steps.OutcomeLate}, "late"},
		{steps.CreateOrderResult{Outcome: steps.OutcomeManual}, "manual"},
		{steps.CreateOrderResult{Outcome: steps.OutcomeCreated, Duplicate: true}, "duplicate"},
		{steps.CreateOrderResult{Outcome: steps.OutcomeRejected, Duplicate: true, Reason: steps.ReasonStockExhausted}, "duplicate"},
		{steps.CreateOrderResult{Outcome: steps.OutcomeRejected, Reason: steps.ReasonStockExhausted}, "rejected_stock"},
		{steps.CreateOrderResult{Outcome: steps.OutcomeRejected, Reason: steps.ReasonUserCap}, "rejected_user_cap"},
		{steps.CreateOrderResult{Outcome: steps.OutcomeRejected, Reason: steps.ReasonDeadline}, "rejected_deadline"},
		{steps.CreateOrderResult{Outcome: steps.OutcomeRejected, Reason: steps.ReasonDuplicateOrder}, "rejected_duplicate_order"},
		{steps.CreateOrderResult{Outcome: steps.OutcomeRejected, Reason: steps.ReasonUnknownSKU}, "rejected_unknown_sku"},
		{steps.CreateOrderResult{Outcome: steps.OutcomeRejected, Reason: "SOMETHING_ELSE"}, ""},
		{steps.CreateOrderResult{Outcome: "BOGUS"}, ""},
	}
	for _, tt := range tests {
		s, reg := testStore()
		s.count(tt.res)
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		samples := 0
		for _, f := range families {
			if f.GetName() == "seckill_order_create_total" {
				samples += len(f.GetMetric())
			}
		}
		switch {
		case tt.label == "" && samples != 0:
			t.Errorf("count(%+v): %d samples, want none", tt.res, samples)
		case tt.label != "" && (samples != 1 || counter(t, reg, "seckill_order_create_total", map[string]string{"result": tt.label}) != 1):
			t.Errorf("count(%+v): want one sample result=%q, got %d samples", tt.res, tt.label, samples)
		}
	}
}

func TestRecorded(t *testing.T) {
	mid, oid, exp := uuid.New(), uuid.New(), time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	hash := []byte("hash")
	tests := []struct {
		name         string
		rec          inbox.Record
		want         steps.CreateOrderResult
		wantErr      string
		wantConflict float64
	}{
		{"same payload, created", inbox.Record{Hash: hash, Code: "ORDER_CREATED", OrderID: &oid, ExpiresAt: &exp},
			steps.CreateOrderResult{Outcome: steps.OutcomeCreated, OrderID: oid, ExpiresAt: exp, Duplicate: true}, "", 0},
		{"same payload, rejected", inbox.Record{Hash: hash, Code: "ORDER_REJECTED:STOCK_EXHAUSTED"},
			steps.CreateOrderResult{Outcome: steps.OutcomeRejected, Reason: steps.ReasonStockExhausted, Duplicate: true}, "", 0},
		{"different payload is manual", inbox.Record{Hash: []byte("other"), Code: "ORDER_CREATED", OrderID: &oid},
			steps.CreateOrderResult{Outcome: steps.OutcomeManual, Reason: steps.ReasonPayloadConflict, Duplicate: true}, "", 1},
		{"PROCESSING outside its transaction is an error", inbox.Record{Hash: hash, Code: "PROCESSING"},
			steps.CreateOrderResult{}, "still PROCESSING", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, reg := testStore()
			got, err := s.recorded(context.Background(), mid, hash, tt.rec)
			if got != tt.want {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if n := counter(t, reg, "seckill_inbox_payload_conflict_total", nil); n != tt.wantConflict {
				t.Errorf("payload conflicts counted = %v, want %v", n, tt.wantConflict)
			}
		})
	}
}

func TestCreateInvalidMessageIsManual(t *testing.T) {
	// An invalid message is a decision (manual review), reached before any I/O.
	s, _ := testStore()
	m := events.OrderCreateRequested{SchemaVersion: -1}
	res, err := s.Create(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != steps.OutcomeManual || !strings.HasPrefix(res.Reason, "INVALID_MESSAGE: ") || !strings.Contains(res.Reason, "schema_version") {
		t.Errorf("Create(invalid) = %+v, want MANUAL_REVIEW with INVALID_MESSAGE: schema_version…", res)
	}
}

func TestNewStoreRequires(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for name, d := range map[string]Deps{
		"empty":     {},
		"no topic":  {Log: log},
		"no pools":  {Log: log, Topic: "t"},
		"no logger": {Topic: "t"},
	} {
		if s, err := NewStore(d); err == nil || s != nil {
			t.Errorf("%s: NewStore = %v, %v; want an error", name, s, err)
		}
	}
}
