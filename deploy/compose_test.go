// Package deploy_test checks docker-compose.yml, which cannot run on the
// project's CI machine (no Docker engine): it must name every service the code
// needs and only configuration variables the code reads.
package deploy_test

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/seckill/seckill/internal/platform/config"
)

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		DependsOn   any               `yaml:"depends_on"`
		Ports       []string          `yaml:"ports"`
	} `yaml:"services"`
}

func load(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	return f
}

func TestComposeHasEveryServiceTheCodeNeeds(t *testing.T) {
	f := load(t)
	want := map[string]string{
		"postgresql":  "postgres:15",
		"redis":       "redis:7",
		"rmqnamesrv":  "apache/rocketmq:5",
		"rmqbroker":   "apache/rocketmq:5",
		"temporal":    "temporalio/auto-setup:",
		"temporal-ui": "temporalio/ui:",
	}
	for name, image := range want {
		s, ok := f.Services[name]
		if !ok {
			t.Errorf("service %s missing", name)
			continue
		}
		if !strings.HasPrefix(s.Image, image) {
			t.Errorf("service %s image = %q, want %s*", name, s.Image, image)
		}
	}
	if ui := f.Services["temporal-ui"]; !slices.ContainsFunc(ui.Ports, func(p string) bool { return strings.Contains(p, ":8233:") }) {
		t.Errorf("temporal-ui does not publish the Web UI on 8233: %v", ui.Ports)
	}
	for _, name := range []string{"seckill-migrate", "seckill-api", "seckill-worker", "paysim"} {
		if _, ok := f.Services[name]; !ok {
			t.Errorf("project service %s missing", name)
		}
	}
	// No password of the file's own: the database's comes from the operator.
	for _, name := range []string{"postgresql", "temporal"} {
		for k, v := range f.Services[name].Environment {
			if strings.Contains(k, "PASSWORD") || strings.Contains(k, "PWD") {
				if !strings.HasPrefix(v, "${SECKILL_PG_PASSWORD:?") {
					t.Errorf("service %s: %s=%q, want it required from SECKILL_PG_PASSWORD", name, k, v)
				}
			}
		}
	}
	// Every depends_on names a service of the file.
	for name, s := range f.Services {
		for _, dep := range dependsOn(s.DependsOn) {
			if _, ok := f.Services[dep]; !ok {
				t.Errorf("service %s depends on unknown service %s", name, dep)
			}
		}
	}
}

func TestComposeConfiguresOnlyRealVariables(t *testing.T) {
	f := load(t)
	known := map[string]bool{}
	typ := reflect.TypeOf(config.Config{})
	for i := range typ.NumField() {
		if tag := typ.Field(i).Tag.Get("env"); tag != "" {
			known[tag] = true
		}
	}
	required := []string{"SECKILL_PG_DSN", "SECKILL_REDIS_ADDR", "SECKILL_ROCKETMQ_NAMESRV", "SECKILL_TEMPORAL_ADDR",
		"SECKILL_PAYSIM_URL", "SECKILL_CALLBACK_URL"}
	for _, name := range []string{"seckill-migrate", "seckill-api", "seckill-worker", "paysim"} {
		env := f.Services[name].Environment
		for k := range env {
			if !known[k] {
				t.Errorf("service %s sets %s, which the code does not read", name, k)
			}
		}
		for _, k := range required {
			if env[k] == "" {
				t.Errorf("service %s does not set %s", name, k)
			}
		}
		// Addresses must point at compose services, not at the local stack's loopback.
		for _, k := range required {
			if strings.Contains(env[k], "127.0.0.1") {
				t.Errorf("service %s: %s=%s points at loopback", name, k, env[k])
			}
		}
	}
}

func dependsOn(v any) []string {
	switch d := v.(type) {
	case []any:
		out := make([]string, 0, len(d))
		for _, x := range d {
			out = append(out, x.(string))
		}
		return out
	case map[string]any:
		out := make([]string, 0, len(d))
		for k := range d {
			out = append(out, k)
		}
		return out
	}
	return nil
}
