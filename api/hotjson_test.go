package api

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"
)

// The hot path's hand-written answers are what encoding/json writes.
func TestHotAnswersAreTheEncodedOnes(t *testing.T) {
	rid := uuid.MustParse("019c8d22-7600-7fa6-9307-6126afbc703b")
	want := mustEncode(map[string]any{"code": "QUEUED", "reservation_id": rid, "message": queuedMessage,
		"status_url": fmt.Sprintf("/v1/activities/%d/skus/%d/reservations/%s", int64(900000000000000001), int64(-3), rid)})
	if got := queuedBody(900000000000000001, -3, rid); string(got) != string(want) {
		t.Errorf("queued\n got %s\nwant %s", got, want)
	}
	var e apiError
	if err := json.Unmarshal(soldOutBody, &e); err != nil || e.Code != "SOLD_OUT" || e.Message != "sold out" {
		t.Errorf("sold out body %s: %+v %v", soldOutBody, e, err)
	}
}
