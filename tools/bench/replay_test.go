package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// sampleRecording is a made-up recording (not CreateOrder's: the
// integration tests record that) with one argument of every kind.
func sampleRecording() Recording {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mid := uuid.MustParse("0b7e9c3a-1111-4222-8333-444455556666")
	rid := uuid.MustParse("7c0de000-aaaa-4bbb-8ccc-dddddddddddd")
	return Recording{ActivityID: 42, SKUID: 1, UserID: 777, At: at, Statements: []Statement{
		{SQL: "begin isolation level read committed"},
		{SQL: "\n\t\tINSERT INTO t (a, b, c, d, e, f, g)\n\t\tVALUES ($1, $2, $3, $4, $5, $6, $7) -- a comment\n\t\tON CONFLICT DO NOTHING",
			Args:       []any{mid, "grp", int64(777), []byte{0xab, 0xcd}, (*uuid.UUID)(nil), at.Add(time.Hour), at.Add(-300 * time.Millisecond)},
			ParamTypes: []string{"uuid", "text", "int8", "bytea", "uuid", "timestamptz", "timestamptz"}},
		{SQL: "UPDATE sku_inventory SET n = n - 1 WHERE activity_id = $1 AND sku_id = $2", Args: []any{int64(42), int64(1)},
			ParamTypes: []string{"int8", "int8"}},
		{SQL: "UPDATE t SET k = $1, p = $2, x = $3::interval, s = 'A  B' WHERE id = $4 AND m = $5",
			Args:       []any{"OCCUPY:" + rid.String(), []byte(`{"id":"` + rid.String() + `","n":"it's"}`), "15 minutes", &rid, [16]byte(mid)},
			ParamTypes: []string{"text", "jsonb", "interval", "uuid", "uuid"}},
		{SQL: "commit"},
	}}
}

func TestReplayRendersRecordedStatements(t *testing.T) {
	text, err := sampleRecording().ReplayText()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	want := []string{
		`\set uid random(1, 9000000000000000000)`,
		`\set r random(1, 9000000000000000000)`,
		`BEGIN ISOLATION LEVEL READ COMMITTED;`,
		// the same uuid is the same expression; the user is :uid; times are
		// offsets from the recording's time; a typed NULL; the comment is gone.
		`INSERT INTO t (a, b, c, d, e, f, g) VALUES (md5(:r::text || 'a')::uuid, 'grp'::text, :uid, '\xabcd'::bytea, NULL::uuid, ` +
			`clock_timestamp() + interval '3600 seconds', clock_timestamp()) ON CONFLICT DO NOTHING;`,
		`UPDATE sku_inventory SET n = n - 1 WHERE activity_id = 42 AND sku_id = 1;`,
		// uuids inside strings (a ledger key, a JSON payload) are the ids' text;
		// the code's own cast ($3::interval) is kept; whitespace in a literal too.
		`UPDATE t SET k = (E'OCCUPY\x3a' || md5(:r::text || 'b')::uuid::text), ` +
			`p = (E'{"id"\x3a"' || md5(:r::text || 'b')::uuid::text || E'","n"\x3a"it\'s"}')::jsonb, x = '15 minutes'::interval, ` +
			`s = 'A  B' WHERE id = md5(:r::text || 'b')::uuid AND m = md5(:r::text || 'a')::uuid;`,
		`END;`,
	}
	if got := lines[2:]; !slices.Equal(got, want) {
		t.Errorf("script\n got %q\nwant %q", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(lines[0], "-- ") || !strings.HasPrefix(lines[1], "-- ") {
		t.Errorf("no comment header: %q", lines[:2])
	}
}

// A single autocommit statement (CreateOrder's function call) is replayed
// as it is: no BEGIN, no END.
func TestReplayOfOneAutocommitStatement(t *testing.T) {
	r := sampleRecording()
	r.Statements = r.Statements[1:2]
	text, err := r.ReplayText()
	if err != nil {
		t.Fatal(err)
	}
	got := scriptStatements(text)
	if len(got) != 1 || !strings.HasPrefix(got[0], "INSERT INTO t (a, b, c, d, e, f, g) VALUES (md5(:r::text || 'a')::uuid") {
		t.Errorf("script %q", got)
	}
}

func TestReplayRefusesWhatItCannotReplay(t *testing.T) {
	for name, mutate := range map[string]func(*Recording){
		"nothing":       func(r *Recording) { r.Statements = nil },
		"no commit":     func(r *Recording) { r.Statements = r.Statements[:len(r.Statements)-1] },
		"two begins":    func(r *Recording) { r.Statements[1] = Statement{SQL: "BEGIN"} },
		"pgbench colon": func(r *Recording) { r.Statements[1].SQL = "SELECT 'a:b', $1" },
		"missing arg":   func(r *Recording) { r.Statements[1].SQL = "SELECT $9" },
		"unknown type":  func(r *Recording) { r.Statements[1].Args[1] = struct{}{} },
		"open quote":    func(r *Recording) { r.Statements[1].SQL = "SELECT 'x" },
	} {
		r := sampleRecording()
		mutate(&r)
		if _, err := r.ReplayText(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// scriptStatements are a script's statement lines (no comments, no
// meta-commands).
func scriptStatements(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l != "" && !strings.HasPrefix(l, "--") && !strings.HasPrefix(l, `\`) {
			out = append(out, l)
		}
	}
	return out
}
