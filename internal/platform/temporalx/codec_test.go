package temporalx

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

type sagaLike struct {
	UserID string
	Reason string
}

func mustCodec(t *testing.T, current int, keys map[int][]byte) *Codec {
	t.Helper()
	c, err := NewCodec(current, keys)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The data converter's payloads carry no plaintext and decode to the value.
func TestCodecRoundTrip(t *testing.T) {
	c := mustCodec(t, 1, map[int][]byte{1: testKey(1)})
	in := sagaLike{UserID: "user-4711-secret", Reason: "changed my mind"}
	p, err := c.DataConverter().ToPayload(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(p.Metadata[converter.MetadataEncoding]); got != EncodingEncrypted {
		t.Fatalf("encoding %q, want %q", got, EncodingEncrypted)
	}
	if got := string(p.Metadata[MetadataKeyID]); got != "1" {
		t.Fatalf("key id %q, want 1", got)
	}
	if bytes.Contains(p.Data, []byte("user-4711")) || bytes.Contains(p.Data, []byte("json/plain")) {
		t.Fatalf("encrypted payload shows plaintext: %q", p.Data)
	}
	var out sagaLike
	if err := c.DataConverter().FromPayload(p, &out); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("round trip = %+v, want %+v", out, in)
	}
}

func TestCodecWrongKeyFails(t *testing.T) {
	enc := mustCodec(t, 1, map[int][]byte{1: testKey(1)})
	dec := mustCodec(t, 1, map[int][]byte{1: testKey(2)})
	ps, err := enc.Encode([]*commonpb.Payload{{Data: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dec.Decode(ps); err == nil || !strings.Contains(err.Error(), "decrypt") {
		t.Fatalf("decode with another key under the same version = %v, want a decrypt error", err)
	}
	// A payload whose key id was rewritten does not open either (the id is
	// bound as additional data).
	both := mustCodec(t, 1, map[int][]byte{1: testKey(1), 2: testKey(1)})
	ps[0].Metadata[MetadataKeyID] = []byte("2")
	if _, err := both.Decode(ps); err == nil {
		t.Fatal("a payload relabelled with another key id decoded")
	}
}

func TestCodecUnknownKeyID(t *testing.T) {
	enc := mustCodec(t, 3, map[int][]byte{3: testKey(3)})
	dec := mustCodec(t, 1, map[int][]byte{1: testKey(1)})
	ps, _ := enc.Encode([]*commonpb.Payload{{Data: []byte("x")}})
	if _, err := dec.Decode(ps); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `"3"`) {
		t.Fatalf("decode of key version 3 with only version 1 = %v, want ErrUnknownKey naming 3", err)
	}
}

// Rotation: payloads of the old key still decode once the new key encodes.
func TestCodecRotation(t *testing.T) {
	old := mustCodec(t, 1, map[int][]byte{1: testKey(1)})
	rotated := mustCodec(t, 2, map[int][]byte{1: testKey(1), 2: testKey(2)})
	oldPs, _ := old.Encode([]*commonpb.Payload{{Data: []byte("before")}})
	newPs, _ := rotated.Encode([]*commonpb.Payload{{Data: []byte("after")}})
	if got := string(newPs[0].Metadata[MetadataKeyID]); got != "2" {
		t.Fatalf("rotated codec encodes with key %q, want 2", got)
	}
	got, err := rotated.Decode(append(oldPs, newPs...))
	if err != nil {
		t.Fatal(err)
	}
	if string(got[0].Data) != "before" || string(got[1].Data) != "after" {
		t.Fatalf("decoded %q, %q", got[0].Data, got[1].Data)
	}
	if _, err := old.Decode(newPs); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("old codec on a new payload = %v, want ErrUnknownKey", err)
	}
}

// Plain payloads (recorded histories, workflows started before encryption)
// pass through Decode unchanged.
func TestCodecPassesPlainPayloads(t *testing.T) {
	c := mustCodec(t, 1, map[int][]byte{1: testKey(1)})
	plain, err := converter.GetDefaultDataConverter().ToPayload(sagaLike{UserID: "u-1"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decode([]*commonpb.Payload{plain})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != plain {
		t.Fatalf("plain payload changed: %v", got[0])
	}
	var out sagaLike
	if err := c.DataConverter().FromPayload(plain, &out); err != nil || out.UserID != "u-1" {
		t.Fatalf("plain payload through the codec converter = %+v, %v", out, err)
	}
}

func TestNewCodecRefusesBadKeys(t *testing.T) {
	if _, err := NewCodec(1, map[int][]byte{1: testKey(1)[:16]}); err == nil || !strings.Contains(err.Error(), "32") {
		t.Fatalf("16-byte key = %v", err)
	}
	if _, err := NewCodec(2, map[int][]byte{1: testKey(1)}); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("missing current version = %v", err)
	}
}

// The codec server answers the UI's CORS preflight for its origin only.
func TestCodecHandlerCORS(t *testing.T) {
	h := CodecHandler(mustCodec(t, 1, map[int][]byte{1: testKey(1)}), "http://127.0.0.1:8233")
	for origin, want := range map[string]string{"http://127.0.0.1:8233": "http://127.0.0.1:8233", "http://evil.example": ""} {
		req := httptest.NewRequest(http.MethodOptions, "/decode", nil)
		req.Header.Set("Origin", origin)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get("Access-Control-Allow-Origin"); got != want || rec.Code != http.StatusNoContent {
			t.Errorf("preflight from %s: %d, allow-origin %q, want %q", origin, rec.Code, got, want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/decode", strings.NewReader(`{"payloads":[{"metadata":{"encoding":"YmluYXJ5L2VuY3J5cHRlZA==","encryption-key-id":"OQ=="},"data":"AAAA"}]}`)))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "not held") {
		t.Errorf("decode with an unknown key id: %d %s", rec.Code, rec.Body.String())
	}
}
