package reservation

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/lua"
	"github.com/seckill/seckill/state"
)

func TestClientStatus(t *testing.T) {
	tests := map[state.Reservation]string{
		state.ReservationReserved:      "QUEUED",
		state.ReservationOrderRejected: "REJECTED",
		state.ReservationCompensating:  "REJECTED",
		state.ReservationCompensated:   "REJECTED",
		state.ReservationManualReview:  "UNDER_REVIEW",
		state.ReservationOrderCreated:  "ORDER_CREATED",
		state.ReservationCancelled:     "CANCELLED",
	}
	for st, want := range tests {
		if got := ClientStatus(st); got != want {
			t.Errorf("ClientStatus(%s) = %q, want %q", st, got, want)
		}
	}
}

// hashOf is the reservation hash reserve.lua writes for f.
func hashOf(f Fields) map[string]string {
	return map[string]string{
		"reservation_id": f.ReservationID.String(), "message_id": f.MessageID.String(), "request_id": f.RequestID.String(),
		"activity_id": fmt.Sprint(f.ActivityID), "sku_id": fmt.Sprint(f.SKUID), "user_id": fmt.Sprint(f.UserID),
		"bucket": fmt.Sprint(f.Bucket), "schema_version": fmt.Sprint(f.SchemaVersion), "key_version": fmt.Sprint(f.KeyVersion),
		"reserved_at_ms": fmt.Sprint(f.ReservedAtMS), "business_deadline_ms": fmt.Sprint(f.DeadlineMS),
		"send_attempts": fmt.Sprint(f.SendAttempts), "status": f.Status, "mq_state": f.MQState,
	}
}

func sampleFields() Fields {
	return Fields{ReservationID: uuid.New(), MessageID: uuid.New(), RequestID: uuid.New(), ActivityID: 7, SKUID: 8, UserID: 9,
		Bucket: 3, SchemaVersion: ids.SchemaVersion, KeyVersion: 2, ReservedAtMS: 1_780_000_000_123, DeadlineMS: 1_780_000_060_123,
		Status: "RESERVED", MQState: "PENDING", SendAttempts: 4}
}

func TestParseFields(t *testing.T) {
	want := sampleFields()
	got, err := ParseFields(hashOf(want))
	if err != nil || got != want {
		t.Fatalf("ParseFields = %+v, %v; want %+v", got, err, want)
	}

	old := hashOf(want)
	delete(old, "bucket") // written before buckets
	if got, err := ParseFields(old); err != nil || got.Bucket != 0 {
		t.Errorf("ParseFields without bucket = %+v, %v; want bucket 0", got, err)
	}
	for field, bad := range map[string]string{"message_id": "nope", "user_id": "x", "bucket": "", "business_deadline_ms": "1.5"} {
		h := hashOf(want)
		h[field] = bad
		if _, err := ParseFields(h); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("ParseFields with %s=%q: %v, want an error naming the field", field, bad, err)
		}
	}
}

func TestFieldsMessage(t *testing.T) {
	f := sampleFields()
	m := f.Message()
	if err := m.Validate(); err != nil {
		t.Fatalf("message does not validate: %v", err)
	}
	if m.MessageID != f.MessageID || m.MessageKey != f.ReservationID.String() || m.ReservationID != f.ReservationID ||
		m.RequestID != f.RequestID || m.ActivityID != 7 || m.SKUID != 8 || m.UserID != 9 || m.Bucket != 3 ||
		m.KeyVersion != 2 || m.RetryCount != 4 || m.SchemaVersion != ids.SchemaVersion {
		t.Errorf("Message = %+v", m)
	}
	if !m.ReservedAt.Equal(time.UnixMilli(f.ReservedAtMS)) || m.ReservedAt.Location() != time.UTC ||
		!m.BusinessDeadline.Equal(time.UnixMilli(f.DeadlineMS)) || m.BusinessDeadline.Location() != time.UTC {
		t.Errorf("times = %v, %v; want the hash's milliseconds in UTC", m.ReservedAt, m.BusinessDeadline)
	}
	// A re-send carries the same business payload (same inbox hash).
	f.SendAttempts++
	if string(f.Message().BusinessBytes()) != string(m.BusinessBytes()) {
		t.Error("a re-send changed the business payload")
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err     error
		outcome string
	}{
		{nil, OutcomePublished},
		{mq.ErrSendUnknown, OutcomeUnknown},
		{fmt.Errorf("timeout: %w", mq.ErrSendUnknown), OutcomeUnknown},
		{errors.New("refused"), OutcomeFailed},
	}
	for _, tt := range tests {
		outcome, text := classify(mq.SendResult{}, tt.err)
		wantText := ""
		if tt.err != nil {
			wantText = tt.err.Error()
		}
		if outcome != tt.outcome || text != wantText {
			t.Errorf("classify(%v) = %q, %q; want %q, %q", tt.err, outcome, text, tt.outcome, wantText)
		}
	}
}

func TestSendDoneArgs(t *testing.T) {
	due := time.UnixMilli(1_780_000_000_000)
	items := []lua.SendDoneItem{{ReservationID: "r", RecheckMS: 5}}
	a := sendDoneArgs(Sent{Outcome: OutcomeFailed, NextDue: due, ErrText: strings.Repeat("e", 501)}, items)
	if a.Outcome != OutcomeFailed || a.NextDueMS != due.UnixMilli() || len(a.ErrText) != 500 || len(a.Items) != 1 || a.Items[0] != items[0] {
		t.Errorf("sendDoneArgs = %+v (err text %d bytes)", a, len(a.ErrText))
	}
	if a := sendDoneArgs(Sent{ErrText: "short"}, nil); a.ErrText != "short" {
		t.Errorf("short error text changed: %q", a.ErrText)
	}
}

func TestRecheckAt(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	tests := []struct {
		deadlineMS int64
		after      time.Duration
		want       int64
	}{
		{2_000_000, time.Minute, 2_060_000}, // deadline ahead: after it
		{500_000, time.Minute, 1_060_000},   // deadline passed: after now
		{1_000_000, 0, 1_000_000},
	}
	for _, tt := range tests {
		if got := RecheckAt(tt.deadlineMS, now, tt.after).UnixMilli(); got != tt.want {
			t.Errorf("RecheckAt(%d, now, %v) = %d, want %d", tt.deadlineMS, tt.after, got, tt.want)
		}
	}
}

func TestRichestSibling(t *testing.T) {
	bs := []lua.BucketStock{
		{Bucket: 0, Available: 50, Exists: true, XferOut: 3},
		{Bucket: 1, Available: 20, Exists: true, XferIn: 1},
		{Bucket: 2, Available: 90, Exists: false},
		{Bucket: 3, Available: 30, Exists: true, XferOut: 2, XferIn: 1},
	}
	tests := []struct {
		own                 int
		bucket              int
		available, inFlight int64
	}{
		{1, 0, 50, 3}, // own excluded, missing bucket 2 ignored
		{0, 3, 30, 3},
		{2, 0, 50, 3},
	}
	for _, tt := range tests {
		b, avail, fl := richestSibling(bs, tt.own)
		if b != tt.bucket || avail != tt.available || fl != tt.inFlight {
			t.Errorf("richestSibling(own %d) = %d, %d, %d; want %d, %d, %d", tt.own, b, avail, fl, tt.bucket, tt.available, tt.inFlight)
		}
	}
	if b, avail, _ := richestSibling([]lua.BucketStock{{Bucket: 1, Exists: true}}, 0); b != 0 || avail != 0 {
		t.Errorf("no sibling with stock: %d, %d; want 0, 0", b, avail)
	}
}
