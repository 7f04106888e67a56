// Package jsonx decodes JSON request bodies the way their OpenAPI schemas
// read: a whole number is an integer however it is written, and (for
// Strict) unknown fields, nulls and trailing data are errors.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Strict decodes one JSON object into v: unknown fields, nulls, wrong
// types and trailing data are errors (encoding/json alone would take a null
// as "not sent" and quietly keep the zero value). A number written with a
// fraction or exponent that is still a whole number (7.0, 1e3) is the
// integer JSON Schema says it is.
func Strict(body []byte, v any) error {
	tdec := json.NewDecoder(bytes.NewReader(body))
	tdec.UseNumber()
	var tree any
	if err := tdec.Decode(&tree); err == nil && !tdec.More() {
		if tree == nil {
			return errors.New("must be a JSON object")
		}
		w := jsonWalk{}
		if tree = w.walk(tree, ""); w.null != "" {
			return fmt.Errorf("field %s: null is not allowed (leave the field out instead)", w.null)
		}
		if w.changed {
			if b, err := json.Marshal(tree); err == nil {
				body = b
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return errors.New("must be a JSON object")
			}
			return fmt.Errorf("field %s: wrong type, want %s", te.Field, te.Type)
		}
		return fmt.Errorf("not valid JSON: %v", err)
	}
	// Not dec.More(): it reports false for a stray '}' or ']'.
	if len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// Lenient decodes body into v as encoding/json does (unknown fields are
// ignored, for bodies a third party may extend), with whole numbers written
// as 7.0 or 1e3 taken as the integers they are.
func Lenient(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err == nil && !dec.More() {
		w := jsonWalk{nullsOK: true}
		if tree = w.walk(tree, ""); w.changed {
			if b, err := json.Marshal(tree); err == nil {
				body = b
			}
		}
	}
	return json.Unmarshal(body, v)
}

// jsonWalk finds the first null of a decoded JSON value (null is its path)
// and rewrites whole numbers written as 7.0 or 1e3 as integers.
type jsonWalk struct {
	nullsOK bool // Lenient: a null is just a value
	null    string
	changed bool
}

func (w *jsonWalk) walk(v any, at string) any {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			p := k
			if at != "" {
				p = at + "." + k
			}
			if v[k] = w.walk(v[k], p); w.null != "" {
				return v
			}
		}
	case []any:
		for i := range v {
			if v[i] = w.walk(v[i], fmt.Sprintf("%s[%d]", at, i)); w.null != "" {
				return v
			}
		}
	case json.Number:
		if n, ok := wholeNumber(string(v)); ok {
			w.changed = true
			return json.Number(n)
		}
	case nil:
		if !w.nullsOK {
			w.null = at
		}
	}
	return v
}

// wholeNumber rewrites a JSON number with a fraction or exponent as an
// integer literal if it is a whole number of at most 20 digits (anything
// longer is no int64 anyway, and a huge exponent must not cost memory).
func wholeNumber(s string) (string, bool) {
	if !strings.ContainsAny(s, ".eE") {
		return "", false
	}
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	e, err := strconv.Atoi(exp)
	if exp == "" {
		e, err = 0, nil
	}
	if err != nil || e > 20 || e < -400 || len(mant) > 400 {
		return "", false
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() || len(r.Num().String()) > 21 {
		return "", false
	}
	return r.Num().String(), true
}
