// Package events defines the messages seckill puts on RocketMQ
// (docs/spec.md#messages). A message_id names one immutable payload: a retry re-sends the same
// bytes; consumers keep a hash of them to catch "same id, different payload".
package events

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/ids"
)

// TypeOrderCreateRequested is the event_type of OrderCreateRequested.
const TypeOrderCreateRequested = "ORDER_CREATE_REQUESTED"

// OrderCreateRequested asks the order saga to create the order of one reservation.
type OrderCreateRequested struct {
	SchemaVersion int       `json:"schema_version"`
	EventType     string    `json:"event_type"`
	MessageID     uuid.UUID `json:"message_id"`
	MessageKey    string    `json:"message_key"`
	RequestID     uuid.UUID `json:"request_id"`
	ReservationID uuid.UUID `json:"reservation_id"`
	ActivityID    int64     `json:"activity_id"`
	SKUID         int64     `json:"sku_id"`
	UserID        int64     `json:"user_id"`
	// Bucket is the SKU's Redis stock bucket the reservation was taken from
	// (docs/scale.md): where its compensation, projection and release go.
	// Absent for a SKU of one bucket, so those messages are unchanged.
	Bucket           int        `json:"bucket,omitempty"`
	KeyVersion       int        `json:"key_version"`
	OrderID          *uuid.UUID `json:"order_id"`
	ReservedAt       time.Time  `json:"reserved_at"`
	BusinessDeadline time.Time  `json:"business_deadline"`
	// RetryCount is transport metadata: it is not part of the business payload
	// and is left out of the payload hash (see BusinessBytes).
	RetryCount int       `json:"retry_count"`
	Trace      TraceInfo `json:"trace"`
}

// MaxBuckets bounds a SKU's stock buckets (lua.MaxBuckets).
const MaxBuckets = 64

// TraceInfo carries the trace context across the broker.
type TraceInfo struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
}

// ValidationError names the field of a message that is wrong.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string { return fmt.Sprintf("field %s: %s", e.Field, e.Reason) }

// Validate checks schema version and required fields.
func (m OrderCreateRequested) Validate() error {
	switch {
	case m.SchemaVersion != ids.SchemaVersion:
		return &ValidationError{"schema_version", fmt.Sprintf("unsupported %d, want %d", m.SchemaVersion, ids.SchemaVersion)}
	case m.EventType != TypeOrderCreateRequested:
		return &ValidationError{"event_type", fmt.Sprintf("%q is not %s", m.EventType, TypeOrderCreateRequested)}
	case m.MessageID == uuid.Nil:
		return &ValidationError{"message_id", "missing"}
	case m.ReservationID == uuid.Nil:
		return &ValidationError{"reservation_id", "missing"}
	case m.MessageKey != m.ReservationID.String():
		return &ValidationError{"message_key", "must equal reservation_id"}
	case m.RequestID == uuid.Nil:
		return &ValidationError{"request_id", "missing"}
	case m.ActivityID <= 0:
		return &ValidationError{"activity_id", "must be positive"}
	case m.SKUID <= 0:
		return &ValidationError{"sku_id", "must be positive"}
	case m.UserID <= 0:
		return &ValidationError{"user_id", "must be positive"}
	case m.Bucket < 0 || m.Bucket >= MaxBuckets:
		return &ValidationError{"bucket", fmt.Sprintf("must be between 0 and %d", MaxBuckets-1)}
	case m.ReservedAt.IsZero():
		return &ValidationError{"reserved_at", "missing"}
	case !m.BusinessDeadline.After(m.ReservedAt):
		return &ValidationError{"business_deadline", "must be after reserved_at"}
	}
	return nil
}

// BusinessBytes is the canonical encoding of the business payload: the
// message without its transport metadata (retry_count, trace). Its SHA-256 is
// the inbox payload_hash.
func (m OrderCreateRequested) BusinessBytes() []byte {
	m.RetryCount = 0
	m.Trace = TraceInfo{}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("marshal OrderCreateRequested: %v", err)) // plain struct: cannot fail
	}
	return b
}

// DecodeOrderCreateRequested parses and validates a message body.
func DecodeOrderCreateRequested(body []byte) (OrderCreateRequested, error) {
	var m OrderCreateRequested
	if err := json.Unmarshal(body, &m); err != nil {
		return m, &ValidationError{"body", fmt.Sprintf("not valid JSON: %v", err)}
	}
	return m, m.Validate()
}

// VerifyIDs refuses a message whose reservation_id or message_id is not the
// one its fields derive under its key_version (ids.ErrForged): a message put
// on the topic by anyone but the gateway, or altered on the way.
func (m OrderCreateRequested) VerifyIDs(d *ids.Deriver) error {
	return d.Verify(m.KeyVersion, m.ActivityID, m.SKUID, m.UserID, m.RequestID, m.ReservationID, m.MessageID)
}
