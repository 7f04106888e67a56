package auth

import (
	"testing"
	"time"
)

// FuzzUser: no token string panics the verifier, and whatever it accepts
// names a positive user id.
func FuzzUser(f *testing.F) {
	a, err := New(Options{Keys: keys(7), Current: 1, MaxTTL: 24 * time.Hour, AdminToken: "admin-token-123456"})
	if err != nil {
		f.Fatal(err)
	}
	// A second verifier under another key: nothing the first key signed may
	// verify there. (Each fuzz worker runs this setup again, so its own good
	// token can differ from the coordinator's seed by a second: compare
	// verifiers, never token strings.)
	other, err := New(Options{Keys: keys(8), Current: 1, MaxTTL: 24 * time.Hour, AdminToken: "admin-token-123456"})
	if err != nil {
		f.Fatal(err)
	}
	good, _ := a.Mint(42, time.Hour)
	for _, s := range []string{good, "", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", good + "x", good[:len(good)/2]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := a.User(tok)
		if err == nil && id <= 0 {
			t.Fatalf("token %q accepted for user %d", tok, id)
		}
		if err == nil {
			if _, err := other.User(tok); err == nil {
				t.Fatalf("token %q verifies under two different keys", tok)
			}
		}
	})
}
