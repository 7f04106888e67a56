// Package auth authenticates the callers of the HTTP API: users by HMAC-signed
// bearer tokens (JWT, HS256) that carry their user id, admins by a separate
// admin credential.
package auth

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issuer is the "iss" of every token seckill mints and accepts.
const Issuer = "seckill"

// ErrUnauthenticated is returned for every bad credential; the reason is kept
// out of the client's answer (it is logged) so tokens cannot be probed.
var ErrUnauthenticated = errors.New("unauthenticated")

// Authenticator verifies and mints tokens.
type Authenticator struct {
	secret     []byte
	adminToken []byte
	now        func() time.Time
}

// New returns an Authenticator with the token signing secret and the admin credential.
func New(secret []byte, adminToken string) (*Authenticator, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("token secret must be at least 32 bytes, got %d", len(secret))
	}
	if len(adminToken) < 16 {
		return nil, fmt.Errorf("admin token must be at least 16 characters")
	}
	return &Authenticator{secret: secret, adminToken: []byte(adminToken), now: time.Now}, nil
}

// Mint returns a token for userID valid for ttl.
func (a *Authenticator) Mint(userID int64, ttl time.Duration) (string, error) {
	if userID <= 0 {
		return "", fmt.Errorf("user id must be positive, got %d", userID)
	}
	now := a.now()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Issuer:    Issuer,
		Subject:   strconv.FormatInt(userID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	})
	return tok.SignedString(a.secret)
}

// User verifies a bearer token and returns its user id.
func (a *Authenticator) User(token string) (int64, error) {
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return a.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(a.now),
		jwt.WithLeeway(5*time.Second))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	id, err := strconv.ParseInt(claims.Subject, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: subject %q is not a user id", ErrUnauthenticated, claims.Subject)
	}
	return id, nil
}

// Admin reports whether token is the admin credential (constant time).
func (a *Authenticator) Admin(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), a.adminToken) == 1
}
