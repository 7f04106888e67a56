package auth

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func keys(vs ...byte) map[int][]byte {
	m := map[int][]byte{}
	for i, v := range vs {
		m[i+1] = bytes.Repeat([]byte{v}, 32)
	}
	return m
}

func newTestAuth(t *testing.T) *Authenticator {
	t.Helper()
	a, err := New(Options{Keys: keys(7), Current: 1, MaxTTL: 24 * time.Hour, AdminToken: "admin-token-123456"})
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
	if _, err := a.Mint(42, 25*time.Hour); err == nil {
		t.Fatal("minted a token longer than the maximum lifetime")
	}
}

// sign makes a token with arbitrary claims and headers under key.
func sign(t *testing.T, claims jwt.MapClaims, kid string, key []byte) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRejectsBadTokens(t *testing.T) {
	a := newTestAuth(t)
	other, _ := New(Options{Keys: keys(8), Current: 1, MaxTTL: time.Hour, AdminToken: "admin-token-123456"})
	good, _ := a.Mint(42, time.Hour)
	foreign, _ := other.Mint(42, time.Hour)
	expired, _ := a.Mint(42, -time.Minute)
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + strings.TrimRight(parts[1], "=") + "x." + parts[2]
	// alg=none token with the same claims.
	none := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + parts[1] + "."
	key := bytes.Repeat([]byte{7}, 32)
	now := time.Now()
	base := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": Issuer, "aud": Audience, "sub": "42", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	}
	without := func(k string) jwt.MapClaims { c := base(); delete(c, k); return c }
	with := func(k string, v any) jwt.MapClaims { c := base(); c[k] = v; return c }
	for name, tok := range map[string]string{
		"empty": "", "garbage": "abc", "other key": foreign, "expired": expired,
		"tampered": tampered, "alg none": none,
		"no exp":              sign(t, without("exp"), "1", key),
		"no iat":              sign(t, without("iat"), "1", key),
		"no aud":              sign(t, without("aud"), "1", key),
		"other aud":           sign(t, with("aud", "someone-else"), "1", key),
		"too long a lifetime": sign(t, with("exp", now.Add(48*time.Hour).Unix()), "1", key),
		"iat in the future":   sign(t, with("iat", now.Add(time.Hour).Unix()), "1", key),
		"no kid":              sign(t, base(), "", key),
		"unknown kid":         sign(t, base(), "9", key),
		"subject +42":         sign(t, with("sub", "+42"), "1", key),
		"subject 042":         sign(t, with("sub", "042"), "1", key),
	} {
		if _, err := a.User(tok); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: err = %v, want ErrUnauthenticated", name, err)
		}
	}
	if id, err := a.User(sign(t, base(), "1", key)); err != nil || id != 42 {
		t.Fatalf("a well-formed hand-made token = %d, %v", id, err)
	}
}

// Rotation: version 2 is added and signs new tokens; tokens of version 1
// still verify until it is dropped, then they do not.
func TestKeyRotation(t *testing.T) {
	old := newTestAuth(t)
	oldTok, _ := old.Mint(7, time.Hour)
	both, err := New(Options{Keys: keys(7, 9), Current: 2, MaxTTL: 24 * time.Hour, AdminToken: "admin-token-123456"})
	if err != nil {
		t.Fatal(err)
	}
	newTok, _ := both.Mint(7, time.Hour)
	for name, tok := range map[string]string{"old key's token": oldTok, "new key's token": newTok} {
		if id, err := both.User(tok); err != nil || id != 7 {
			t.Fatalf("during rotation, %s = %d, %v", name, id, err)
		}
	}
	if _, err := old.User(newTok); err == nil {
		t.Fatal("a gateway without the new key accepted its token")
	}
	dropped, _ := New(Options{Keys: map[int][]byte{2: keys(7, 9)[2]}, Current: 2, MaxTTL: 24 * time.Hour, AdminToken: "admin-token-123456"})
	if _, err := dropped.User(oldTok); err == nil {
		t.Fatal("a dropped key's token still verifies")
	}
}

func TestAdmin(t *testing.T) {
	a := newTestAuth(t)
	if !a.Admin("admin-token-123456") || a.Admin("admin-token-12345") || a.Admin("") {
		t.Fatal("admin check wrong")
	}
	if strings.Contains(a.AdminName(), "admin-token") {
		t.Fatal("the admin name reveals the credential")
	}
	if _, err := New(Options{Keys: map[int][]byte{1: bytes.Repeat([]byte{7}, 8)}, Current: 1, MaxTTL: time.Hour, AdminToken: "admin-token-123456"}); err == nil {
		t.Fatal("short secret accepted")
	}
}

// A token answered from the verified-token cache still expires on time, a
// token that differs in one byte is verified (and refused) on its own, and
// the cache stays bounded.
func TestVerifiedTokenCache(t *testing.T) {
	a := newTestAuth(t)
	now := time.Now()
	a.now = func() time.Time { return now }
	tok, err := a.Mint(42, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // verified, then cached
		if id, err := a.User(tok); err != nil || id != 42 {
			t.Fatalf("User = %d, %v", id, err)
		}
	}
	if _, _, ok := a.verified.get(tok, now); !ok {
		t.Fatal("a verified token is not cached")
	}
	tampered := tok[:len(tok)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(tok, "AA")]
	if _, err := a.User(tampered); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("tampered token of a cached one = %v", err)
	}
	now = now.Add(time.Minute + leeway)
	if _, err := a.User(tok); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a cached token after its expiry = %v", err)
	}
	v := newVerified()
	for i := range verifiedShards*verifiedPerShard + 1000 {
		v.put(strconv.Itoa(i), 1, now, now.Add(time.Hour))
	}
	n := 0
	for i := range v.shards {
		n += len(v.shards[i].m)
	}
	if n > verifiedShards*verifiedPerShard {
		t.Fatalf("cache holds %d tokens, bound %d", n, verifiedShards*verifiedPerShard)
	}
}

func BenchmarkUser(b *testing.B) {
	a, err := New(Options{Keys: keys(7), Current: 1, MaxTTL: 24 * time.Hour, AdminToken: "admin-token-123456"})
	if err != nil {
		b.Fatal(err)
	}
	toks := make([]string, 1<<16)
	for i := range toks {
		if toks[i], err = a.Mint(int64(i+1), time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("first-use", func(b *testing.B) {
		for i := range b.N {
			if _, _, _, err := a.verify(toks[i%len(toks)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		for i := range b.N {
			if _, err := a.User(toks[i%1024]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestRefusesNonCanonicalSignature: a 32-byte HS256 signature leaves two
// spare bits in its last base64url character; a token whose spare bits are
// set decodes to the same signature but is another string, and is refused.
func TestRefusesNonCanonicalSignature(t *testing.T) {
	a := newTestAuth(t)
	tok, err := a.Mint(42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	mutated := tok[:len(tok)-1] + string(alphabet[last^1])
	if _, err := a.User(mutated); err == nil {
		t.Fatalf("token with non-canonical signature bits accepted")
	}
}

// Each operator has a credential of its own, named (never shown) in audits;
// two operators cannot share one.
func TestAdminPerOperator(t *testing.T) {
	k := map[int][]byte{1: bytes.Repeat([]byte{7}, 32)}
	a, err := New(Options{Keys: k, Current: 1, MaxTTL: time.Hour, AdminToken: "admin-token-123456",
		AdminTokens: map[string]string{"alice": "alice-token-1234567", "bob": "bob-token-12345678"}})
	if err != nil {
		t.Fatal(err)
	}
	for tok, who := range map[string]string{"admin-token-123456": "admin:", "alice-token-1234567": "alice:", "bob-token-12345678": "bob:"} {
		name, ok := a.AdminOf(tok)
		if !ok || !strings.HasPrefix(name, who) || len(name) != len(who)+8 || strings.Contains(name, "token") {
			t.Errorf("AdminOf(%s's token) = %q, %v; want %s<8 hex>", who, name, ok, who)
		}
	}
	if name, ok := a.AdminOf("carol-token-123456"); ok || name != "" {
		t.Errorf("an unknown token = %q, %v", name, ok)
	}
	if _, err := New(Options{Keys: k, Current: 1, MaxTTL: time.Hour, AdminToken: "admin-token-123456",
		AdminTokens: map[string]string{"alice": "admin-token-123456"}}); err == nil {
		t.Error("two operators sharing one credential accepted")
	}
	if _, err := New(Options{Keys: k, Current: 1, MaxTTL: time.Hour, AdminToken: "admin-token-123456",
		AdminTokens: map[string]string{"alice": "short"}}); err == nil || !strings.Contains(err.Error(), "alice") {
		t.Errorf("a short operator credential = %v, want a refusal naming alice", err)
	}
}

// epochAt is a Revocations of fixed epochs.
type epochAt map[int64]time.Time

func (e epochAt) NotBefore(user int64) (time.Time, bool) { t, ok := e[user]; return t, ok }

func TestRevocationEpochRefusesOlderTokensCachedOrNot(t *testing.T) {
	a := newTestAuth(t)
	epochs := epochAt{}
	a.revoked = epochs
	now := time.Unix(1_800_000_000, 0)
	a.now = func() time.Time { return now }
	old, err := a.Mint(42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.Mint(43, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := a.User(old); err != nil || id != 42 { // verified and cached
		t.Fatalf("User before the revocation = %d, %v", id, err)
	}
	epochs[42] = now.Add(time.Second) // seckill token revoke at now
	if _, err := a.User(old); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a cached token issued before its user's epoch = %v, want ErrUnauthenticated", err)
	}
	a.verified = newVerified()
	if _, err := a.User(old); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("an uncached token issued before its user's epoch = %v, want ErrUnauthenticated", err)
	}
	if id, err := a.User(other); err != nil || id != 43 {
		t.Fatalf("another user's token = %d, %v; want it untouched", id, err)
	}
	now = now.Add(time.Second)
	fresh, err := a.Mint(42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := a.User(fresh); err != nil || id != 42 {
		t.Fatalf("a token issued at the epoch = %d, %v; want accepted", id, err)
	}
}
