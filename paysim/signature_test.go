package paysim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestSignFormat(t *testing.T) {
	ts := time.Unix(1700000000, 999)
	body := []byte(`{"a":1}`)
	m := hmac.New(sha256.New, testSecret)
	m.Write([]byte("evt_1.1700000000." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	if got := Sign(testSecret, "evt_1", ts, body); got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
}

func TestVerify(t *testing.T) {
	now := time.Unix(1700000000, 0)
	tol := 5 * time.Minute
	body := []byte(`{"type":"payment.succeeded"}`)
	id := "evt_abc"
	sign := func(ts time.Time) (string, string) {
		return strconv.FormatInt(ts.Unix(), 10), Sign(testSecret, id, ts, body)
	}
	tsNow, sigNow := sign(now)
	tsOld, sigOld := sign(now.Add(-tol - time.Second))
	tsEdge, sigEdge := sign(now.Add(-tol))
	tsFut, sigFut := sign(now.Add(tol + time.Second))
	other := Sign([]byte("another-secret-0123456789abcdef0"), id, now, body)

	cases := []struct {
		name     string
		secret   []byte
		id, ts   string
		sig      string
		body     []byte
		tol      time.Duration
		want     error
		wantNone bool
	}{
		{name: "valid", id: id, ts: tsNow, sig: sigNow, body: body, wantNone: true},
		{name: "valid at the tolerance edge", id: id, ts: tsEdge, sig: sigEdge, body: body, wantNone: true},
		{name: "non-positive tolerance means default", id: id, ts: tsEdge, sig: sigEdge, body: body, tol: -1, wantNone: true},
		{name: "bad signature", id: id, ts: tsNow, sig: "v1," + base64.StdEncoding.EncodeToString([]byte("nope")), body: body, want: ErrBadSignature},
		{name: "other secret", id: id, ts: tsNow, sig: other, body: body, want: ErrBadSignature},
		{name: "tampered body", id: id, ts: tsNow, sig: sigNow, body: []byte(`{"type":"payment.refunded"}`), want: ErrBadSignature},
		{name: "tampered id", id: "evt_other", ts: tsNow, sig: sigNow, body: body, want: ErrBadSignature},
		{name: "tampered timestamp", id: id, ts: strconv.FormatInt(now.Unix()+1, 10), sig: sigNow, body: body, want: ErrBadSignature},
		{name: "stale timestamp", id: id, ts: tsOld, sig: sigOld, body: body, want: ErrStaleTimestamp},
		{name: "future timestamp", id: id, ts: tsFut, sig: sigFut, body: body, want: ErrStaleTimestamp},
		{name: "unparseable timestamp", id: id, ts: "yesterday", sig: sigNow, body: body, want: ErrStaleTimestamp},
		{name: "missing id", ts: tsNow, sig: sigNow, body: body, want: ErrMissingHeaders},
		{name: "missing timestamp", id: id, sig: sigNow, body: body, want: ErrMissingHeaders},
		{name: "missing signature", id: id, ts: tsNow, body: body, want: ErrMissingHeaders},
		{name: "several signatures, one matches", id: id, ts: tsNow, sig: other + " v1,!!notbase64 " + sigNow, body: body, wantNone: true},
		{name: "several signatures, none matches", id: id, ts: tsNow, sig: other + " v1,AAAA", body: body, want: ErrBadSignature},
		{name: "right mac, unknown version", id: id, ts: tsNow, sig: "v2" + sigNow[2:], body: body, want: ErrBadSignature},
		{name: "empty secret", secret: []byte{}, id: id, ts: tsNow, sig: sigNow, body: body, want: ErrBadSignature},
	}
	sentinels := []error{ErrMissingHeaders, ErrStaleTimestamp, ErrBadSignature}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			secret := testSecret
			if tc.secret != nil {
				secret = tc.secret
			}
			tl := tol
			if tc.tol != 0 {
				tl = tc.tol
			}
			err := Verify(secret, tc.id, tc.ts, tc.sig, tc.body, now, tl)
			if tc.wantNone {
				if err != nil {
					t.Fatalf("Verify: %v, want nil", err)
				}
				return
			}
			for _, s := range sentinels {
				if errors.Is(err, s) != (s == tc.want) {
					t.Fatalf("Verify: %v; errors.Is(%v) = %v", err, s, errors.Is(err, s))
				}
			}
		})
	}

	h := http.Header{}
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, tsNow)
	h.Set(HeaderWebhookSignature, sigNow)
	if err := VerifyHeaders(testSecret, h, body, now, tol); err != nil {
		t.Fatalf("VerifyHeaders: %v", err)
	}
}
