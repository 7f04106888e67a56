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
	good, _ := a.Mint(42, time.Hour)
	for _, s := range []string{good, "", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", good + "x", good[:len(good)/2]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := a.User(tok)
		if err == nil && id <= 0 {
			t.Fatalf("token %q accepted for user %d", tok, id)
		}
		if err == nil && tok != good {
			// Only tokens this key signed verify; a mutated token must not.
			if _, err := (&Authenticator{keys: keys(8), current: 1, maxTTL: time.Hour, now: time.Now}).User(tok); err == nil {
				t.Fatalf("token %q verifies under two different keys", tok)
			}
		}
	})
}
