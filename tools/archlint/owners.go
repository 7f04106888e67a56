package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ownersDoc holds the table "One owner per table": each PostgreSQL table
// and the one package whose SQL writes it.
const ownersDoc = "docs/architecture.md"

var (
	// sqlWrite is a statement that writes a table (the module's SQL keeps
	// its keywords upper case and its names lower case).
	sqlWrite = regexp.MustCompile(`\b(?:INSERT INTO|UPDATE|DELETE FROM)\s+([a-z_][a-z0-9_]*)`)
	// createTable is a table a migration creates.
	createTable = regexp.MustCompile(`(?m)^CREATE TABLE ([a-z_][a-z0-9_]*)`)
	backticked  = regexp.MustCompile("`([^`]+)`")
	tableName   = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
)

// parseOwners reads the rows of the "One owner per table" table of doc: the
// first column names tables in backticks, the second starts with the
// owner's folder in backticks. Rows naming no table (Redis keys) are skipped.
func parseOwners(doc string) (map[string]string, error) {
	_, after, ok := strings.Cut(doc, "One owner per table")
	if !ok {
		return nil, fmt.Errorf("%s: no \"One owner per table\" table", ownersDoc)
	}
	owners := map[string]string{}
	inTable := false
	for line := range strings.Lines(after) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 2 {
			continue
		}
		owner := backticked.FindStringSubmatch(cells[1])
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			if !tableName.MatchString(m[1]) || owner == nil {
				continue
			}
			if prev, dup := owners[m[1]]; dup {
				return nil, fmt.Errorf("%s: table %s has two owners (%s, %s)", ownersDoc, m[1], prev, owner[1])
			}
			owners[m[1]] = strings.TrimSuffix(owner[1], "/")
		}
	}
	if len(owners) == 0 {
		return nil, fmt.Errorf("%s: the \"One owner per table\" table names no table", ownersDoc)
	}
	return owners, nil
}

// loadOwners parses ownersDoc under root and returns a violation for each
// table migrations/*.sql create that it gives no owner.
func loadOwners(root string) (map[string]string, []string, error) {
	doc, err := os.ReadFile(filepath.Join(root, ownersDoc)) // #nosec G304 G703 -- a fixed file of the module the developer runs the lint in
	if err != nil {
		return nil, nil, err
	}
	owners, err := parseOwners(string(doc))
	if err != nil {
		return nil, nil, err
	}
	files, err := filepath.Glob(filepath.Join(root, "migrations", "*.sql"))
	if err != nil {
		return nil, nil, err
	}
	var out []string
	for _, f := range files {
		sql, err := os.ReadFile(f) // #nosec G304 G703 -- the module's migrations, under the root the developer runs the lint in
		if err != nil {
			return nil, nil, err
		}
		for _, m := range createTable.FindAllStringSubmatch(string(sql), -1) {
			if _, ok := owners[m[1]]; !ok {
				out = append(out, fmt.Sprintf("%s: creates table %s, which %s gives no owner", filepath.Base(f), m[1], ownersDoc))
			}
		}
	}
	sort.Strings(out)
	return owners, out, nil
}

// checkWrites returns a violation for each SQL string of f (at rel) that
// writes a table outside its owner's folder, or a table with no owner.
// Development code (devOnly: the tools, the test rigs) may write any table.
func checkWrites(fset *token.FileSet, f *ast.File, rel string, owners map[string]string) []string {
	if slices.ContainsFunc(devOnly, func(d string) bool { return rel == d || strings.HasPrefix(rel, d+"/") }) {
		return nil
	}
	dir := filepath.ToSlash(filepath.Dir(rel))
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		for _, m := range sqlWrite.FindAllStringSubmatch(s, -1) {
			owner, ok := owners[m[1]]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s:%d: writes table %s, which %s gives no owner", rel, fset.Position(lit.Pos()).Line, m[1], ownersDoc))
			case owner != dir:
				out = append(out, fmt.Sprintf("%s:%d: writes table %s, owned by %s (%s): move the SQL there",
					rel, fset.Position(lit.Pos()).Line, m[1], owner, ownersDoc))
			}
		}
		return true
	})
	return out
}
