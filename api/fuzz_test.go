package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/reservation"
)

// FuzzParseID: an id is accepted only in canonical decimal, and then it
// round-trips.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"1", "42", "+1", "01", "-1", "0", "9223372036854775807", "9223372036854775808", " 7", "1e3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := api.ParseID(s)
		if ok && (v <= 0 || strconv.FormatInt(v, 10) != s) {
			t.Fatalf("ParseID(%q) = %d accepted a non-canonical id", s, v)
		}
	})
}

// FuzzReserveRequest: whatever the body, content type, key and path ids,
// the gateway answers a documented 2xx/4xx (never a 5xx, never a panic)
// and calls the reserver only for a well-formed request.
func FuzzReserveRequest(f *testing.F) {
	key := uuid.NewString()
	f.Add("11", "22", key, "application/json", "")
	f.Add("11", "22", "", "application/json", `{"request_id":"`+key+`"}`)
	f.Add("+11", "022", key, "text/plain", `{"request_id":5}`)
	f.Add("11", "22", "{"+key+"}", "application/json", `{"request_id":"`+key+`"} {}`)
	f.Add("11", "22", key, "application/json; charset=utf-8", `[]`)
	a := newAuth(f)
	tok := mint(f, a, testUser, time.Hour)
	res := &fakeReserver{res: reservation.Result{Code: reservation.Queued, ReservationID: uuid.New()}}
	h := api.NewRouter(api.Deps{Auth: a, Reserver: res, Status: &fakeStatus{}})
	f.Fuzz(func(t *testing.T, activity, sku, idemKey, contentType, body string) {
		req, err := http.NewRequest(http.MethodPost, "/v1/activities/"+activity+"/skus/"+sku+"/reservations", nil)
		if err != nil || strings.ContainsAny(req.URL.RequestURI(), " \t\r\n") {
			t.Skip() // not a request line a client could send (a space left in the query by a "?" id)
		}
		rec := serve(h, req.Method, req.URL.RequestURI(), hdr("Authorization", "Bearer "+tok, "Idempotency-Key", idemKey, "Content-Type", contentType), body)
		if rec.Code >= 500 {
			t.Fatalf("POST %s key %q type %q body %q = %d %s", req.URL, idemKey, contentType, body, rec.Code, rec.Body.String())
		}
		if rec.Code == http.StatusAccepted {
			if _, ok := api.ParseID(activity); !ok {
				t.Fatalf("accepted activity id %q", activity)
			}
		}
	})
}
