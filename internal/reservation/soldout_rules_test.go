package reservation

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/lua"
)

func TestSoldOutAnswer(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	rid, req := uuid.New(), uuid.New()
	holders := &holderCopy{version: 5, byUser: map[int64]holderEntry{42: {reservation: rid, request: req}}}
	live := &soldOutSKU{until: now.Add(time.Second), version: 5, holders: holders}
	tests := []struct {
		name   string
		st     *soldOutSKU
		user   int64
		req    uuid.UUID
		want   Result
		wantOK bool
	}{
		{"no memo", nil, 1, uuid.New(), Result{}, false},
		{"memo ended", &soldOutSKU{until: now, version: 5, holders: holders}, 1, uuid.New(), Result{}, false},
		{"no copy yet", &soldOutSKU{until: now.Add(time.Second), version: 5}, 1, uuid.New(), Result{}, false},
		{"copy of another version", &soldOutSKU{until: now.Add(time.Second), version: 6, holders: holders}, 1, uuid.New(), Result{}, false},
		{"anyone else: sold out", live, 1, uuid.New(), Result{Code: SoldOut}, true},
		{"same request again: queued", live, 42, req, Result{Code: Queued, ReservationID: rid, Duplicate: true, Status: "UNKNOWN"}, true},
		{"holder, another request", live, 42, uuid.New(), Result{Code: AlreadyReserved, ReservationID: rid}, true},
	}
	for _, tt := range tests {
		got, ok := tt.st.answer(now, tt.user, tt.req)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: answer = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestSoldOutMarkAndHolders(t *testing.T) {
	var s soldOut
	k := lua.Keys{ActivityID: 1, SKUID: 2}
	now := time.UnixMilli(1_000_000)
	until := now.Add(time.Second)
	if s.get(k) != nil {
		t.Fatal("an unknown SKU has a memo")
	}
	if !s.mark(k, until, 3) {
		t.Error("mark without a copy must ask for a load")
	}
	s.setHolders(k, &holderCopy{version: 3, byUser: map[int64]holderEntry{}})
	if st := s.get(k); st == nil || st.until != until || st.version != 3 || st.holders == nil {
		t.Fatalf("setHolders lost the memo: %+v", st)
	}
	if _, ok := s.get(k).answer(now, 7, uuid.New()); !ok {
		t.Error("memo with a copy of its version must answer")
	}
	if s.mark(k, until.Add(time.Second), 3) {
		t.Error("mark of the copy's version must not reload")
	}
	if !s.mark(k, until, 4) {
		t.Error("mark of a newer version must reload")
	}
	if _, ok := s.get(k).answer(now, 7, uuid.New()); ok {
		t.Error("a copy of an older version must not answer")
	}
	if s.get(lua.Keys{ActivityID: 1, SKUID: 3}) != nil {
		t.Error("memos leak between SKUs")
	}
}
