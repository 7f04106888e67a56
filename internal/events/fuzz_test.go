package events

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDecodeOrderCreateRequested: no body panics the decoder, and a message
// it accepts is valid and hashes the same after a round trip.
func FuzzDecodeOrderCreateRequested(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"event_type":"ORDER_CREATE_REQUESTED","message_id":"1a2b3c4d-5e6f-8a7b-9c8d-0e1f2a3b4c5d","message_key":"8f1d0c2a-1b2c-8d3e-8f40-5a6b7c8d9e0f","request_id":"019c8d22-7600-7fa6-9307-6126afbc703b","reservation_id":"8f1d0c2a-1b2c-8d3e-8f40-5a6b7c8d9e0f","activity_id":1,"sku_id":2,"user_id":3,"reserved_at":"2026-11-30T09:00:00Z","business_deadline":"2026-11-30T09:05:00Z"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Add([]byte(`{"schema_version":2}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := DecodeOrderCreateRequested(body)
		if err != nil {
			return
		}
		if m.Validate() != nil {
			t.Fatal("decoder accepted an invalid message")
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := DecodeOrderCreateRequested(again)
		if err != nil || !bytes.Equal(m.BusinessBytes(), m2.BusinessBytes()) {
			t.Fatalf("round trip changed the business payload: %v", err)
		}
	})
}
