// Command archlint checks the architecture rules `make lint` enforces
// (docs/architecture.md, "Layers and rules"):
//
//   - the domain (internal/..., state/, lua/) imports none of the layers
//     that use it: activities, api, app, cmd, tools, workers, workflows;
//   - the platform (internal/platform/...) imports no domain package but
//     the Lua scripts it loads: it knows Redis, PostgreSQL, RocketMQ and
//     Temporal, not orders or stock;
//   - workflows import only activities, state, state/steps and
//     internal/events of this module (workflow code stays free of database
//     and Redis clients);
//   - activities/ declares no alias of another package's name (aliases.go):
//     the types the workflows read live in state/steps;
//   - no production file is longer than 450 lines and no function longer
//     than 80 lines;
//   - the production binary (cmd/seckill) depends on no development package:
//     tools/..., internal/testenv, e2e, deploy, cmd/seckill-dev (deps.go,
//     from go list -deps, with and without -tags failpoints);
//   - every table has one owner (owners.go): each table migrations create
//     has a row in docs/architecture.md's "One owner per table", and no
//     production SQL outside that package writes it (INSERT, UPDATE,
//     DELETE); development code may.
//
// It prints one line per violation and exits 1 if there is any.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const (
	module      = "github.com/seckill/seckill/"
	maxFileLine = 450
	maxFuncLine = 80
)

// upper are the layers the domain must not import.
var upper = []string{"activities", "api", "app", "cmd", "tools", "workers", "workflows"}

// domain are the folders of the domain.
var domain = []string{"internal", "state", "lua"}

// platform is the folder of the platform packages.
const platform = "internal/platform/"

// platformImports are the domain packages the platform may import.
var platformImports = []string{"lua"}

// workflowImports are the module packages workflows may import.
var workflowImports = []string{"activities", "state", "state/steps", "internal/events"}

// tableOwners is each table's owning folder (ownersDoc), set by main; nil
// skips the check.
var tableOwners map[string]string

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	owners, problems, err := loadOwners(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "archlint:", err)
		os.Exit(2)
	}
	tableOwners = owners
	// #nosec G703 -- root is the module folder the developer runs the lint in
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		p, err := check(path, filepath.ToSlash(rel))
		problems = append(problems, p...)
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "archlint:", err)
		os.Exit(2)
	}
	deps, err := checkProdDeps(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "archlint:", err)
		os.Exit(2)
	}
	problems = append(problems, deps...)
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("archlint: %d violation(s) of the rules in docs/architecture.md\n", len(problems))
		os.Exit(1)
	}
}

// check returns the violations of one production file (rel is its path from the module root).
func check(path, rel string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	if n := fset.File(f.Pos()).LineCount(); n > maxFileLine {
		out = append(out, fmt.Sprintf("%s: %d lines (at most %d: split it by responsibility)", rel, n, maxFileLine))
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLine {
			out = append(out, fmt.Sprintf("%s:%d: func %s is %d lines (at most %d)", rel, fset.Position(fd.Pos()).Line, fd.Name.Name, n, maxFuncLine))
		}
	}
	if tableOwners != nil {
		out = append(out, checkWrites(fset, f, rel, tableOwners)...)
	}
	top := strings.SplitN(rel, "/", 2)[0]
	if slices.Contains(noAliases, top) {
		out = append(out, checkAliases(fset, f, rel)...)
	}
	for _, imp := range f.Imports {
		ip, _ := strconv.Unquote(imp.Path.Value)
		if !strings.HasPrefix(ip, module) {
			continue
		}
		target := strings.TrimPrefix(ip, module)
		targetTop := strings.SplitN(target, "/", 2)[0]
		switch {
		case slices.Contains(domain, top) && slices.Contains(upper, targetTop):
			out = append(out, fmt.Sprintf("%s: imports %s: the domain (%s) must not import the layers above it (%s)",
				rel, target, strings.Join(domain, ", "), strings.Join(upper, ", ")))
		case strings.HasPrefix(rel, platform) && !strings.HasPrefix(target, platform) &&
			slices.Contains(domain, targetTop) && !slices.Contains(platformImports, target):
			out = append(out, fmt.Sprintf("%s: imports %s: the platform (%s) must not import the domain",
				rel, target, platform))
		case top == "workflows" && !slices.Contains(workflowImports, target):
			out = append(out, fmt.Sprintf("%s: imports %s: workflows may import only %s of this module",
				rel, target, strings.Join(workflowImports, ", ")))
		}
	}
	return out, nil
}
