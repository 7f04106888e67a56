package state_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// unchecked are the status UPDATEs TestUpdatesFollowMoves cannot check,
// each with the reason, keyed "file func table→target" (target "?" when it
// is not a literal). An entry no UPDATE matches any more fails the test.
var unchecked = map[string]string{
	"internal/inventory/compensate.go toManual compensation_task→MANUAL": "guarded by its lease (lease_owner = $2), " +
		"which only a CLAIMED task holds (claimTask sets it, every other move clears it): CLAIMED → MANUAL",
	"internal/inventory/compensate.go finishCompensation compensation_task→APPLIED": "WHERE lease_owner = $2 OR " +
		"status = 'APPLIED': the lease holder's CLAIMED task, or one already APPLIED: both → APPLIED are listed",
	"internal/payments/intent.go OpenPayment payment_intent→?": "status = $4, OPEN or CLOSED, from CREATING or OPEN " +
		"(CREATING → OPEN/CLOSED are OpenPayment's; OPEN → OPEN/CLOSED are listed for SettleIntent)",
	"internal/payments/intent.go SettleIntent payment_intent→?": "status = $3, OPEN or CLOSED, from CREATING or OPEN " +
		"(finding: CREATING → OPEN is listed for OpenPayment only, not for SettleIntent)",
	"internal/payments/store.go payOrder payment_intent→PAID": "no status condition: the intent of the transaction that paid " +
		"is PAID whatever it said (OPEN, CLOSED: IntentMoves; finding: a CREATING intent that still names this " +
		"transaction would move CREATING → PAID, which IntentMoves does not list)",
	"internal/repairs/repairs.go Claim repair_task→?": "ON CONFLICT DO UPDATE SET status = EXCLUDED.status " +
		"WHERE EXCLUDED.status = 'PENDING': FAILED → PENDING and a stale PENDING → PENDING",
	"internal/repairs/repairs.go Finish repair_task→?": "status = $2 (APPLIED or FAILED) by repair_id, no status " +
		"condition: only the run that claimed the repair (PENDING) finishes it",
	"internal/outbox/relay.go Claim event_outbox→SENDING": "its status condition is in the candidates CTE " +
		"(PENDING, RETRY, a SENDING whose lease ran out): all → SENDING are listed",
	"internal/outbox/relay.go HandBack event_outbox→?": "CASE ... 'PENDING' ELSE 'RETRY' from SENDING " +
		"(finding: SENDING → PENDING, a first attempt handed back, is not in OutboxMoves)",
	"internal/outbox/relay.go MarkFailed event_outbox→?": "status = $3 (RETRY or MANUAL, refused otherwise) from SENDING: both listed",
}

// admitted are moves an UPDATE's WHERE lets through that its machine does
// not list, keyed "file func table from→to", each with the reason it is
// left as it is. An entry no UPDATE needs any more fails the test.
var admitted = map[string]string{}

// statusUpdate is one UPDATE of a state table's status found in the sources.
type statusUpdate struct {
	file, fn string // where: the Go func, or the SQL function ("" at a migration's top level)
	line     int
	table    string
	target   string   // "" when the SET is not a literal
	from     []string // the statuses its WHERE lets it move from (nil: none named)
	problem  string   // why it cannot be checked ("" when it can)
	stmt     string
}

func (u statusUpdate) key() string {
	t := u.target
	if t == "" {
		t = "?"
	}
	return fmt.Sprintf("%s %s %s→%s", u.file, u.fn, u.table, t)
}

// TestUpdatesFollowMoves: every UPDATE that sets a state table's status to a
// literal under a condition on its status (Go string literals of the
// module's non-test sources, and the Up sections of migrations/*.sql) moves
// only from statuses its machine allows into that target. An UPDATE whose
// target or from-statuses cannot be read (a parameter, no status condition,
// a condition this test does not parse) must be listed in unchecked with a
// reason.
func TestUpdatesFollowMoves(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(self))
	machines := map[string]column{}
	for _, c := range columns() {
		if c.table != "" {
			machines[c.table] = c
		}
	}
	updates := scanUpdates(t, root, machines)
	if len(updates) < 20 {
		t.Fatalf("found only %d status UPDATEs: the scanner is broken", len(updates))
	}
	used := map[string]bool{}
	checked := 0
	for _, u := range updates {
		m := machines[u.table]
		where := fmt.Sprintf("%s:%d (%s)", u.file, u.line, u.fn)
		if u.problem != "" {
			if _, ok := unchecked[u.key()]; ok {
				used[u.key()] = true
				continue
			}
			t.Errorf("%s: UPDATE %s cannot be checked (%s): fix it or list %q in unchecked with a reason\n\t%s", where, u.table, u.problem, u.key(), u.stmt)
			continue
		}
		if !slices.Contains(m.states, u.target) {
			t.Errorf("%s: UPDATE %s SET status = %q: not a status of %s", where, u.table, u.target, m.name)
			continue
		}
		for _, from := range u.from {
			if !slices.ContainsFunc(m.moves, func(mv move) bool { return mv.From == from && mv.To == u.target }) {
				k := fmt.Sprintf("%s %s %s %s→%s", u.file, u.fn, u.table, from, u.target)
				if _, ok := admitted[k]; ok {
					used[k] = true
					continue
				}
				t.Errorf("%s: UPDATE %s moves %s -> %s, which %s does not allow (fix the WHERE or the moves table, or list %q in admitted with a reason)\n\t%s",
					where, u.table, from, u.target, m.name, k, u.stmt)
			}
		}
		checked++
	}
	for k := range unchecked {
		if !used[k] {
			t.Errorf("unchecked lists %q, which matches no UPDATE that cannot be checked: remove it", k)
		}
	}
	for k := range admitted {
		if !used[k] {
			t.Errorf("admitted lists %q, which no UPDATE makes any more: remove it", k)
		}
	}
	t.Logf("%d status UPDATEs, %d checked against their machines", len(updates), checked)
}

// TestUpdateParser pins the parser on the shapes the sources use.
func TestUpdateParser(t *testing.T) {
	machines := map[string]column{}
	for _, c := range columns() {
		if c.table != "" {
			machines[c.table] = c
		}
	}
	cases := []struct {
		sql, table, target string
		from               []string
		problem            bool
	}{
		{`UPDATE orders SET status = 'PAID', paid_at = $2 WHERE order_id = $1 AND status IN ('CREATED', 'PAYING')`, "orders", "PAID", []string{"CREATED", "PAYING"}, false},
		{`UPDATE refund_task t SET status = 'STARTED' WHERE t.payment_id = $1 AND t.status = 'PENDING' RETURNING t.payment_id`, "refund_task", "STARTED", []string{"PENDING"}, false},
		{`UPDATE refund_task SET status = 'DONE' WHERE payment_id = $1 AND status <> 'DONE'`, "refund_task", "DONE", []string{"MANUAL", "PENDING", "STARTED"}, false},
		{`UPDATE compensation_task SET status = 'CLAIMED' WHERE task_id IN (SELECT task_id FROM compensation_task WHERE status IN ('PENDING', 'RETRY') OR (status = 'CLAIMED' AND lease_until < now()) FOR UPDATE SKIP LOCKED)`,
			"compensation_task", "CLAIMED", []string{"CLAIMED", "PENDING", "RETRY"}, false},
		{`UPDATE orders SET status = 'CANCEL_PENDING' WHERE order_id = $1 AND status IN ('CREATED') AND NOT EXISTS (SELECT 1 FROM payment_intent i WHERE i.status = 'CREATING')`, "orders", "CANCEL_PENDING", []string{"CREATED"}, false},
		{`UPDATE orders SET status = 'X' WHERE order_id IN (SELECT order_id FROM payment_record WHERE status = 'SUCCESS') AND status = 'CREATED'`, "orders", "X", []string{"CREATED"}, false},
		{`INSERT INTO payment_intent (order_id, status) VALUES ($1, 'CREATING') ON CONFLICT (order_id) DO UPDATE SET status = 'CREATING' WHERE payment_intent.status IN ('OPEN', 'CLOSED')`, "payment_intent", "CREATING", []string{"CLOSED", "OPEN"}, false},
		{`UPDATE orders SET payment_id = (SELECT payment_id FROM payment_record WHERE status = 'SUCCESS') WHERE status = 'PAID'`, "", "", nil, false}, // no status set
		{`UPDATE repair_task SET status = $2 WHERE repair_id = $1 AND status = 'PENDING'`, "repair_task", "", nil, true},
		{`UPDATE payment_intent SET status = 'PAID' WHERE order_id = $1`, "payment_intent", "PAID", nil, true},
		{`UPDATE orders SET status = 'PAID' WHERE status = ANY($1)`, "orders", "PAID", nil, true},
		{`UPDATE compensation_task SET status = 'APPLIED' WHERE task_id = $1 AND (lease_owner = $2 OR status = 'APPLIED')`, "compensation_task", "APPLIED", nil, true},
		{`UPDATE orders SET status = 'CANCEL_PENDING' WHERE status IN ('CREATED', 'PAYING') AND (NOT $2 OR expires_at <= now())`, "orders", "CANCEL_PENDING", []string{"CREATED", "PAYING"}, false},
		{`UPDATE sku_inventory SET status = 'X' WHERE status = 'Y'`, "", "", nil, false}, // not a state table
	}
	for _, c := range cases {
		got := parseUpdates(c.sql, machines)
		if c.table == "" {
			if len(got) != 0 {
				t.Errorf("%s: found %+v, want nothing", c.sql, got)
			}
			continue
		}
		if len(got) != 1 {
			t.Errorf("%s: found %d UPDATEs, want 1", c.sql, len(got))
			continue
		}
		u := got[0]
		if u.table != c.table || u.target != c.target || !slices.Equal(u.from, c.from) || (u.problem != "") != c.problem {
			t.Errorf("%s: got table %s target %q from %v problem %q; want %s %q %v problem %v", c.sql, u.table, u.target, u.from, u.problem, c.table, c.target, c.from, c.problem)
		}
	}
}

// scanUpdates finds the status UPDATEs of state tables in root's non-test Go
// files and migrations' Up sections.
func scanUpdates(t *testing.T, root string, machines map[string]column) []statusUpdate {
	t.Helper()
	var out []statusUpdate
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "vendor" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go"):
			out = append(out, scanGo(t, path, rel, machines)...)
		case strings.HasPrefix(rel, "migrations/") && strings.HasSuffix(rel, ".sql"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			up, _, _ := strings.Cut(string(b), "-- +goose Down")
			for _, u := range parseUpdates(stripSQLComments(up), machines) {
				u.file, u.line = rel, 1+strings.Count(up[:min(u.line, len(up))], "\n")
				out = append(out, u)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// scanGo parses a Go file and reads the UPDATEs of its string literals
// (a concatenation of literals is read as one; a non-literal part as "?").
func scanGo(t *testing.T, path, rel string, machines map[string]column) []statusUpdate {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", rel, err)
	}
	var out []statusUpdate
	for _, decl := range f.Decls {
		fn := ""
		if fd, ok := decl.(*ast.FuncDecl); ok {
			fn = fd.Name.Name
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			e, ok := n.(ast.Expr)
			if !ok {
				return true
			}
			s, lit := stringOf(e)
			if !lit {
				return true
			}
			for _, u := range parseUpdates(s, machines) {
				u.file, u.fn, u.line = rel, fn, fset.Position(e.Pos()).Line
				out = append(out, u)
			}
			return false
		})
	}
	return out
}

// stringOf is the value of a string literal or a + of expressions with at
// least one string literal in it.
func stringOf(e ast.Expr) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		l, lok := stringOf(x.X)
		r, rok := stringOf(x.Y)
		if !lok && !rok {
			return "", false
		}
		if !lok {
			l = "?"
		}
		if !rok {
			r = "?"
		}
		return l + r, true
	case *ast.ParenExpr:
		return stringOf(x.X)
	}
	return "", false
}

var (
	sqlComment   = regexp.MustCompile(`--[^\n]*`)
	updateWord   = regexp.MustCompile(`(?i)\bUPDATE\s+`)
	updateTable  = regexp.MustCompile(`(?i)^UPDATE\s+(?:ONLY\s+)?([a-z_][a-z0-9_]*)(?:\s+(?:AS\s+)?([a-z_][a-z0-9_]*))?\s+SET\b`)
	conflictSet  = regexp.MustCompile(`(?i)^UPDATE\s+SET\b`)
	insertTable  = regexp.MustCompile(`(?i)\bINSERT\s+INTO\s+([a-z_][a-z0-9_]*)(?:\s+AS\s+([a-z_][a-z0-9_]*))?`)
	statusWord   = regexp.MustCompile(`(?i)(?:\b([a-z_][a-z0-9_]*)\.)?\bstatus\b`)
	statusAssign = regexp.MustCompile(`(?is)^(?:[a-z_][a-z0-9_]*\.)?status\s*=\s*(.*?)\s*$`)
	literal      = regexp.MustCompile(`^'([A-Z_]+)'$`)
	statusPred   = regexp.MustCompile(`(?is)^\s*(=|<>|!=|NOT\s+IN\b|IN\b)\s*('[A-Z_]+'|\(\s*'[A-Z_]+'(?:\s*,\s*'[A-Z_]+')*\s*\))`)
	quotedWord   = regexp.MustCompile(`'([A-Z_]+)'`)
	createFunc   = regexp.MustCompile(`(?i)CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([a-z_][a-z0-9_]*)`)
	subSelect    = regexp.MustCompile(`(?is)^\s*SELECT\b.*?\bFROM\s+([a-z_][a-z0-9_]*)`)
	wordAt       = regexp.MustCompile(`(?i)^(WHERE|FROM|RETURNING)\b`)
)

func stripSQLComments(s string) string {
	// Keep offsets: blank the comments out instead of deleting them.
	return sqlComment.ReplaceAllStringFunc(s, func(c string) string { return strings.Repeat(" ", len(c)) })
}

// parseUpdates reads every UPDATE of a state table's status in sql. line is
// set to the byte offset of the UPDATE (callers turn it into a line).
func parseUpdates(sql string, machines map[string]column) []statusUpdate {
	var out []statusUpdate
	for _, loc := range updateWord.FindAllStringIndex(sql, -1) {
		rest := sql[loc[0]:]
		var table, alias string
		var setAt int
		if m := updateTable.FindStringSubmatchIndex(rest); m != nil && !strings.EqualFold(rest[m[2]:m[3]], "SET") {
			table = strings.ToLower(rest[m[2]:m[3]])
			if m[4] >= 0 {
				alias = strings.ToLower(rest[m[4]:m[5]])
			}
			setAt = m[1]
		} else if m := conflictSet.FindStringIndex(rest); m != nil {
			ins := insertTable.FindAllStringSubmatch(sql[:loc[0]], -1)
			if len(ins) == 0 {
				continue
			}
			last := ins[len(ins)-1]
			table, alias = strings.ToLower(last[1]), strings.ToLower(last[2])
			setAt = m[1]
		} else {
			continue
		}
		m, ok := machines[table]
		if !ok {
			continue
		}
		// The SET list and the WHERE clause, at this statement's depth.
		setList, whereClause := clauses(rest[setAt:])
		target, found, dynamic := "", false, false
		for _, item := range splitTop(setList) {
			a := statusAssign.FindStringSubmatch(strings.TrimSpace(item))
			if a == nil {
				continue
			}
			found = true
			if l := literal.FindStringSubmatch(a[1]); l != nil {
				target = l[1]
			} else {
				dynamic = true
			}
		}
		if !found {
			continue
		}
		u := statusUpdate{table: table, target: target, line: loc[0], stmt: oneLine(rest[:min(len(rest), setAt+len(setList)+len(whereClause)+8)])}
		if fn := createFunc.FindAllStringSubmatch(sql[:loc[0]], -1); len(fn) > 0 {
			u.fn = fn[len(fn)-1][1]
		}
		if dynamic {
			u.problem = "its SET status is not a literal"
			out = append(out, u)
			continue
		}
		if mixedOr(whereClause, table, alias) {
			u.problem = "an OR with a branch that does not name its status: it moves from more than the named statuses"
			out = append(out, u)
			continue
		}
		from, problem := fromStates(whereClause, table, alias, m.states)
		u.from, u.problem = from, problem
		out = append(out, u)
	}
	return out
}

// clauses splits what follows SET into the SET list and the WHERE clause
// (up to RETURNING, the statement's end or the parenthesis that closes it).
func clauses(s string) (set, where string) {
	depth, setEnd, whereAt := 0, -1, -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return cut(s, setEnd, whereAt, i)
			}
		case ';':
			if depth == 0 {
				return cut(s, setEnd, whereAt, i)
			}
		case '\'':
			if j := strings.IndexByte(s[i+1:], '\''); j >= 0 {
				i += j + 1
			}
		default:
			if depth != 0 || (i > 0 && isWord(s[i-1])) {
				continue
			}
			if w := wordAt.FindString(s[i:]); w != "" {
				switch strings.ToUpper(w) {
				case "WHERE":
					if whereAt < 0 {
						if setEnd < 0 {
							setEnd = i
						}
						whereAt = i + len(w)
					}
				case "FROM":
					if setEnd < 0 {
						setEnd = i
					}
				case "RETURNING":
					return cut(s, setEnd, whereAt, i)
				}
			}
		}
	}
	return cut(s, setEnd, whereAt, len(s))
}

func cut(s string, setEnd, whereAt, end int) (string, string) {
	if setEnd < 0 {
		return s[:end], ""
	}
	if whereAt < 0 {
		return s[:setEnd], ""
	}
	return s[:setEnd], s[whereAt:end]
}

func isWord(c byte) bool {
	return c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// splitTop splits a SET list at its top-level commas.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case '\'':
			if j := strings.IndexByte(s[i+1:], '\''); j >= 0 {
				i += j + 1
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// fromStates reads the statuses a WHERE clause lets the row move from: the
// union of the table's status conditions (= / IN: those listed; <> / NOT IN:
// all but those), skipping conditions on another table's status (qualified
// by another name, or inside a subquery of another table).
func fromStates(where, table, alias string, states []string) ([]string, string) {
	var pos, neg []string
	for _, m := range statusWord.FindAllStringSubmatchIndex(where, -1) {
		if m[2] >= 0 {
			q := strings.ToLower(where[m[2]:m[3]])
			if q != table && q != alias {
				continue // another table's status
			}
		} else if sub := enclosingSelect(where, m[0]); sub != "" && sub != table {
			continue // a subquery's status, of another table
		}
		p := statusPred.FindStringSubmatch(where[m[1]:])
		if p == nil {
			return nil, "a status condition it cannot read: " + oneLine(where[m[0]:min(len(where), m[1]+30)])
		}
		var words []string
		for _, w := range quotedWord.FindAllStringSubmatch(p[2], -1) {
			words = append(words, w[1])
		}
		switch op := strings.ToUpper(strings.Join(strings.Fields(p[1]), " ")); op {
		case "=", "IN":
			pos = append(pos, words...)
		default:
			neg = append(neg, words...)
		}
	}
	if len(pos) == 0 && len(neg) == 0 {
		return nil, "no condition on its status: it moves from any status"
	}
	from := pos
	if len(pos) == 0 {
		from = slices.Clone(states)
	}
	from = slices.DeleteFunc(slices.Clone(from), func(s string) bool { return slices.Contains(neg, s) })
	sort.Strings(from)
	return slices.Compact(from), ""
}

// enclosingSelect is the FROM table of the innermost parenthesised SELECT
// around offset at ("" when there is none).
func enclosingSelect(s string, at int) string {
	depth := 0
	for i := at - 1; i >= 0; i-- {
		switch s[i] {
		case ')':
			depth++
		case '(':
			if depth > 0 {
				depth--
				continue
			}
			end := strings.IndexByte(s[at:], ')')
			if end < 0 {
				end = len(s) - at
			}
			if m := subSelect.FindStringSubmatch(s[i+1 : at+end]); m != nil {
				return strings.ToLower(m[1])
			}
			// Grouping parentheses: look further out.
		}
	}
	return ""
}

// mixedOr reports whether s, or a parenthesised group in it, is an OR of
// branches some of which name the table's status and some not (e.g.
// "lease_owner = $2 OR status = 'APPLIED'"): such a row moves from statuses
// the condition does not name.
func mixedOr(s, table, alias string) bool {
	var branches, groups []string
	depth, start, groupAt := 0, 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			if depth == 0 {
				groupAt = i + 1
			}
			depth++
		case ')':
			depth--
			if depth == 0 {
				groups = append(groups, s[groupAt:i])
			}
		case '\'':
			if j := strings.IndexByte(s[i+1:], '\''); j >= 0 {
				i += j + 1
			}
		case 'O', 'o':
			if depth == 0 && (i == 0 || !isWord(s[i-1])) && len(s) >= i+2 && strings.EqualFold(s[i:i+2], "OR") && (len(s) == i+2 || !isWord(s[i+2])) {
				branches = append(branches, s[start:i])
				start = i + 2
			}
		}
	}
	branches = append(branches, s[start:])
	if len(branches) > 1 {
		named := 0
		for _, b := range branches {
			if namesStatus(b, table, alias) {
				named++
			}
		}
		if named > 0 && named < len(branches) {
			return true
		}
	}
	return slices.ContainsFunc(groups, func(g string) bool { return mixedOr(g, table, alias) })
}

// namesStatus reports whether s has a condition on the table's own status.
func namesStatus(s, table, alias string) bool {
	for _, m := range statusWord.FindAllStringSubmatchIndex(s, -1) {
		if m[2] < 0 {
			return true
		}
		if q := strings.ToLower(s[m[2]:m[3]]); q == table || q == alias {
			return true
		}
	}
	return false
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
