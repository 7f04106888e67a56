package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/google/uuid"
)

// The two answers of the hot path are written without reflection: the sold
// out answer is one constant, the queued one is appended into one buffer.
// Both are byte for byte what encoding/json writes for them
// (TestHotAnswersAreTheEncodedOnes).

// soldOutBody is the 409 SOLD_OUT answer.
var soldOutBody = mustEncode(apiError{Code: "SOLD_OUT", Message: "sold out"})

func mustEncode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

const queuedMessage = "accepted; the order is being created"

// queuedBody is the 202 QUEUED answer: the keys in encoding/json's map order
// (sorted); no value needs escaping (digits, a UUID's hex and dashes, fixed
// ASCII text).
func queuedBody(activityID, skuID int64, rid uuid.UUID) []byte {
	id := rid.String()
	b := make([]byte, 0, 224)
	b = append(b, `{"code":"QUEUED","message":"`+queuedMessage+`","reservation_id":"`...)
	b = append(b, id...)
	b = append(b, `","status_url":"/v1/activities/`...)
	b = strconv.AppendInt(b, activityID, 10)
	b = append(b, "/skus/"...)
	b = strconv.AppendInt(b, skuID, 10)
	b = append(b, "/reservations/"...)
	b = append(b, id...)
	return append(b, "\"}\n"...)
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	w.WriteHeader(status)
	_, _ = w.Write(body) // #nosec G705 -- body is this package's own JSON (constants, integers and a UUID), never request input
}
