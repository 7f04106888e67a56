package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// prodBinary is the production binary (the image's, Dockerfile): it must
// not depend on the module's development code, with or without failpoints.
const prodBinary = "cmd/seckill"

// devOnly are the module's packages (and those under them) only development
// uses: the tools, the test rigs, the tests and the development binary.
var devOnly = []string{"tools", "internal/testenv", "e2e", "deploy", "cmd/seckill-dev"}

// checkProdDeps returns a violation for every development package
// `go list -deps ./cmd/seckill` names in the module at root.
func checkProdDeps(root string) ([]string, error) {
	var out []string
	for _, tags := range []string{"", "failpoints"} {
		args := []string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		cmd := exec.Command("go", append(args, "./"+prodBinary)...) // #nosec G204 -- constant arguments: this program's own go list
		cmd.Dir, cmd.Stderr = root, os.Stderr
		raw, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list -deps ./%s: %w", prodBinary, err)
		}
		out = append(out, devDeps(strings.Split(strings.TrimSpace(string(raw)), "\n"), tags)...)
	}
	return out, nil
}

// devDeps returns a violation for each development package among the
// production binary's dependencies; lines are go list's, each a package
// and its imports.
func devDeps(lines []string, tags string) []string {
	importers := map[string][]string{}
	var deps []string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		deps = append(deps, f[0])
		for _, imp := range f[1:] {
			importers[imp] = append(importers[imp], strings.TrimPrefix(f[0], module))
		}
	}
	build := "go build ./" + prodBinary
	if tags != "" {
		build = "go build -tags " + tags + " ./" + prodBinary
	}
	var out []string
	for _, d := range deps {
		rel, ok := strings.CutPrefix(d, module)
		if !ok || !slices.ContainsFunc(devOnly, func(p string) bool { return rel == p || strings.HasPrefix(rel, p+"/") }) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s links %s (imported by %s): development code stays out of the production binary (move the command to cmd/seckill-dev)",
			prodBinary, build, rel, strings.Join(importers[d], ", ")))
	}
	return out
}
