package ids

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func testDeriver(t *testing.T) *Deriver {
	t.Helper()
	d, err := NewDeriver(map[int][]byte{1: bytes.Repeat([]byte{1}, 32), 2: bytes.Repeat([]byte{2}, 32)}, 2)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSameRequestSameIDs(t *testing.T) {
	d := testDeriver(t)
	req := uuid.MustParse("019c8d22-7600-7fa6-9307-6126afbc703b")
	a, _ := d.ForRequest(0, 1001, 90001, 80000001, req)
	b, _ := d.ForRequest(2, 1001, 90001, 80000001, req)
	if a != b {
		t.Fatalf("same request derived %v and %v", a, b)
	}
	if a.ReservationID == a.MessageID {
		t.Fatal("reservation and message ids coincide")
	}
	if a.ReservationID.Version() != 8 || a.ReservationID.Variant() != uuid.RFC4122 {
		t.Fatalf("not a version-8 RFC 9562 uuid: %v", a.ReservationID)
	}
}

func TestEveryInputChangesTheID(t *testing.T) {
	d := testDeriver(t)
	req := uuid.MustParse("019c8d22-7600-7fa6-9307-6126afbc703b")
	base, _ := d.ForRequest(0, 1, 2, 3, req)
	others := map[string]func() (Reservation, error){
		"activity": func() (Reservation, error) { return d.ForRequest(0, 9, 2, 3, req) },
		"sku":      func() (Reservation, error) { return d.ForRequest(0, 1, 9, 3, req) },
		"user":     func() (Reservation, error) { return d.ForRequest(0, 1, 2, 9, req) },
		"request":  func() (Reservation, error) { return d.ForRequest(0, 1, 2, 3, uuid.New()) },
		"key":      func() (Reservation, error) { return d.ForRequest(1, 1, 2, 3, req) },
	}
	for name, f := range others {
		r, err := f()
		if err != nil {
			t.Fatal(err)
		}
		if r.ReservationID == base.ReservationID || r.MessageID == base.MessageID {
			t.Errorf("changing %s kept an id", name)
		}
	}
}

func TestUnknownKeyVersion(t *testing.T) {
	d := testDeriver(t)
	if _, err := d.ForRequest(7, 1, 2, 3, uuid.New()); err == nil {
		t.Fatal("unknown key version accepted")
	}
	if _, err := NewDeriver(map[int][]byte{1: make([]byte, 32)}, 2); err == nil {
		t.Fatal("current version missing accepted")
	}
	if _, err := NewDeriver(map[int][]byte{1: make([]byte, 8)}, 1); err == nil {
		t.Fatal("short key accepted")
	}
}

func TestNamedIsStableAndSeparated(t *testing.T) {
	rid := uuid.New()
	if Named("ORDER", rid) != Named("ORDER", rid) {
		t.Fatal("named id not stable")
	}
	if Named("ORDER", rid) == Named("COMPENSATE", rid) || Named("E", rid, "a") == Named("E", rid, "b") {
		t.Fatal("named ids collide")
	}
}

func TestVerifyAcceptsOnlyDerivedIDs(t *testing.T) {
	d := testDeriver(t)
	req := uuid.MustParse("019c8d22-7600-7fa6-9307-6126afbc703b")
	old, _ := d.ForRequest(1, 1, 2, 3, req) // an older key version still held
	cur, _ := d.ForRequest(0, 1, 2, 3, req)
	for _, r := range []Reservation{old, cur} {
		if err := d.Verify(r.KeyVersion, 1, 2, 3, req, r.ReservationID, r.MessageID); err != nil {
			t.Fatalf("derived ids of key version %d refused: %v", r.KeyVersion, err)
		}
	}
	other, _ := d.ForRequest(0, 1, 2, 4, req) // another user's reservation
	cases := map[string]struct {
		ver      int
		user     int64
		rid, mid uuid.UUID
		want     string
	}{
		"random ids":          {2, 3, uuid.New(), uuid.New(), "reservation_id"},
		"ids of another user": {2, 3, other.ReservationID, other.MessageID, "reservation_id"},
		"user changed":        {2, 4, cur.ReservationID, cur.MessageID, "reservation_id"},
		"message id swapped":  {2, 3, cur.ReservationID, uuid.New(), "message_id"},
		"wrong key version":   {1, 3, cur.ReservationID, cur.MessageID, "reservation_id"},
		"key version unheld":  {7, 3, cur.ReservationID, cur.MessageID, "not configured"},
		"key version missing": {0, 3, cur.ReservationID, cur.MessageID, "key_version is missing"},
	}
	for name, c := range cases {
		err := d.Verify(c.ver, 1, 2, c.user, req, c.rid, c.mid)
		if !errors.Is(err, ErrForged) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Verify = %v, want ErrForged naming %q", name, err, c.want)
		}
	}
}
