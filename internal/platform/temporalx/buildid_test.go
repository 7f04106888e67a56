package temporalx

import (
	"runtime/debug"
	"testing"
)

func TestBuildIDOf(t *testing.T) {
	cases := []struct {
		name     string
		settings []debug.BuildSetting
		want     string
		ok       bool
	}{
		{"clean", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}, "abc123", true},
		{"dirty", []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "abc123"}}, "abc123-dirty", true},
		{"no revision (go test, go run)", []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "-race", Value: "true"}}, "", false},
	}
	for _, c := range cases {
		if got, ok := buildIDOf(c.settings); got != c.want || ok != c.ok {
			t.Errorf("%s: buildIDOf = %q, %v; want %q, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	if id, ok := BinaryBuildID(); ok {
		t.Logf("this test binary carries build id %q", id)
	}
}
