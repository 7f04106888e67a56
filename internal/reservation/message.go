package reservation

import (
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/events"
)

// Fields are the recovery fields of a Redis reservation hash (lua/reserve.lua)
// from which ORDER_CREATE_REQUESTED is rebuilt, byte for byte, on every re-send.
type Fields struct {
	ReservationID uuid.UUID
	MessageID     uuid.UUID
	RequestID     uuid.UUID
	ActivityID    int64
	SKUID         int64
	UserID        int64
	Bucket        int // the SKU's stock bucket (lua.Keys.Bucket)
	SchemaVersion int
	KeyVersion    int
	ReservedAtMS  int64
	DeadlineMS    int64
	Status        string
	MQState       string
	SendAttempts  int
}

// Message builds the ORDER_CREATE_REQUESTED of a reservation. The gateway and
// the send-due scanner both call it, so a re-send carries the same payload
// under the same message_id.
func (f Fields) Message() events.OrderCreateRequested {
	return events.OrderCreateRequested{
		SchemaVersion:    f.SchemaVersion,
		EventType:        events.TypeOrderCreateRequested,
		MessageID:        f.MessageID,
		MessageKey:       f.ReservationID.String(),
		RequestID:        f.RequestID,
		ReservationID:    f.ReservationID,
		ActivityID:       f.ActivityID,
		SKUID:            f.SKUID,
		UserID:           f.UserID,
		Bucket:           f.Bucket,
		KeyVersion:       f.KeyVersion,
		ReservedAt:       time.UnixMilli(f.ReservedAtMS).UTC(),
		BusinessDeadline: time.UnixMilli(f.DeadlineMS).UTC(),
		RetryCount:       f.SendAttempts,
	}
}

// ParseFields reads a reservation hash (HGETALL result).
func ParseFields(h map[string]string) (Fields, error) {
	var f Fields
	var err error
	uid := func(name string) uuid.UUID {
		if err != nil {
			return uuid.Nil
		}
		var u uuid.UUID
		if u, err = uuid.Parse(h[name]); err != nil {
			err = fmt.Errorf("reservation field %s: %w", name, err)
		}
		return u
	}
	num := func(name string) int64 {
		if err != nil {
			return 0
		}
		var v int64
		if v, err = strconv.ParseInt(h[name], 10, 64); err != nil {
			err = fmt.Errorf("reservation field %s: %w", name, err)
		}
		return v
	}
	f.ReservationID = uid("reservation_id")
	f.MessageID = uid("message_id")
	f.RequestID = uid("request_id")
	f.ActivityID = num("activity_id")
	f.SKUID = num("sku_id")
	f.UserID = num("user_id")
	f.SchemaVersion = int(num("schema_version"))
	f.KeyVersion = int(num("key_version"))
	f.ReservedAtMS = num("reserved_at_ms")
	f.DeadlineMS = num("business_deadline_ms")
	f.SendAttempts = int(num("send_attempts"))
	if _, ok := h["bucket"]; ok { // absent in hashes written before buckets
		f.Bucket = int(num("bucket"))
	}
	f.Status, f.MQState = h["status"], h["mq_state"]
	return f, err
}
