package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, rel, src string) string {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckFindsEachKindOfViolation(t *testing.T) {
	dir := t.TempDir()
	long := "package x\n\nfunc Long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLine) + "}\n"
	cases := []struct {
		rel, src, want string
	}{
		{"internal/x/x.go", "package x\n\nimport _ \"github.com/seckill/seckill/workflows\"\n", "must not import the layers above"},
		{"state/x.go", "package x\n\nimport _ \"github.com/seckill/seckill/activities\"\n", "must not import the layers above"},
		{"workflows/x.go", "package x\n\nimport _ \"github.com/seckill/seckill/internal/payments\"\n", "workflows may import only"},
		{"internal/y/y.go", long, "func Long is"},
		{"internal/platform/pg/x.go", "package pg\n\nimport _ \"github.com/seckill/seckill/internal/orders\"\n", "platform (internal/platform/) must not import the domain"},
		{"api/z.go", "package z\n" + strings.Repeat("\n", maxFileLine), "lines (at most 450"},
		{"activities/a.go", "package a\n\nimport \"github.com/seckill/seckill/state/steps\"\n\ntype R = steps.RepairRequest\n", "type R = steps.RepairRequest: use"},
		{"activities/b.go", "package b\n\nimport \"github.com/seckill/seckill/state/steps\"\n\nconst (\n\tX = 1\n\tBulkApplied = steps.BulkApplied\n)\n", "BulkApplied = steps.BulkApplied: use"},
		{"activities/c.go", "package c\n\nimport \"sync/atomic\"\n\ntype P = atomic.Pointer[int]\n", "type P = atomic.Pointer"},
	}
	for _, c := range cases {
		got, err := check(write(t, dir, c.rel, c.src), c.rel)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || !strings.Contains(got[0], c.want) {
			t.Errorf("%s: violations %q, want one containing %q", c.rel, got, c.want)
		}
	}
	ok := []struct{ rel, src string }{
		{"api/ok.go", "package ok\n\nimport _ \"github.com/seckill/seckill/workflows\"\n"},
		{"workflows/ok.go", "package ok\n\nimport _ \"github.com/seckill/seckill/activities\"\n"},
		{"workflows/steps.go", "package ok\n\nimport _ \"github.com/seckill/seckill/state/steps\"\n"},
		{"activities/ok.go", "package ok\n\nimport \"time\"\n\ntype T struct{}\n\ntype U = T\n\nconst pace = time.Second\n"},
		{"internal/ok/alias.go", "package ok\n\nimport \"time\"\n\ntype D = time.Duration\n"},
		{"internal/ok/ok.go", "package ok\n\nimport _ \"github.com/seckill/seckill/internal/platform/pg\"\n"},
		{"internal/platform/redisx/ok.go", "package redisx\n\nimport _ \"github.com/seckill/seckill/lua\"\n"},
		{"internal/platform/mq/ok.go", "package mq\n\nimport _ \"github.com/seckill/seckill/internal/platform/logx\"\n"},
	}
	for _, c := range ok {
		got, err := check(write(t, dir, c.rel, c.src), c.rel)
		if err != nil || len(got) != 0 {
			t.Errorf("%s: violations %q (%v), want none", c.rel, got, err)
		}
	}
}

func TestDevDepsNamesDevelopmentPackages(t *testing.T) {
	lines := []string{
		"fmt",
		module + "internal/platform/pg fmt",
		module + "tools/bench " + module + "internal/platform/pg",
		module + "internal/testenv " + module + "internal/platform/pg",
		module + "cmd/seckill-dev " + module + "tools/bench",
		module + "toolsx",
		module + "cmd/seckill " + module + "tools/bench " + module + "internal/testenv " + module + "internal/platform/pg",
	}
	got := devDeps(lines, "failpoints")
	if len(got) != 3 {
		t.Fatalf("violations %q, want tools/bench, internal/testenv and cmd/seckill-dev", got)
	}
	for i, want := range []string{"links tools/bench (imported by cmd/seckill-dev, cmd/seckill)", "links internal/testenv (imported by cmd/seckill)",
		"links cmd/seckill-dev ("} {
		if !strings.Contains(got[i], want) || !strings.Contains(got[i], "go build -tags failpoints ./cmd/seckill") {
			t.Errorf("violation %q, want it to contain %q", got[i], want)
		}
	}
	if got := devDeps([]string{module + "cmd/seckill " + module + "paysim", module + "paysim fmt"}, ""); len(got) != 0 {
		t.Errorf("violations %q, want none", got)
	}
}

// The module's production binary as it is: the check make lint runs.
func TestProductionBinaryHasNoDevelopmentDependency(t *testing.T) {
	got, err := checkProdDeps("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("violations:\n%s", strings.Join(got, "\n"))
	}
}
