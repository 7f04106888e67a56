package inventory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/internal/events"
	"github.com/seckill/seckill/internal/ids"
	"github.com/seckill/seckill/lua"
)

func TestMessage(t *testing.T) {
	want := validMessage()
	paris := time.FixedZone("CET", 3600)
	scan := func(buckets int) fakeRow {
		return func(dest ...any) error {
			*dest[0].(*uuid.UUID), *dest[1].(*uuid.UUID) = want.MessageID, want.RequestID
			*dest[2].(*int64), *dest[3].(*int64), *dest[4].(*int64) = want.ActivityID, want.SKUID, want.UserID
			*dest[5].(*time.Time), *dest[6].(*time.Time) = want.ReservedAt.In(paris), want.BusinessDeadline.In(paris)
			*dest[7].(*int) = buckets
			return nil
		}
	}
	for _, buckets := range []int{1, 4, 16} {
		m, err := Message(context.Background(), fakeQuerier{scan(buckets)}, want.ReservationID)
		if err != nil {
			t.Fatal(err)
		}
		w := want
		w.Bucket = lua.BucketOf(w.UserID, buckets)
		if m != w {
			t.Errorf("buckets %d: Message = %+v, want %+v", buckets, m, w)
		}
		if m.ReservedAt.Location() != time.UTC || m.BusinessDeadline.Location() != time.UTC {
			t.Errorf("buckets %d: times not in UTC: %v, %v", buckets, m.ReservedAt, m.BusinessDeadline)
		}
		if m.Validate() != nil {
			t.Errorf("buckets %d: the rebuilt message does not validate: %v", buckets, m.Validate())
		}
	}
	if m, _ := Message(context.Background(), fakeQuerier{scan(1)}, want.ReservationID); m.SchemaVersion != ids.SchemaVersion ||
		m.EventType != events.TypeOrderCreateRequested || m.MessageKey != want.ReservationID.String() {
		t.Errorf("Message header = %d %q %q", m.SchemaVersion, m.EventType, m.MessageKey)
	}
	boom := errors.New("boom")
	if _, err := Message(context.Background(), fakeQuerier{func(...any) error { return boom }}, want.ReservationID); !errors.Is(err, boom) {
		t.Errorf("err = %v, want the database error wrapped", err)
	}
}

func TestNewStoreRequires(t *testing.T) {
	for name, d := range map[string]Deps{
		"empty":            {},
		"no pool":          {Log: quiet(), TerminalTTL: time.Hour},
		"non-positive TTL": {Log: quiet()},
	} {
		if s, err := NewStore(d); err == nil || s != nil {
			t.Errorf("%s: NewStore = %v, %v; want an error", name, s, err)
		}
	}
}
