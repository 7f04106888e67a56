package bench

// The replay leg's pgbench script, rendered from a recording of what one
// real CreateOrder executed (replay_record.go): the statements are the
// code's own, in its order, with every $n placeholder replaced by an SQL
// expression for the recorded argument.

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// Recording is what one orders.Store.Create executed on the "order created"
// path, statement by statement (BEGIN and COMMIT included, if it ran any).
type Recording struct {
	ActivityID int64
	SKUID      int64
	// UserID is the message's user: an integer argument equal to it is
	// rendered as the script's random :uid.
	UserID int64
	// At is when the message was built: a time argument is rendered as
	// clock_timestamp() plus its offset from At (so a deadline an hour ahead
	// stays an hour ahead of each replayed transaction).
	At         time.Time
	Statements []Statement
}

// Statement is one statement as pgx's tracer saw it.
type Statement struct {
	SQL  string
	Args []any
	// ParamTypes are PostgreSQL's types of $1, $2, ... (pgx type names such
	// as "int8", "jsonb"; "" when unknown), from a Prepare of SQL.
	ParamTypes []string
}

// ReplayText returns a pgbench script that replays the recorded statements
// in their order: one autocommit statement (CreateOrder's call of
// seckill_create_order), or a transaction begun as the code began it. The ids
// of one replayed order derive from one random number: every distinct
// recorded uuid (also inside a string, e.g. a ledger key) becomes
// md5(:r::text || '<suffix>')::uuid, the same in every statement, so no extra
// round trip is needed.
func (r Recording) ReplayText() (string, error) {
	stmts, begin := r.Statements, ""
	if n := len(stmts); n > 0 && isTxCommand(stmts[0].SQL, "begin") {
		if n < 3 || !isTxCommand(stmts[n-1].SQL, "commit") {
			return "", errors.New("replay: the recording is not one committed transaction (BEGIN ... COMMIT)")
		}
		b, err := oneLine(stmts[0].SQL)
		if err != nil {
			return "", err
		}
		stmts, begin = stmts[1:n-1], strings.ToUpper(b)+";\n"
	}
	if len(stmts) == 0 {
		return "", errors.New("replay: nothing recorded")
	}
	ids := &idNames{index: map[uuid.UUID]int{}}
	var b strings.Builder
	fmt.Fprintf(&b, "-- seckill bench order: CreateOrder's statements replayed by pgbench (activity %d, SKU %d)\n", r.ActivityID, r.SKUID)
	b.WriteString("-- recorded from one orders.Store.Create (tools/bench/replay_record.go), not written by hand\n")
	fmt.Fprintf(&b, "\\set uid random(1, %d)\n", int64(MaxPGBenchUser))
	fmt.Fprintf(&b, "\\set r random(1, %d)\n", int64(MaxPGBenchUser))
	b.WriteString(begin)
	for i, st := range stmts {
		if isTxCommand(st.SQL, "begin") || isTxCommand(st.SQL, "commit") {
			return "", fmt.Errorf("replay: statement %d %q: more than one transaction recorded", i+1, st.SQL)
		}
		line, err := r.render(st, ids)
		if err != nil {
			return "", fmt.Errorf("replay: statement %d: %w", i+1, err)
		}
		b.WriteString(line + "\n")
	}
	if begin != "" {
		b.WriteString("END;\n")
	}
	return b.String(), nil
}

// isTxCommand reports whether sql is the transaction command word (begin,
// commit), with or without options.
func isTxCommand(sql, word string) bool {
	f := strings.Fields(strings.ToLower(sql))
	return len(f) > 0 && strings.TrimSuffix(f[0], ";") == word
}

// pgbenchVariable is what pgbench would take for one of its variables: a
// colon before a name, except in a "::" cast.
var pgbenchVariable = regexp.MustCompile(`(^|[^:]):[A-Za-z0-9_]`)

// render writes st on one line with its placeholders replaced.
func (r Recording) render(st Statement, ids *idNames) (string, error) {
	if pgbenchVariable.MatchString(st.SQL) {
		return "", fmt.Errorf("%q has a colon pgbench would read as a variable", st.SQL)
	}
	sql, err := oneLine(st.SQL)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	quoted := false
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		if c == '\'' {
			quoted = !quoted
		}
		j := i + 1
		for !quoted && c == '$' && j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
			j++
		}
		if j == i+1 {
			b.WriteByte(c)
			continue
		}
		n, _ := strconv.Atoi(sql[i+1 : j])
		if n < 1 || n > len(st.Args) {
			return "", fmt.Errorf("%q: $%d but %d arguments", st.SQL, n, len(st.Args))
		}
		pgType := ""
		if n <= len(st.ParamTypes) && !strings.HasPrefix(sql[j:], "::") { // the code's own cast stays
			pgType = st.ParamTypes[n-1]
		}
		e, err := r.arg(st.Args[n-1], pgType, ids)
		if err != nil {
			return "", fmt.Errorf("$%d: %w", n, err)
		}
		b.WriteString(e)
		i = j - 1
	}
	return b.String() + ";", nil
}

// oneLine collapses the whitespace of sql outside string literals and drops
// "--" comments: pgbench reads one statement per line here.
func oneLine(sql string) (string, error) {
	var b strings.Builder
	quoted, space := false, false
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case quoted:
			quoted = c != '\''
		case c == '\'':
			quoted = true
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
			space = true
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteByte(c)
	}
	if quoted {
		return "", fmt.Errorf("%q: unterminated string literal", sql)
	}
	return strings.TrimSuffix(b.String(), ";"), nil
}

// arg renders one argument; pgType, when known, is the placeholder's type
// and is cast to unless the expression already has it.
func (r Recording) arg(v any, pgType string, ids *idNames) (string, error) {
	e, own, err := r.expr(v, pgType, ids)
	if err != nil || pgType == "" || own == pgType || (own == "int" && (pgType == "int2" || pgType == "int4" || pgType == "int8")) {
		return e, err
	}
	return e + "::" + pgType, nil
}

// expr renders v and says which type the expression already has ("" for an
// untyped literal, "int" for an integer).
func (r Recording) expr(v any, pgType string, ids *idNames) (string, string, error) {
	switch x := v.(type) {
	case nil:
		return "NULL", "", nil
	case uuid.UUID:
		return ids.expr(x), "uuid", nil
	case pgtype.UUID:
		if !x.Valid {
			return "NULL", "", nil
		}
		return ids.expr(x.Bytes), "uuid", nil
	case time.Time:
		secs := int64(x.Sub(r.At).Round(time.Second) / time.Second)
		if secs == 0 {
			return "clock_timestamp()", "timestamptz", nil
		}
		return fmt.Sprintf("clock_timestamp() + interval '%d seconds'", secs), "timestamptz", nil
	case []byte:
		if pgType == "bytea" || (pgType == "" && !json.Valid(x)) {
			return `'\x` + hex.EncodeToString(x) + `'::bytea`, "bytea", nil
		}
		e, own := ids.text(string(x)) // pgx sends []byte to json/jsonb as its text
		return e, own, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			return "NULL", "", nil
		}
		return r.expr(rv.Elem().Interface(), pgType, ids)
	case reflect.Array:
		if rv.Len() == 16 && rv.Type().Elem().Kind() == reflect.Uint8 {
			var u uuid.UUID
			reflect.Copy(reflect.ValueOf(&u).Elem(), rv)
			return ids.expr(u), "uuid", nil
		}
	case reflect.String:
		e, own := ids.text(rv.String())
		return e, own, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if rv.Int() == r.UserID {
			return ":uid", "int", nil
		}
		return strconv.FormatInt(rv.Int(), 10), "int", nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(rv.Uint(), 10), "int", nil
	case reflect.Bool:
		return strconv.FormatBool(rv.Bool()), "bool", nil
	}
	return "", "", fmt.Errorf("cannot render an argument of type %T for pgbench", v)
}

// idNames gives every distinct uuid of a recording its per-transaction
// expression, in first-seen order.
type idNames struct {
	index map[uuid.UUID]int
}

// expr is u's expression: md5 of the transaction's :r and u's suffix (a, b,
// c, ...; letters, so that :r's digits and the suffix cannot run together).
func (n *idNames) expr(u uuid.UUID) string {
	i, ok := n.index[u]
	if !ok {
		i = len(n.index)
		n.index[u] = i
	}
	suffix := ""
	for i++; i > 0; i = (i - 1) / 26 {
		suffix = string(rune('a'+(i-1)%26)) + suffix
	}
	return "md5(:r::text || '" + suffix + "')::uuid"
}

var uuidText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// text renders a string: a literal (escaped so pgbench finds no variable in
// it), where every uuid in it is its id expression as text.
func (n *idNames) text(s string) (string, string) {
	var parts []string
	last := 0
	for _, m := range uuidText.FindAllStringIndex(s, -1) {
		u, err := uuid.Parse(s[m[0]:m[1]])
		if err != nil {
			continue
		}
		if m[0] > last {
			parts = append(parts, sqlLiteral(s[last:m[0]]))
		}
		parts = append(parts, n.expr(u)+"::text")
		last = m[1]
	}
	switch {
	case len(parts) == 0:
		return sqlLiteral(s), ""
	case last < len(s):
		parts = append(parts, sqlLiteral(s[last:]))
	}
	if len(parts) == 1 {
		return parts[0], "text"
	}
	return "(" + strings.Join(parts, " || ") + ")", "text"
}

// sqlLiteral is s as a plain '...' literal, or an E'...' one when it holds a
// quote, backslash, colon or newline.
func sqlLiteral(s string) string {
	if strings.ContainsAny(s, "'\\:\n") {
		return pgEscapedLiteral(s)
	}
	return "'" + s + "'"
}
