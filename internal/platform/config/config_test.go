package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDefaultsAreValid(t *testing.T) {
	t.Setenv("SECKILL_ENV", "development")
	c, err := Load()
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if c.RedisAddr != "127.0.0.1:16379" || c.TemporalAddress != "127.0.0.1:7233" {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

func TestErrorsNameTheVariable(t *testing.T) {
	cases := []struct {
		name, env, value, wantVar string
	}{
		{"not a duration", "SECKILL_MQ_SEND_TIMEOUT", "soon", "SECKILL_MQ_SEND_TIMEOUT"},
		{"not a number", "SECKILL_PG_MAX_CONNS", "many", "SECKILL_PG_MAX_CONNS"},
		{"zero pool", "SECKILL_PG_MAX_CONNS", "0", "SECKILL_PG_MAX_CONNS"},
		{"negative lease", "SECKILL_SEND_LEASE", "-1s", "SECKILL_SEND_LEASE"},
		{"empty dsn", "SECKILL_PG_DSN", " ", "SECKILL_PG_DSN"},
		{"short auth secret", "SECKILL_AUTH_SECRETS", "1:abcd", "SECKILL_AUTH_SECRETS"},
		{"unknown auth key version", "SECKILL_AUTH_KEY_VERSION", "3", "SECKILL_AUTH_KEY_VERSION"},
		{"long token lifetime", "SECKILL_AUTH_MAX_TTL", "9000h", "SECKILL_AUTH_MAX_TTL"},
		{"bad id secret", "SECKILL_ID_SECRETS", "x:zz", "SECKILL_ID_SECRETS"},
		{"payload key not AES-256", "SECKILL_PAYLOAD_SECRETS", "1:" + strings.Repeat("ab", 48), "SECKILL_PAYLOAD_SECRETS"},
		{"unknown payload key version", "SECKILL_PAYLOAD_KEY_VERSION", "2", "SECKILL_PAYLOAD_KEY_VERSION"},
		{"unknown key version", "SECKILL_ID_KEY_VERSION", "9", "SECKILL_ID_KEY_VERSION"},
		{"bad log level", "SECKILL_LOG_LEVEL", "loud", "SECKILL_LOG_LEVEL"},
		{"cluster seed without port", "SECKILL_REDIS_CLUSTER_ADDRS", "127.0.0.1:17001,127.0.0.1", "SECKILL_REDIS_CLUSTER_ADDRS"},
		{"empty cluster seed", "SECKILL_REDIS_CLUSTER_ADDRS", "127.0.0.1:17001,,127.0.0.1:17003", "SECKILL_REDIS_CLUSTER_ADDRS"},
		{"deployment name with a colon", "SECKILL_WORKER_DEPLOYMENT", "seckill:prod", "SECKILL_WORKER_DEPLOYMENT"},
		{"task queue with a dot as the deployment name", "SECKILL_TEMPORAL_TASK_QUEUE", "seckill.saga", "SECKILL_TEMPORAL_TASK_QUEUE"},
		{"unknown set-current rule", "SECKILL_WORKER_SET_CURRENT", "always", "SECKILL_WORKER_SET_CURRENT"},
		{"build id with spaces", "SECKILL_BUILD_ID", " abc", "SECKILL_BUILD_ID"},
		{"versioning not a bool", "SECKILL_WORKER_VERSIONING", "maybe", "SECKILL_WORKER_VERSIONING"},
		{"temporal CA without TLS", "SECKILL_TEMPORAL_CA_FILE", "/etc/ca.pem", "SECKILL_TEMPORAL_CA_FILE"},
		{"temporal client certificate without TLS", "SECKILL_TEMPORAL_CERT_FILE", "/etc/c.pem", "SECKILL_TEMPORAL_CERT_FILE"},
		{"temporal TLS not a bool", "SECKILL_TEMPORAL_TLS", "yes please", "SECKILL_TEMPORAL_TLS"},
		{"unknown temporal compression", "SECKILL_TEMPORAL_COMPRESSION", "zstd", "SECKILL_TEMPORAL_COMPRESSION"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(c.env, c.value)
			_, err := Load()
			if err == nil {
				t.Fatalf("%s=%q accepted", c.env, c.value)
			}
			if !strings.Contains(err.Error(), c.wantVar) {
				t.Fatalf("error %q does not name %s", err, c.wantVar)
			}
		})
	}
}

// A client certificate comes with its key, and both need TLS.
func TestTemporalClientCertificateNeedsItsKey(t *testing.T) {
	t.Setenv("SECKILL_ENV", "development")
	t.Setenv("SECKILL_TEMPORAL_TLS", "true")
	t.Setenv("SECKILL_TEMPORAL_CERT_FILE", "/etc/seckill/temporal.crt")
	_, err := Load()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Var != "SECKILL_TEMPORAL_CERT_FILE" || !strings.Contains(fe.Reason, "SECKILL_TEMPORAL_KEY_FILE") {
		t.Fatalf("a certificate without its key = %v", err)
	}
	t.Setenv("SECKILL_TEMPORAL_KEY_FILE", "/etc/seckill/temporal.key")
	if _, err := Load(); err != nil {
		t.Fatalf("TLS with a certificate and its key: %v", err)
	}
}

// A cluster has only database 0: SECKILL_REDIS_DB must stay 0 with it.
func TestRedisClusterRefusesADatabase(t *testing.T) {
	t.Setenv("SECKILL_ENV", "development")
	t.Setenv("SECKILL_REDIS_CLUSTER_ADDRS", "127.0.0.1:17001, 127.0.0.1:17002")
	t.Setenv("SECKILL_REDIS_DB", "7")
	_, err := Load()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Var != "SECKILL_REDIS_DB" || !strings.Contains(fe.Reason, "only database 0") {
		t.Fatalf("cluster with database 7: %v", err)
	}
	t.Setenv("SECKILL_REDIS_DB", "0")
	c, err := Load()
	if err != nil || !c.RedisCluster() || len(c.RedisClusterAddrs) != 2 {
		t.Fatalf("cluster with database 0: %+v %v", c.RedisClusterAddrs, err)
	}
}

func TestSecretsAreNotPrinted(t *testing.T) {
	t.Setenv("SECKILL_AUTH_SECRETS", "1:00")
	_, err := Load()
	var fe *FieldError
	if !errors.As(err, &fe) || strings.Contains(err.Error(), `"00"`) {
		t.Fatalf("secret value leaked or wrong error type: %v", err)
	}
}

func TestIDKeysKeepOldVersions(t *testing.T) {
	t.Setenv("SECKILL_ENV", "development")
	t.Setenv("SECKILL_ID_SECRETS", "1:"+strings.Repeat("ab", 32)+",2:"+strings.Repeat("cd", 32))
	t.Setenv("SECKILL_ID_KEY_VERSION", "2")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := c.IDKeys()
	if err != nil || len(keys) != 2 || keys[1][0] != 0xab || keys[2][0] != 0xcd {
		t.Fatalf("keys = %v, %v", keys, err)
	}
}

// Outside development, every public development secret is refused, and the
// error names the variable (never the value).
// safeTransport sets what production requires besides secrets: TLS to
// PostgreSQL with a password of its own, https payment URLs.
// ownSecrets are secrets of a deployment's own, none a development default.
func ownSecrets() map[string]string {
	return map[string]string{
		"SECKILL_ID_SECRETS":          "1:" + strings.Repeat("1a", 32),
		"SECKILL_AUTH_SECRETS":        "1:" + strings.Repeat("2b", 32),
		"SECKILL_ADMIN_TOKEN":         strings.Repeat("3c", 32),
		"SECKILL_PAYSIM_SECRET":       strings.Repeat("4d", 32),
		"SECKILL_PAYSIM_MERCHANT_KEY": strings.Repeat("5e", 8),
		"SECKILL_PAYLOAD_SECRETS":     "1:" + strings.Repeat("6f", 32),
	}
}

func safeTransport(t *testing.T) {
	t.Helper()
	for n, v := range map[string]string{
		"SECKILL_PG_DSN":              "postgres://seckill:" + strings.Repeat("6f", 16) + "@db.internal:5432/seckill?sslmode=verify-full",
		"SECKILL_PAYSIM_URL":          "https://psp.example.com",
		"SECKILL_CALLBACK_URL":        "https://shop.example.com/v1/payments/callback",
		"SECKILL_REDIS_PASSWORD":      strings.Repeat("8c", 16),
		"SECKILL_REDIS_TLS":           "true",
		"SECKILL_TEMPORAL_API_KEY":    "temporal-api-key-of-the-test",
		"SECKILL_ROCKETMQ_SECRET_KEY": strings.Repeat("9d", 16),
	} {
		t.Setenv(n, v)
	}
}

func TestProductionRefusesDevelopmentSecrets(t *testing.T) {
	t.Setenv("SECKILL_ENV", "production")
	safeTransport(t)
	own := ownSecrets()
	for name := range own {
		t.Run(name, func(t *testing.T) {
			for n, v := range own {
				if n != name {
					t.Setenv(n, v)
				}
			}
			_, err := Load()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Var != name || !strings.Contains(err.Error(), "development default") {
				t.Fatalf("production with the development %s = %v", name, err)
			}
		})
	}
	// The development ID key under another version is still the development key.
	for n, v := range own {
		t.Setenv(n, v)
	}
	t.Setenv("SECKILL_ID_SECRETS", "1:"+strings.Repeat("1a", 32)+",2:6465762d6f6e6c792d69642d7365637265742d6368616e67652d6d652d313233")
	if _, err := Load(); err == nil {
		t.Fatal("the development ID key accepted under another version")
	}
	t.Setenv("SECKILL_ID_SECRETS", own["SECKILL_ID_SECRETS"])
	// Spelled otherwise, a development key is still that key: hex in capitals,
	// or with zero bytes appended (HMAC pads a short key with zeros).
	const devAuth = "6465762d6f6e6c792d617574682d7365637265742d6368616e67652d6d652d31"
	const devPaysim = "6465762d6f6e6c792d70617973696d2d7365637265742d6368616e67652d6d65"
	for name, v := range map[string]string{
		"SECKILL_AUTH_SECRETS":  "1:" + strings.ToUpper(devAuth),
		"SECKILL_PAYSIM_SECRET": " " + devPaysim + "0000 ",
	} {
		t.Setenv(name, v)
		_, err := Load()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Var != name {
			t.Errorf("%s=%q accepted in production (%v)", name, v, err)
		}
		t.Setenv(name, own[name])
	}
	t.Setenv("SECKILL_ID_SECRETS", own["SECKILL_ID_SECRETS"])
	if _, err := Load(); err != nil {
		t.Fatalf("production with secrets of its own: %v", err)
	}
	t.Setenv("SECKILL_ENV", "staging")
	if _, err := Load(); err == nil || !strings.Contains(err.Error(), "SECKILL_ENV") {
		t.Fatalf("SECKILL_ENV=staging = %v", err)
	}
}

// Production refuses, naming the variable, a database connection that may
// be plain text or keeps the development password, plain-http payment URLs,
// and a rate limit switched off; development accepts them all.
func TestProductionRefusesUnsafeSettings(t *testing.T) {
	own := ownSecrets()
	pw := strings.Repeat("6f", 16)
	cases := []struct{ name, v, reason string }{
		{"SECKILL_PG_DSN", "postgres://seckill:" + pw + "@db:5432/seckill?sslmode=disable", "plain-text"},
		{"SECKILL_PG_DSN", "postgres://seckill:" + pw + "@db:5432/seckill?sslmode=prefer", "plain-text"},
		{"SECKILL_PG_DSN", "postgres://seckill:" + pw + "@db:5432/seckill", "plain-text"},
		{"SECKILL_PG_DSN", "host=db user=seckill password=" + pw + " sslmode=allow", "plain-text"},
		{"SECKILL_PG_DSN", "postgres://seckill:seckill@db:5432/seckill?sslmode=require", "development database password"},
		{"SECKILL_PG_DSN", "postgres://%zz", "does not parse"},
		{"SECKILL_PAYSIM_URL", "http://psp.example.com", "https://"},
		{"SECKILL_CALLBACK_URL", "http://shop.example.com/v1/payments/callback", "https://"},
		{"SECKILL_CALLBACK_URL", "https:///no-host", "https://"},
		{"SECKILL_REDIS_PASSWORD", "", "public development default"}, // unset or empty: the local stack's
		{"SECKILL_REDIS_PASSWORD", "dev-redis-password-change-me", "public development default"},
		{"SECKILL_REDIS_PASSWORD", "  ", "must be set in production"},
		{"SECKILL_REDIS_TLS", "false", "TLS to Redis"},
		{"SECKILL_ROCKETMQ_ACCESS_KEY", " ", "signs every RocketMQ request"},
		{"SECKILL_ROCKETMQ_SECRET_KEY", "", "public development default"},
		{"SECKILL_ROCKETMQ_SECRET_KEY", "dev-rocketmq-secret-change-me", "public development default"},
		{"SECKILL_ROCKETMQ_SECRET_KEY", "  ", "must be set in production"},
		{"SECKILL_TEMPORAL_API_KEY", "", "authenticates to Temporal"},
		{"SECKILL_RATE_LIMIT_USER", "0", "switches the limit off"},
		{"SECKILL_RATE_LIMIT_IP", "0", "switches the limit off"},
		{"SECKILL_RATE_LIMIT_READ", "0", "switches the limit off"},
		{"SECKILL_RATE_LIMIT_CALLBACK", "0", "switches the limit off"},
		{"SECKILL_RATE_LIMIT_ADMIN", "0", "switches the limit off"},
		{"SECKILL_ADMIN_TOKEN", strings.Repeat("3c", 31), "32 random bytes"},
		{"SECKILL_ADMIN_TOKEN", "a-long-but-guessable-admin-password-of-many-letters", "32 random bytes"},
		{"SECKILL_ADMIN_TOKENS", "alice:" + strings.Repeat("7a", 16), "32 random bytes"},
		{"SECKILL_ADMIN_TOKENS", "Alice!:" + strings.Repeat("7a", 32), "operator:token"},
		{"SECKILL_ADMIN_TOKENS", "admin:" + strings.Repeat("7a", 32), "another operator name"},
		{"SECKILL_ADMIN_TOKENS", "bo:" + strings.Repeat("7a", 32) + ",bo:" + strings.Repeat("7b", 32), "appears twice"},
	}
	for _, c := range cases {
		t.Run(c.name+"="+c.v, func(t *testing.T) {
			for n, v := range own {
				t.Setenv(n, v)
			}
			safeTransport(t)
			t.Setenv("SECKILL_ENV", "production")
			if _, err := Load(); err != nil {
				t.Fatalf("safe production settings refused: %v", err)
			}
			t.Setenv(c.name, c.v)
			_, err := Load()
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Var, c.name) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("production with %s=%q = %v, want a refusal naming it (%s)", c.name, c.v, err, c.reason)
			}
			if strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), "7a7a") || strings.Contains(err.Error(), "guessable") {
				t.Fatalf("the refusal prints a secret: %v", err)
			}
			t.Setenv("SECKILL_ENV", "development")
			if _, err := Load(); err != nil && !strings.Contains(c.reason, "operator") && !strings.Contains(c.reason, "twice") {
				t.Fatalf("development with %s=%q = %v, want accepted", c.name, c.v, err)
			}
		})
	}
}

func TestTrustedProxies(t *testing.T) {
	t.Setenv("SECKILL_ENV", "development")
	t.Setenv("SECKILL_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.7,2001:db8::/32")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.TrustedProxyPrefixes()
	if err != nil || len(got) != 3 || got[0].String() != "10.0.0.0/8" || got[1].String() != "192.0.2.7/32" || got[2].String() != "2001:db8::/32" {
		t.Fatalf("prefixes %v, %v", got, err)
	}
	t.Setenv("SECKILL_TRUSTED_PROXIES", "10.0.0.0/8,proxy.internal")
	_, err = Load()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Var != "SECKILL_TRUSTED_PROXIES" || !strings.Contains(err.Error(), "proxy.internal") {
		t.Fatalf("a host name as a proxy = %v", err)
	}
}

func TestDeploymentNameDefaultsToTheTaskQueue(t *testing.T) {
	t.Setenv("SECKILL_ENV", "development")
	t.Setenv("SECKILL_TEMPORAL_TASK_QUEUE", "chaos-1234")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.DeploymentName(); got != "chaos-1234" {
		t.Errorf("DeploymentName() = %q, want the task queue chaos-1234", got)
	}
	if c.WorkerSetCurrent != SetCurrentAuto || !c.WorkerVersioning {
		t.Errorf("defaults: set current %q, versioning %v; want auto, true", c.WorkerSetCurrent, c.WorkerVersioning)
	}
	t.Setenv("SECKILL_WORKER_DEPLOYMENT", "seckill")
	t.Setenv("SECKILL_WORKER_VERSIONING", "false")
	t.Setenv("SECKILL_TEMPORAL_TASK_QUEUE", "a.b") // no deployment name is derived from it when versioning is off
	if c, err = Load(); err != nil || c.DeploymentName() != "seckill" {
		t.Errorf("DeploymentName() = %q, %v; want seckill", c.DeploymentName(), err)
	}
}

// Development may mint long-lived tokens; production caps the lifetime at
// ProductionMaxTokenTTL.
func TestProductionCapsTokenLifetime(t *testing.T) {
	t.Setenv("SECKILL_ENV", "development")
	t.Setenv("SECKILL_AUTH_MAX_TTL", "48h")
	c, err := Load()
	if err != nil || c.AuthMaxTTL != 48*time.Hour {
		t.Fatalf("development with 48h: %v %v", c.AuthMaxTTL, err)
	}
	c.Env = EnvProduction
	var fe *FieldError
	if err := c.validateSecrets(); !errors.As(err, &fe) || fe.Var != "SECKILL_AUTH_MAX_TTL" {
		t.Fatalf("production with 48h: %v", err)
	}
	c.AuthMaxTTL = ProductionMaxTokenTTL
	if err := c.validateSecrets(); err != nil {
		t.Fatalf("production with 24h: %v", err)
	}
}

// A client certificate over TLS authenticates to Temporal as well as an API
// key; without SECKILL_TEMPORAL_TLS the certificate would never be sent, so
// it is refused.
func TestProductionAcceptsATemporalClientCertificate(t *testing.T) {
	own := ownSecrets()
	for n, v := range own {
		t.Setenv(n, v)
	}
	safeTransport(t)
	t.Setenv("SECKILL_ENV", "production")
	t.Setenv("SECKILL_TEMPORAL_API_KEY", "")
	t.Setenv("SECKILL_TEMPORAL_CERT_FILE", "/etc/seckill/temporal/tls.crt")
	t.Setenv("SECKILL_TEMPORAL_KEY_FILE", "/etc/seckill/temporal/tls.key")
	var fe *FieldError
	if _, err := Load(); !errors.As(err, &fe) || !strings.HasPrefix(fe.Var, "SECKILL_TEMPORAL_") {
		t.Fatalf("a certificate without SECKILL_TEMPORAL_TLS: %v, want the refusal", err)
	}
	t.Setenv("SECKILL_TEMPORAL_TLS", "true")
	if _, err := Load(); err != nil {
		t.Fatalf("a client certificate over TLS: %v, want accepted", err)
	}
}
