package paysim

import (
	"bytes"
	"strconv"
	"testing"
	"time"
)

// FuzzVerify: a signature verifies only for the exact id, timestamp and body
// it was made for; no header value panics the verifier.
func FuzzVerify(f *testing.F) {
	secret := bytes.Repeat([]byte{3}, 32)
	now := time.Unix(1_800_000_000, 0)
	f.Add("msg_1", strconv.FormatInt(now.Unix(), 10), Sign(secret, "msg_1", now, []byte(`{"a":1}`)), []byte(`{"a":1}`))
	f.Add("", "", "", []byte{})
	f.Add("msg_2", "abc", "v1,!!!", []byte(`x`))
	f.Add("msg_3", "1800000000", "v1,AAAA v1,BBBB", []byte(`{}`))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		err := Verify(secret, id, ts, sig, body, now, 5*time.Minute)
		if err != nil {
			return
		}
		// Accepted: it must be our signature over exactly these bytes.
		sec, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil {
			t.Fatalf("accepted timestamp %q", ts)
		}
		want := Sign(secret, id, time.Unix(sec, 0), body)
		if !bytes.Contains([]byte(sig), []byte(want[3:])) {
			t.Fatalf("accepted signature %q for id %q ts %q body %q (want %q)", sig, id, ts, body, want)
		}
		if Verify(secret, id, ts, sig, append(append([]byte{}, body...), 'x'), now, 5*time.Minute) == nil {
			t.Fatal("the same signature verifies another body")
		}
	})
}
