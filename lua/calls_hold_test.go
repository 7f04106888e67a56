package lua

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestHoldRender(t *testing.T) {
	h := Hold{ReservationID: "rid", SKUID: 3, ClaimedAtMS: 1000}
	for _, c := range []struct {
		name, src  string
		keys       []string
		argv, want []any
	}{
		{name: "hold_claim.lua", src: holdClaimSrc,
			want: []any{"rid", int64(3), int64(1000), 5, int64(3600000)}},
		{name: "hold_release.lua", src: holdReleaseSrc, want: []any{"rid", "3 1000"}},
	} {
		if c.name == "hold_claim.lua" {
			c.keys, c.argv = HoldClaimArgs{ActivityID: 77, UserID: 42, Hold: h, Cap: 5, TTL: time.Hour}.Render()
		} else {
			c.keys, c.argv = HoldReleaseArgs{ActivityID: 77, UserID: 42, Hold: h}.Render()
		}
		if want := []string{"seckill:{a:77:u:42}:holds"}; !reflect.DeepEqual(c.keys, want) {
			t.Errorf("%s KEYS = %q, want %q", c.name, c.keys, want)
		}
		if !reflect.DeepEqual(c.argv, c.want) {
			t.Errorf("%s ARGV = %#v, want %#v", c.name, c.argv, c.want)
		}
		if !strings.Contains(c.src, fmt.Sprintf("ARGV[%d]", len(c.argv))) || strings.Contains(c.src, fmt.Sprintf("ARGV[%d]", len(c.argv)+1)) ||
			strings.Contains(c.src, "KEYS[2]") {
			t.Errorf("%s: %d ARGV rendered, the script uses another number", c.name, len(c.argv))
		}
	}
}

func TestParseHoldClaim(t *testing.T) {
	got, err := parseHoldClaim([]any{int64(1)})
	if err != nil || !got.Claimed || got.Held != nil {
		t.Fatalf("claimed: %+v, %v", got, err)
	}
	got, err = parseHoldClaim([]any{int64(-1), "r1", "3 1000", "r2", "4 2000"})
	want := HoldClaimReply{Held: []Hold{{"r1", 3, 1000}, {"r2", 4, 2000}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("at the cap: %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []any{"OK", []any{int64(2)}, []any{int64(1), "x"}, []any{int64(-1), "r1"},
		[]any{int64(-1), "r1", "3"}, []any{int64(-1), "r1", "x 1"}, []any{int64(-1), int64(1), "3 1"}} {
		if _, err := parseHoldClaim(bad); !errors.Is(err, ErrBadReply) {
			t.Errorf("parseHoldClaim(%#v) = %v, want ErrBadReply", bad, err)
		}
	}
}

func TestHoldEntryRoundTrip(t *testing.T) {
	h := Hold{ReservationID: "rid", SKUID: 12, ClaimedAtMS: 1700000000123}
	got, err := ParseHold("rid", h.Entry())
	if err != nil || got != h {
		t.Fatalf("ParseHold(Entry()) = %+v, %v; want %+v", got, err, h)
	}
}
