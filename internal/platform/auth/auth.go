// Package auth authenticates the callers of the HTTP API: users by HMAC-signed
// bearer tokens (JWT, HS256) that carry their user id, admins by a separate
// admin credential.
//
// A user token must name this API as its audience, carry iat and exp, live no
// longer than the configured maximum, and be signed by a key version the
// gateway holds (its kid header): keys rotate by adding a version, signing
// with it, and dropping the old one once its tokens expired.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issuer is the "iss" of every token seckill mints and accepts.
const Issuer = "seckill"

// Audience is the "aud" a user token must name.
const Audience = "seckill-api"

// ErrUnauthenticated is returned for every bad credential; the reason is kept
// out of the client's answer (it is logged) so tokens cannot be probed.
var ErrUnauthenticated = errors.New("unauthenticated")

// Options configure an Authenticator.
type Options struct {
	// Keys are the HS256 keys by version (each at least 32 bytes); Current
	// signs new tokens, every version verifies.
	Keys    map[int][]byte
	Current int
	// MaxTTL bounds a token's lifetime (exp - iat), minted or presented.
	MaxTTL time.Duration
	// AdminToken is the admin credential named "admin"; AdminTokens are one
	// more credential per operator (name → token), each named in the audit
	// line as "<name>:<fingerprint>".
	AdminToken  string
	AdminTokens map[string]string
	// Revocations, when set, refuses a user's tokens issued before that
	// user's epoch (checked on every request, cached tokens too).
	Revocations Revocations
}

// adminCredential is one admin token and the name audit lines give it.
type adminCredential struct {
	token []byte
	name  string
}

// Authenticator verifies and mints tokens.
type Authenticator struct {
	keys     map[int][]byte
	current  int
	maxTTL   time.Duration
	admins   []adminCredential // admins[0] is AdminToken's
	now      func() time.Time
	verified *verified
	revoked  Revocations
	// parser holds every check of a user token, built once (it is safe for
	// concurrent use: parsing reads it only).
	parser *jwt.Parser
}

// leeway is the clock skew User tolerates on exp and iat.
const leeway = 5 * time.Second

// New returns an Authenticator.
func New(o Options) (*Authenticator, error) {
	if _, ok := o.Keys[o.Current]; !ok {
		return nil, fmt.Errorf("no token key of version %d", o.Current)
	}
	for v, k := range o.Keys {
		if len(k) < 32 {
			return nil, fmt.Errorf("token key version %d must be at least 32 bytes, got %d", v, len(k))
		}
	}
	if o.MaxTTL <= 0 {
		return nil, errors.New("token maximum lifetime must be positive")
	}
	admins := []adminCredential{{[]byte(o.AdminToken), "admin"}}
	for _, name := range slices.Sorted(maps.Keys(o.AdminTokens)) {
		admins = append(admins, adminCredential{[]byte(o.AdminTokens[name]), name})
	}
	seen := map[string]bool{}
	for i, c := range admins {
		if len(c.token) < 16 {
			return nil, fmt.Errorf("admin token of %q must be at least 16 characters", c.name)
		}
		if seen[string(c.token)] {
			return nil, fmt.Errorf("admin token of %q is another operator's too: one credential per operator", c.name)
		}
		seen[string(c.token)] = true
		fp := sha256.Sum256(c.token)
		admins[i].name = c.name + ":" + hex.EncodeToString(fp[:4])
	}
	a := &Authenticator{keys: o.Keys, current: o.Current, maxTTL: o.MaxTTL, admins: admins,
		now: time.Now, verified: newVerified(), revoked: o.Revocations}
	a.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithAudience(Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(func() time.Time { return a.now() }),
		jwt.WithLeeway(leeway),
		jwt.WithStrictDecoding())
	return a, nil
}

// Mint returns a token for userID valid for ttl (at most the maximum lifetime).
func (a *Authenticator) Mint(userID int64, ttl time.Duration) (string, error) {
	if userID <= 0 {
		return "", fmt.Errorf("user id must be positive, got %d", userID)
	}
	if ttl > a.maxTTL {
		return "", fmt.Errorf("token lifetime %s is longer than the maximum %s", ttl, a.maxTTL)
	}
	now := a.now()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Issuer:    Issuer,
		Subject:   strconv.FormatInt(userID, 10),
		Audience:  jwt.ClaimStrings{Audience},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	})
	tok.Header["kid"] = strconv.Itoa(a.current)
	return tok.SignedString(a.keys[a.current])
}

// User verifies a bearer token and returns its user id. A token seen before
// and not expired yet is answered from the verified-token cache.
func (a *Authenticator) User(token string) (int64, error) {
	id, iat, ok := a.verified.get(token, a.now())
	if !ok {
		var exp time.Time
		var err error
		if id, iat, exp, err = a.verify(token); err != nil {
			return 0, err
		}
		a.verified.put(token, id, iat, exp.Add(leeway))
	}
	if a.revoked != nil {
		if nb, ok := a.revoked.NotBefore(id); ok && iat.Before(nb) {
			return 0, fmt.Errorf("%w: token of user %d issued at %s, before its revocation epoch %s",
				ErrUnauthenticated, id, iat.UTC().Format(time.RFC3339), nb.UTC().Format(time.RFC3339))
		}
	}
	return id, nil
}

// verify runs every check of a user token and returns its user, issue time
// and expiry.
func (a *Authenticator) verify(token string) (id int64, iat, exp time.Time, err error) {
	var claims jwt.RegisteredClaims
	_, err = a.parser.ParseWithClaims(token, &claims, a.key)
	if err != nil {
		return 0, time.Time{}, time.Time{}, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if claims.IssuedAt == nil {
		return 0, time.Time{}, time.Time{}, fmt.Errorf("%w: no iat", ErrUnauthenticated)
	}
	if life := claims.ExpiresAt.Sub(claims.IssuedAt.Time); life > a.maxTTL {
		return 0, time.Time{}, time.Time{}, fmt.Errorf("%w: lifetime %s longer than %s", ErrUnauthenticated, life, a.maxTTL)
	}
	id, err = strconv.ParseInt(claims.Subject, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != claims.Subject {
		return 0, time.Time{}, time.Time{}, fmt.Errorf("%w: subject %q is not a user id", ErrUnauthenticated, claims.Subject)
	}
	return id, claims.IssuedAt.Time, claims.ExpiresAt.Time, nil
}

// key picks the verification key named by the token's kid.
func (a *Authenticator) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	v, err := strconv.Atoi(kid)
	if err != nil {
		return nil, fmt.Errorf("kid %q is not a key version", kid)
	}
	k, ok := a.keys[v]
	if !ok {
		return nil, fmt.Errorf("no key of version %d", v)
	}
	return k, nil
}

// Admin reports whether token is an admin credential (constant time).
func (a *Authenticator) Admin(token string) bool {
	_, ok := a.AdminOf(token)
	return ok
}

// AdminOf names the admin credential token is ("<operator>:<fingerprint>",
// never the credential itself). Every credential is compared, in constant
// time, whichever matches.
func (a *Authenticator) AdminOf(token string) (name string, ok bool) {
	for _, c := range a.admins {
		if subtle.ConstantTimeCompare([]byte(token), c.token) == 1 {
			name, ok = c.name, true
		}
	}
	return name, ok
}

// AdminName names the credential of Options.AdminToken in audit logs.
func (a *Authenticator) AdminName() string { return a.admins[0].name }
