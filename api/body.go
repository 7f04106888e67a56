package api

// Request bodies: size limits (413), media type (415) and strict JSON
// decoding (400 naming the field).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/seckill/seckill/internal/platform/jsonx"
)

// decodeOptional decodes a JSON object body if there is one.
func decodeOptional(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	return jsonx.Strict(body, v)
}

func decodeRequired(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return errors.New("a JSON object is required")
	}
	return jsonx.Strict(body, v)
}

// BodyError is a request body refused before decoding: too large (413) or
// not JSON (415).
type BodyError struct {
	Status int
	Code   string
	Msg    string
}

func (e *BodyError) Error() string { return e.Msg }

// bodyError answers a body that could not be taken: 413, 415, or 400 for
// anything the JSON decoder refused.
func bodyError(w http.ResponseWriter, err error) {
	var be *BodyError
	if errors.As(err, &be) {
		writeError(w, be.Status, apiError{Code: be.Code, Field: "body", Message: be.Msg})
		return
	}
	invalid(w, "body", err.Error())
}

// readBody reads at most limit bytes; a non-empty body must be declared
// application/json.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, &BodyError{http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", fmt.Sprintf("larger than %d bytes", limit)}
	case err != nil:
		return nil, fmt.Errorf("could not be read: %v", err)
	}
	if len(bytes.TrimSpace(body)) > 0 && !isJSON(r.Header.Get("Content-Type")) {
		return nil, &BodyError{http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE",
			fmt.Sprintf("Content-Type %q: the body must be application/json", r.Header.Get("Content-Type"))}
	}
	return body, nil
}

// isJSON reports whether a Content-Type is application/json (any charset
// parameter is allowed; the body is decoded as UTF-8 JSON).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}
