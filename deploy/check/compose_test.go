package check

// Checks of docker-compose.yml, which cannot run on the project's CI machine
// (no Docker engine): it loads with the Compose specification's own loader
// (compose-go: schema, interpolation, references), so a file Docker would
// refuse fails here; it must name every service the code needs and only
// configuration variables the code reads.

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

const composePath = "../../docker-compose.yml"

// composeSecrets are the variables docker-compose.yml requires (${X:?...}).
var composeSecrets = []string{"SECKILL_PG_PASSWORD", "SECKILL_ID_SECRETS", "SECKILL_AUTH_SECRETS", "SECKILL_ADMIN_TOKEN",
	"SECKILL_PAYSIM_SECRET", "SECKILL_PAYSIM_MERCHANT_KEY", "SECKILL_PAYLOAD_SECRETS", "SECKILL_REDIS_PASSWORD"}

// sentinel is the value the tests give the required variable name.
func sentinel(name string) string { return "test-" + strings.ToLower(name) }

// loadCompose loads path as `docker compose` does, with env as the environment.
func loadCompose(t *testing.T, path string, env map[string]string) (*types.Project, error) {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs, Content: raw}},
		Environment: env,
	}, func(o *loader.Options) { o.SetProjectName("seckill", true) })
}

// load loads docker-compose.yml with every required variable set.
func load(t *testing.T) *types.Project {
	t.Helper()
	env := map[string]string{}
	for _, k := range composeSecrets {
		env[k] = sentinel(k)
	}
	p, err := loadCompose(t, composePath, env)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return p
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
	if ui := f.Services["temporal-ui"]; !slices.ContainsFunc(ui.Ports, func(p types.ServicePortConfig) bool { return p.Published == "8233" }) {
		t.Errorf("temporal-ui does not publish the Web UI on 8233: %+v", ui.Ports)
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
				if v == nil || *v != sentinel("SECKILL_PG_PASSWORD") {
					t.Errorf("service %s: %s=%v, want it from SECKILL_PG_PASSWORD", name, k, v)
				}
			}
		}
	}
	// Every depends_on names a service of the file.
	for name, s := range f.Services {
		for dep := range s.DependsOn {
			if _, ok := f.Services[dep]; !ok {
				t.Errorf("service %s depends on unknown service %s", name, dep)
			}
		}
	}
}

// TestComposeRequiresEverySecret: without any one of the secrets (or the
// database password) the file does not load, and the error names it.
func TestComposeRequiresEverySecret(t *testing.T) {
	for _, missing := range composeSecrets {
		env := map[string]string{}
		for _, k := range composeSecrets {
			if k != missing {
				env[k] = sentinel(k)
			}
		}
		if _, err := loadCompose(t, composePath, env); err == nil || !strings.Contains(err.Error(), "set "+missing) {
			t.Errorf("without %s: %v, want the refusal naming it", missing, err)
		}
	}
}

// TestComposeLoaderRefusesWhatDockerRefuses: the loader validates against the
// Compose schema and the references, so these checks see what Docker sees.
func TestComposeLoaderRefusesWhatDockerRefuses(t *testing.T) {
	for name, body := range map[string]string{
		"unknown key":     "services:\n  a:\n    image: redis:7\n    imagee: x\n",
		"unknown service": "services:\n  a:\n    image: redis:7\n    depends_on: [b]\n",
		"bad port":        "services:\n  a:\n    image: redis:7\n    ports: [\"127.0.0.1:99999:1\"]\n",
	} {
		p := filepath.Join(t.TempDir(), "compose.yml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadCompose(t, p, nil); err == nil {
			t.Errorf("%s: loaded without error", name)
		}
	}
}

func TestComposeConfiguresOnlyRealVariables(t *testing.T) {
	f := load(t)
	known, _ := configVars()
	required := []string{"SECKILL_PG_DSN", "SECKILL_REDIS_ADDR", "SECKILL_ROCKETMQ_NAMESRV", "SECKILL_TEMPORAL_ADDR",
		"SECKILL_PAYSIM_URL", "SECKILL_CALLBACK_URL"}
	for _, name := range []string{"seckill-migrate", "seckill-api", "seckill-worker", "paysim"} {
		env := f.Services[name].Environment
		for k := range env {
			if !known[k] {
				t.Errorf("service %s sets %s, which the code does not read", name, k)
			}
		}
		if name == "paysim" { // the provider's stand-in: nothing of the backends (TestComposeGivesEachServiceOnlyItsSecrets)
			continue
		}
		for _, k := range required {
			if env[k] == nil || *env[k] == "" {
				t.Errorf("service %s does not set %s", name, k)
			}
		}
		// Addresses must point at compose services, not at the local stack's loopback.
		for _, k := range required {
			if env[k] != nil && strings.Contains(*env[k], "127.0.0.1") {
				t.Errorf("service %s: %s=%s points at loopback", name, k, *env[k])
			}
		}
	}
}

// TestComposeGivesEachServiceOnlyItsSecrets: a service holds the secrets its
// code uses and no other (a leak of the provider's stand-in gives away no key
// of ours; the migrator holds only the database), and Redis requires its
// password.
func TestComposeGivesEachServiceOnlyItsSecrets(t *testing.T) {
	f := load(t)
	want := map[string][]string{
		"seckill-migrate": {"SECKILL_PG_PASSWORD"},
		"seckill-api": {"SECKILL_PG_PASSWORD", "SECKILL_REDIS_PASSWORD", "SECKILL_ID_SECRETS", "SECKILL_AUTH_SECRETS",
			"SECKILL_ADMIN_TOKEN", "SECKILL_PAYSIM_SECRET", "SECKILL_PAYSIM_MERCHANT_KEY", "SECKILL_PAYLOAD_SECRETS"},
		"seckill-worker": {"SECKILL_PG_PASSWORD", "SECKILL_REDIS_PASSWORD", "SECKILL_ID_SECRETS", "SECKILL_PAYSIM_MERCHANT_KEY",
			"SECKILL_PAYLOAD_SECRETS"},
		"paysim": {"SECKILL_PAYSIM_SECRET", "SECKILL_PAYSIM_MERCHANT_KEY"},
	}
	for name, secrets := range want {
		var got []string
		for _, v := range f.Services[name].Environment {
			for _, k := range composeSecrets {
				if v != nil && strings.Contains(*v, sentinel(k)) && !slices.Contains(got, k) {
					got = append(got, k)
				}
			}
		}
		slices.Sort(got)
		secrets = slices.Sorted(slices.Values(secrets))
		if !slices.Equal(got, secrets) {
			t.Errorf("service %s holds %v, want exactly %v", name, got, secrets)
		}
	}
	r := f.Services["redis"]
	if !slices.Contains(r.Command, "--requirepass") || !slices.Contains(r.Command, sentinel("SECKILL_REDIS_PASSWORD")) {
		t.Errorf("redis runs without --requirepass SECKILL_REDIS_PASSWORD: %v", r.Command)
	}
}
