package reservation

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/lua"
)

func TestRedisView(t *testing.T) {
	rid, oid := uuid.New(), uuid.New()
	v, err := redisView([]any{"42", "ORDER_CREATED", "1780000000123", oid.String()}, 42, rid)
	want := View{ReservationID: rid, ReservationStatus: "ORDER_CREATED", Status: "ORDER_CREATED", Source: "redis",
		BusinessDeadline: time.UnixMilli(1_780_000_000_123).UTC(), OrderID: &oid}
	if err != nil || v.ReservationID != want.ReservationID || v.ReservationStatus != want.ReservationStatus || v.Status != want.Status ||
		v.Source != want.Source || !v.BusinessDeadline.Equal(want.BusinessDeadline) || v.BusinessDeadline.Location() != time.UTC ||
		v.OrderID == nil || *v.OrderID != oid {
		t.Errorf("redisView = %+v, %v; want %+v", v, err, want)
	}

	v, err = redisView([]any{"42", "RESERVED", nil, nil}, 42, rid)
	if err != nil || v.Status != "QUEUED" || v.OrderID != nil || !v.BusinessDeadline.IsZero() {
		t.Errorf("redisView without deadline and order = %+v, %v", v, err)
	}

	// Another user's reservation answers as if there were none: ids cannot be probed.
	if v, err := redisView([]any{"43", "RESERVED", "1", nil}, 42, rid); !errors.Is(err, ErrNotFound) || v != (View{}) {
		t.Errorf("redisView of another user's reservation = %+v, %v; want ErrNotFound", v, err)
	}
}

func TestClientStatusWithOrder(t *testing.T) {
	s := func(v string) *string { return &v }
	tests := []struct {
		reservation string
		order       *string
		want        string
	}{
		{"RESERVED", nil, "QUEUED"},
		{"ORDER_REJECTED", nil, "REJECTED"},
		{"ORDER_CREATED", s("CREATED"), "ORDER_CREATED"},
		{"ORDER_CREATED", s("PAYING"), "PAYING"},
		{"ORDER_CREATED", s("PAID"), "PAID"},
		{"ORDER_CREATED", s("CANCEL_PENDING"), "CANCEL_PENDING"},
		{"CANCELLED", s("CANCELLED"), "CANCELLED"},
		{"CANCELLED", s("REFUNDING"), "CANCELLED"}, // only an ORDER_CREATED reservation shows its order's status
		{"MANUAL_REVIEW", s("PAID"), "UNDER_REVIEW"},
	}
	for _, tt := range tests {
		if got := clientStatusWithOrder(tt.reservation, tt.order); got != tt.want {
			t.Errorf("clientStatusWithOrder(%s, %v) = %q, want %q", tt.reservation, tt.order, got, tt.want)
		}
	}
}

func TestBucketCount(t *testing.T) {
	tests := []struct {
		name    string
		v       []any
		n       int
		known   bool
		wantErr bool
	}{
		{"no meta", []any{nil, nil}, 1, false, false},
		{"short reply", []any{"1"}, 1, false, false},
		{"meta without buckets", []any{"1700000000000", nil}, 1, true, false},
		{"one bucket", []any{"1700000000000", "1"}, 1, true, false},
		{"eight buckets", []any{"1700000000000", "8"}, 8, true, false},
		{"most buckets", []any{"1", strconv.Itoa(lua.MaxBuckets)}, lua.MaxBuckets, true, false},
		{"too many", []any{"1", strconv.Itoa(lua.MaxBuckets + 1)}, 0, false, true},
		{"zero", []any{"1", "0"}, 0, false, true},
		{"not a number", []any{"1", "x"}, 0, false, true},
	}
	for _, tt := range tests {
		n, known, err := bucketCount(tt.v)
		if n != tt.n || known != tt.known || (err != nil) != tt.wantErr {
			t.Errorf("%s: bucketCount = %d, %v, %v; want %d, %v, error %v", tt.name, n, known, err, tt.n, tt.known, tt.wantErr)
		}
	}
	if _, _, err := bucketCount([]any{"1", "x"}); err == nil || err.Error() != `holds buckets "x"` {
		t.Errorf("error text = %v", err)
	}
}
