package auth

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func newTestAuth(t *testing.T) *Authenticator {
	t.Helper()
	a, err := New(bytes.Repeat([]byte{7}, 32), "admin-token-123456")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestMintAndVerify(t *testing.T) {
	a := newTestAuth(t)
	tok, err := a.Mint(42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.User(tok)
	if err != nil || id != 42 {
		t.Fatalf("User = %d, %v", id, err)
	}
}

func TestRejectsBadTokens(t *testing.T) {
	a := newTestAuth(t)
	other, _ := New(bytes.Repeat([]byte{8}, 32), "admin-token-123456")
	good, _ := a.Mint(42, time.Hour)
	foreign, _ := other.Mint(42, time.Hour)
	expired, _ := a.Mint(42, -time.Minute)
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + strings.TrimRight(parts[1], "=") + "x." + parts[2]
	// alg=none token with the same claims.
	none := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + parts[1] + "."
	for name, tok := range map[string]string{
		"empty": "", "garbage": "abc", "other key": foreign, "expired": expired,
		"tampered": tampered, "alg none": none,
	} {
		if _, err := a.User(tok); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: err = %v, want ErrUnauthenticated", name, err)
		}
	}
}

func TestAdmin(t *testing.T) {
	a := newTestAuth(t)
	if !a.Admin("admin-token-123456") || a.Admin("admin-token-12345") || a.Admin("") {
		t.Fatal("admin check wrong")
	}
	if _, err := New(bytes.Repeat([]byte{7}, 8), "admin-token-123456"); err == nil {
		t.Fatal("short secret accepted")
	}
}
