package paysim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Callback header names (Standard Webhooks).
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// DefaultTolerance is the timestamp tolerance Verify uses when given zero.
const DefaultTolerance = 5 * time.Minute

// Verification errors; Verify's errors match exactly one of them with errors.Is.
var (
	ErrMissingHeaders = errors.New("paysim: missing webhook headers")
	ErrStaleTimestamp = errors.New("paysim: stale or future timestamp")
	ErrBadSignature   = errors.New("paysim: bad webhook signature")
)

// Sign returns the webhook-signature header value "v1,<base64 HMAC-SHA256>"
// over "<id>.<unix seconds of ts>.<body>".
func Sign(secret []byte, id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(secret, id, strconv.FormatInt(ts.Unix(), 10), body))
}

func mac(secret []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a callback: all three headers are present, the timestamp
// (unix seconds) is within ±tolerance of now (DefaultTolerance if tolerance
// is not positive), and at least one of the space-separated "v1,<sig>"
// signatures matches, compared in constant time. The signed content uses the
// timestamp header exactly as received.
func Verify(secret []byte, id, tsHeader, sigHeader string, body []byte, now time.Time, tolerance time.Duration) error {
	if id == "" || tsHeader == "" || sigHeader == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(tsHeader, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: unparseable timestamp %q", ErrStaleTimestamp, tsHeader)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrStaleTimestamp
	}
	if len(secret) == 0 {
		return fmt.Errorf("%w: empty secret", ErrBadSignature)
	}
	want := mac(secret, id, tsHeader, body)
	for _, s := range strings.Fields(sigHeader) {
		ver, b64, ok := strings.Cut(s, ",")
		if !ok || ver != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrBadSignature
}

// VerifyHeaders is Verify reading the three webhook headers from h.
func VerifyHeaders(secret []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	return Verify(secret, h.Get(HeaderWebhookID), h.Get(HeaderWebhookTimestamp), h.Get(HeaderWebhookSignature), body, now, tolerance)
}
