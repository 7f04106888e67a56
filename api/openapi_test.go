package api_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"gopkg.in/yaml.v3"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/internal/reservation"
	status "github.com/seckill/seckill/state"
)

var ecmaUnicode = regexp.MustCompile(`\\u([0-9A-Fa-f]{4})`)

// doc is the parsed openapi.yaml with a small JSON Schema checker, enough to
// hold every answer of the router to the schema the document gives for it.
type doc struct{ root map[string]any }

func loadDoc(t testing.TB) *doc {
	t.Helper()
	var root map[string]any
	if err := yaml.Unmarshal(api.OpenAPI, &root); err != nil {
		t.Fatalf("openapi.yaml is not YAML: %v", err)
	}
	return &doc{root: root}
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// ref resolves a local JSON pointer such as #/components/schemas/Error.
func (d *doc) ref(ref string) (map[string]any, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("non-local $ref %q", ref)
	}
	var cur any = d.root
	for _, part := range strings.Split(ref[2:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m := obj(cur)
		if m == nil {
			return nil, fmt.Errorf("$ref %q: %q is not inside an object", ref, part)
		}
		var ok bool
		if cur, ok = m[part]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve (no %q)", ref, part)
		}
	}
	if obj(cur) == nil {
		return nil, fmt.Errorf("$ref %q is not an object", ref)
	}
	return obj(cur), nil
}

// deref follows $ref chains of an object (responses, parameters, schemas).
func (d *doc) deref(m map[string]any) (map[string]any, error) {
	for i := 0; m != nil && m["$ref"] != nil; i++ {
		if i > 10 {
			return nil, fmt.Errorf("$ref loop")
		}
		var err error
		if m, err = d.ref(m["$ref"].(string)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (d *doc) paths() map[string]any { return obj(d.root["paths"]) }

// operation returns the operation object of a path template and method.
func (d *doc) operation(pattern, method string) map[string]any {
	return obj(obj(d.paths()[pattern])[strings.ToLower(method)])
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func num(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case int, int64:
		return "integer"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func equalJSON(a, b any) bool {
	if x, ok := num(a); ok {
		y, ok := num(b)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

// validate checks v (decoded JSON) against schema; it knows the keywords the
// document uses and reports an unknown one, so the checker cannot silently
// pass a schema it does not understand.
func (d *doc) validate(schema map[string]any, v any, at string) []string {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, at+": "+fmt.Sprintf(f, a...)) }
	if r, ok := schema["$ref"].(string); ok {
		s, err := d.ref(r)
		if err != nil {
			return []string{at + ": " + err.Error()}
		}
		errs = append(errs, d.validate(s, v, at)...)
	}
	for k, kv := range schema {
		switch k {
		case "$ref", "description", "summary", "examples", "example", "default", "title", "discriminator", "format":
		case "allOf":
			for i, s := range kv.([]any) {
				errs = append(errs, d.validate(obj(s), v, fmt.Sprintf("%s(allOf %d)", at, i))...)
			}
		case "oneOf", "anyOf":
			n := 0
			var why []string
			for _, s := range kv.([]any) {
				e := d.validate(obj(s), v, at)
				if len(e) == 0 {
					n++
				}
				why = append(why, e...)
			}
			if (k == "oneOf" && n != 1) || (k == "anyOf" && n == 0) {
				bad("%s matched %d alternatives: %v", k, n, why)
			}
		case "not":
			if len(d.validate(obj(kv), v, at)) == 0 {
				bad("matches the schema it must not match: %v", kv)
			}
		case "const":
			if !equalJSON(kv, v) {
				bad("= %v, want const %v", v, kv)
			}
		case "enum":
			if !slices.ContainsFunc(kv.([]any), func(e any) bool { return equalJSON(e, v) }) {
				bad("= %v, not in enum %v", v, kv)
			}
		case "type":
			want := []string{}
			switch tv := kv.(type) {
			case string:
				want = append(want, tv)
			case []any:
				for _, x := range tv {
					want = append(want, x.(string))
				}
			}
			got := jsonType(v)
			if !slices.Contains(want, got) && !(got == "integer" && slices.Contains(want, "number")) {
				bad("is %s, want %v", got, want)
			}
		case "required":
			m, ok := v.(map[string]any)
			for _, name := range kv.([]any) {
				if _, has := m[name.(string)]; ok && !has {
					bad("lacks required %q", name)
				}
			}
		case "properties":
			if m, ok := v.(map[string]any); ok {
				for name, ps := range obj(kv) {
					if pv, has := m[name]; has {
						errs = append(errs, d.validate(obj(ps), pv, at+"."+name)...)
					}
				}
			}
		case "additionalProperties":
			if m, ok := v.(map[string]any); ok && kv == false {
				for name := range m {
					if _, known := obj(schema["properties"])[name]; !known {
						bad("has undocumented property %q", name)
					}
				}
			}
		case "items":
			for i, x := range asSlice(v) {
				errs = append(errs, d.validate(obj(kv), x, fmt.Sprintf("%s[%d]", at, i))...)
			}
		case "minItems", "maxItems":
			if a, ok := v.([]any); ok {
				n, _ := num(kv)
				if (k == "minItems" && float64(len(a)) < n) || (k == "maxItems" && float64(len(a)) > n) {
					bad("has %d items, %s %v", len(a), k, kv)
				}
			}
		case "minimum", "maximum":
			if x, ok := num(v); ok {
				n, _ := num(kv)
				if (k == "minimum" && x < n) || (k == "maximum" && x > n) {
					bad("= %v, %s %v", x, k, kv)
				}
			}
		case "minLength", "maxLength":
			if s, ok := v.(string); ok {
				n, _ := num(kv)
				l := float64(utf8.RuneCountInString(s)) // JSON Schema counts characters
				if (k == "minLength" && l < n) || (k == "maxLength" && l > n) {
					bad("length %v, %s %v", l, k, kv)
				}
			}
		case "pattern":
			// ECMA-262 \uXXXX escapes are RE2's \x{XXXX}.
			re, err := regexp.Compile(ecmaUnicode.ReplaceAllString(kv.(string), `\x{$1}`))
			if err != nil {
				bad("pattern %q does not compile: %v", kv, err)
			} else if s, ok := v.(string); ok && !re.MatchString(s) {
				bad("= %q, does not match %s", s, kv)
			}
		default:
			bad("schema keyword %q unknown to the test's checker", k)
		}
	}
	if s, ok := v.(string); ok {
		switch schema["format"] {
		case "uuid":
			if !uuidRE.MatchString(s) {
				bad("%q is not a uuid", s)
			}
		case "date-time":
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				bad("%q is not a date-time", s)
			}
		}
	}
	return errs
}

func asSlice(v any) []any { a, _ := v.([]any); return a }

// conform checks that an answer of router to (method, path) is documented:
// its status is listed for the operation (or it is the generic 404/405), its
// Content-Type is the documented one, and a JSON body fits the schema.
func (d *doc) conform(t testing.TB, router http.Handler, method, path string, rec *httptest.ResponseRecorder) {
	t.Helper()
	mux := router.(*chi.Mux)
	pattern := mux.Find(chi.NewRouteContext(), method, path)
	if d.operation(pattern, method) == nil && (rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed) {
		pattern = "" // e.g. the mount point /v1 itself: routed to the generic answers
	}
	var resp map[string]any
	var err error
	switch {
	case pattern == "" && rec.Code == http.StatusNotFound:
		resp, err = d.ref("#/components/responses/NotFound")
	case pattern == "" && rec.Code == http.StatusMethodNotAllowed:
		resp, err = d.ref("#/components/responses/MethodNotAllowed")
	case pattern == "":
		t.Fatalf("%s %s: no route, yet status %d", method, path, rec.Code)
	default:
		op := d.operation(pattern, method)
		if op == nil {
			t.Fatalf("%s %s (route %s) is not in openapi.yaml", method, path, pattern)
		}
		resp = obj(obj(op["responses"])[strconv.Itoa(rec.Code)])
		if resp == nil {
			t.Fatalf("%s %s answered %d, which openapi.yaml does not list for %s %s", method, path, rec.Code, method, pattern)
		}
		resp, err = d.deref(resp)
	}
	if err != nil {
		t.Fatal(err)
	}
	content := obj(resp["content"])
	ct, _, _ := strings.Cut(rec.Header().Get("Content-Type"), ";")
	media := obj(content[strings.TrimSpace(ct)])
	if media == nil {
		t.Fatalf("%s %s: %d with Content-Type %q; openapi.yaml lists %v", method, path, rec.Code, ct, keys(content))
	}
	if ct != "application/json" {
		return
	}
	var body any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s %s: %d body is not JSON: %v: %q", method, path, rec.Code, err, rec.Body.String())
	}
	if errs := d.validate(obj(media["schema"]), body, "body"); len(errs) > 0 {
		t.Fatalf("%s %s: %d body %s does not fit openapi.yaml:\n  %s", method, path, rec.Code, rec.Body.String(), strings.Join(errs, "\n  "))
	}
	for name := range obj(resp["headers"]) {
		if rec.Header().Get(name) == "" {
			t.Errorf("%s %s: %d lacks the documented %s header", method, path, rec.Code, name)
		}
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fullRouter is a router with every optional route present; its fakes are
// never called by the route listing.
func fullRouter(t testing.TB) http.Handler {
	t.Helper()
	return api.NewRouter(api.Deps{Auth: newAuth(t), Reserver: &fakeReserver{}, Status: &fakeStatus{}})
}

type route struct{ method, pattern string }

// routes walks the router: every method+pattern and the security its
// middlewares enforce ("userBearer", "adminBearer" or "").
func routes(t *testing.T, h http.Handler) map[route]string {
	t.Helper()
	out := map[route]string{}
	err := chi.Walk(h.(chi.Routes), func(method, pattern string, _ http.Handler, mws ...func(http.Handler) http.Handler) error {
		sec := ""
		for _, mw := range mws {
			name := runtime.FuncForPC(reflect.ValueOf(mw).Pointer()).Name()
			switch {
			case strings.Contains(name, "requireUser"):
				sec = "userBearer"
			case strings.Contains(name, "requireAdmin"):
				sec = "adminBearer"
			}
		}
		out[route{method, pattern}] = sec
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func TestOpenAPIMatchesRouter(t *testing.T) {
	d := loadDoc(t)
	if v, _ := d.root["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("openapi = %q, want 3.1.x", v)
	}
	registered := routes(t, fullRouter(t))
	if len(registered) < 6 {
		t.Fatalf("router walk found only %v", registered)
	}
	documented := map[route]map[string]any{}
	for p, item := range d.paths() {
		for _, m := range httpMethods {
			if op := obj(obj(item)[m]); op != nil {
				documented[route{strings.ToUpper(m), p}] = op
			}
		}
	}
	for r, sec := range registered {
		op, ok := documented[r]
		if !ok {
			t.Errorf("router serves %s %s; openapi.yaml does not document it", r.method, r.pattern)
			continue
		}
		var schemes []string
		for _, req := range asSlice(op["security"]) {
			schemes = append(schemes, keys(obj(req))...)
		}
		want := []string{}
		if sec != "" {
			want = []string{sec}
		}
		if !slices.Equal(schemes, want) && !(len(schemes) == 0 && len(want) == 0) {
			t.Errorf("%s %s: documented security %v, router enforces %v", r.method, r.pattern, schemes, want)
		}
	}
	for r := range documented {
		if _, ok := registered[r]; !ok {
			t.Errorf("openapi.yaml documents %s %s; the router does not serve it", r.method, r.pattern)
		}
	}
}

func TestOpenAPIOperationsAreComplete(t *testing.T) {
	d := loadDoc(t)
	paramRE := regexp.MustCompile(`\{([^}]+)\}`)
	opIDs := map[string]bool{}
	for p, item := range d.paths() {
		var inPath []string
		for _, m := range paramRE.FindAllStringSubmatch(p, -1) {
			inPath = append(inPath, m[1])
		}
		for _, m := range httpMethods {
			op := obj(obj(item)[m])
			if op == nil {
				continue
			}
			where := strings.ToUpper(m) + " " + p
			id, _ := op["operationId"].(string)
			if id == "" || opIDs[id] {
				t.Errorf("%s: operationId %q missing or not unique", where, id)
			}
			opIDs[id] = true
			// Path parameters: exactly the template's, each required.
			var declared []string
			for _, raw := range append(asSlice(obj(item)["parameters"]), asSlice(op["parameters"])...) {
				prm, err := d.deref(obj(raw))
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				if prm["in"] == "path" {
					declared = append(declared, prm["name"].(string))
					if prm["required"] != true {
						t.Errorf("%s: path parameter %v is not required", where, prm["name"])
					}
				}
			}
			sort.Strings(declared)
			sort.Strings(inPath)
			if !slices.Equal(declared, inPath) {
				t.Errorf("%s: declares path parameters %v, template has %v", where, declared, inPath)
			}
			resps := obj(op["responses"])
			if resps["500"] == nil {
				t.Errorf("%s: no 500 INTERNAL answer documented (the recoverer can give it)", where)
			}
			for status, raw := range resps {
				r, err := d.deref(obj(raw))
				if err != nil {
					t.Fatalf("%s %s: %v", where, status, err)
				}
				if r["description"] == nil {
					t.Errorf("%s %s: no description", where, status)
				}
				if status >= "400" && obj(obj(r["content"])["application/json"]) == nil {
					t.Errorf("%s %s: error answer without a JSON schema", where, status)
				}
			}
		}
	}
	// Every $ref anywhere resolves.
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := x["$ref"].(string); ok {
				if _, err := d.ref(r); err != nil {
					t.Errorf("%s: %v", at, err)
				}
			}
			for k, c := range x {
				walk(c, at+"/"+k)
			}
		case []any:
			for i, c := range x {
				walk(c, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	walk(d.root, "#")
	// Every example fits its schema.
	for p, item := range d.paths() {
		for _, m := range httpMethods {
			op := obj(obj(item)[m])
			for status, raw := range obj(op["responses"]) {
				r, _ := d.deref(obj(raw))
				for ct, media := range obj(r["content"]) {
					for name, ex := range obj(obj(media)["examples"]) {
						if errs := d.validate(obj(obj(media)["schema"]), obj(ex)["value"], "example"); len(errs) > 0 && ct == "application/json" {
							t.Errorf("%s %s %s example %s: %v", m, p, status, name, errs)
						}
					}
				}
			}
			if rb := obj(op["requestBody"]); rb != nil {
				media := obj(obj(rb["content"])["application/json"])
				for name, ex := range obj(media["examples"]) {
					if errs := d.validate(obj(media["schema"]), obj(ex)["value"], "example"); len(errs) > 0 {
						t.Errorf("%s %s request example %s: %v", m, p, name, errs)
					}
				}
			}
		}
	}
}

func TestOpenAPIErrorCodes(t *testing.T) {
	d := loadDoc(t)
	s, err := d.ref("#/components/schemas/ErrorCode")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range asSlice(s["enum"]) {
		got = append(got, c.(string))
	}
	want := []string{"INVALID_ARGUMENT", "UNAUTHENTICATED", "SOLD_OUT", "ALREADY_RESERVED", "SALE_NOT_STARTED",
		"SALE_ENDED", "UNKNOWN_SALE", "UNAVAILABLE", "NOT_FOUND", "REDIS_NEEDS_REBUILD", "BUCKETS_FIXED", "MAX_PER_USER_FIXED", "CURRENCY_FIXED", "INTERNAL",
		"METHOD_NOT_ALLOWED", "SALE_LIMIT_REACHED", "ORDER_STATE", "BAD_SIGNATURE", "INVALID_CALLBACK", "WEBHOOK_ID_REUSED", "PAYMENT_MISMATCH", "UNKNOWN_ORDER",
		"PAYLOAD_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE", "RATE_LIMITED", "PAYMENT_UNCONFIRMED", "ADMIN_FORBIDDEN"}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ErrorCode enum = %v, want %v", got, want)
	}
	for _, c := range []reservation.Code{reservation.SoldOut, reservation.AlreadyReserved, reservation.NotStarted,
		reservation.Ended, reservation.UnknownSale, reservation.SaleLimitReached} {
		if !slices.Contains(got, string(c)) {
			t.Errorf("reservation code %s is not a documented error code", c)
		}
	}
	// The QUEUED answer and the reservation view name the client-facing states.
	queued, _ := d.ref("#/components/schemas/Queued")
	if obj(obj(queued["properties"])["code"])["const"] != string(reservation.Queued) {
		t.Error("Queued.code is not the const QUEUED")
	}
	view, _ := d.ref("#/components/schemas/Reservation")
	desc := obj(obj(view["properties"])["status"])["description"].(string)
	for _, st := range status.ReservationMoves.States {
		if !strings.Contains(desc, "`"+reservation.ClientStatus(st)+"`") {
			t.Errorf("Reservation.status does not describe %s (from %s)", reservation.ClientStatus(st), st)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	h := fullRouter(t)
	rec := serve(h, http.MethodGet, "/v1/openapi.yaml", nil, "")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /v1/openapi.yaml = %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if rec.Body.String() != string(api.OpenAPI) {
		t.Fatal("served document differs from the embedded one")
	}
	loadDoc(t).conform(t, h, http.MethodGet, "/v1/openapi.yaml", rec)
}

// The validator itself: a wrong body must be caught, or every conform call
// above proves nothing.
func TestSchemaCheckerCatchesMismatches(t *testing.T) {
	d := loadDoc(t)
	queued, _ := d.ref("#/components/schemas/Queued")
	good := map[string]any{"code": "QUEUED", "reservation_id": uuid.NewString(), "message": "m", "status_url": "/x"}
	if errs := d.validate(queued, good, "b"); len(errs) != 0 {
		t.Fatalf("good body rejected: %v", errs)
	}
	for name, body := range map[string]map[string]any{
		"wrong const":  {"code": "SOLD_OUT", "reservation_id": uuid.NewString(), "message": "m", "status_url": "/x"},
		"missing":      {"code": "QUEUED", "message": "m", "status_url": "/x"},
		"bad uuid":     {"code": "QUEUED", "reservation_id": "nope", "message": "m", "status_url": "/x"},
		"wrong type":   {"code": "QUEUED", "reservation_id": uuid.NewString(), "message": 5.0, "status_url": "/x"},
		"not a string": {"code": 1.0, "reservation_id": uuid.NewString(), "message": "m", "status_url": "/x"},
	} {
		if errs := d.validate(queued, body, "b"); len(errs) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
	conflict := obj(obj(obj(obj(obj(d.operation("/v1/activities/{activity_id}/skus/{sku_id}/reservations", "POST")["responses"])["409"])["content"])["application/json"])["schema"])
	if errs := d.validate(conflict, map[string]any{"code": "ALREADY_RESERVED", "message": "m"}, "b"); len(errs) == 0 {
		t.Error("ALREADY_RESERVED without reservation_id accepted")
	}
	if errs := d.validate(conflict, map[string]any{"code": "SOLD_OUT", "message": "m"}, "b"); len(errs) != 0 {
		t.Errorf("SOLD_OUT rejected: %v", errs)
	}
	if errs := d.validate(conflict, map[string]any{"code": "SALE_ENDED", "message": "m"}, "b"); len(errs) == 0 {
		t.Error("SALE_ENDED accepted as a 409")
	}
}
