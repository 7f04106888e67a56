package config

// The secrets of a deployment (ID and auth keys, the callback secret), the
// refusal of the public development ones, and the trusted proxies.

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// validateSecrets checks keys, tokens' lifetime and the callback secret.
func (c Config) validateSecrets() error {
	if _, err := c.IDKeys(); err != nil {
		return err
	}
	if _, err := c.AuthKeys(); err != nil {
		return err
	}
	if _, err := c.PayloadKeys(); err != nil {
		return err
	}
	if c.AuthMaxTTL <= 0 || c.AuthMaxTTL > 30*24*time.Hour {
		return &FieldError{Var: "SECKILL_AUTH_MAX_TTL", Value: c.AuthMaxTTL.String(), Reason: "must be between 0 and 720h"}
	}
	if c.Env == EnvProduction && c.AuthMaxTTL > ProductionMaxTokenTTL {
		return &FieldError{Var: "SECKILL_AUTH_MAX_TTL", Value: c.AuthMaxTTL.String(), Reason: "production allows at most 24h (a token cannot be revoked before it expires)"}
	}
	if k, err := hex.DecodeString(c.PaysimSecret); err != nil || len(k) < 32 {
		return &FieldError{Var: "SECKILL_PAYSIM_SECRET", Value: "<redacted>", Reason: "must be hex of at least 32 bytes"}
	}
	if _, err := c.AdminCredentials(); err != nil {
		return err
	}
	if c.CallbackTolerance <= 0 || c.CallbackTolerance > time.Hour {
		return &FieldError{Var: "SECKILL_CALLBACK_TOLERANCE", Value: c.CallbackTolerance.String(), Reason: "must be between 0 and 1h"}
	}
	return nil
}

// ProductionMaxTokenTTL is the longest SECKILL_AUTH_MAX_TTL production accepts.
const ProductionMaxTokenTTL = 24 * time.Hour

// Deployment kinds (SECKILL_ENV).
const (
	EnvProduction  = "production"
	EnvDevelopment = "development"
)

// TrustedProxyPrefixes parses SECKILL_TRUSTED_PROXIES (a bare address is a
// single-address prefix).
func (c Config) TrustedProxyPrefixes() ([]netip.Prefix, error) { return prefixes(c.TrustedProxies) }

// AdminAllowPrefixes parses SECKILL_ADMIN_ALLOW.
func (c Config) AdminAllowPrefixes() ([]netip.Prefix, error) { return prefixes(c.AdminAllow) }

// prefixes parses a list of CIDRs and addresses.
func prefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range list {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if p, err := netip.ParsePrefix(v); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR nor an address", v)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// sameSecret reports whether a configured secret is the development one in
// effect: a hex key is compared as the bytes it decodes to (any case), with
// trailing zero bytes dropped (HMAC pads a short key with zeros, so "<dev>00"
// signs exactly as the development key does).
func sameSecret(got, dev string) bool {
	got = strings.TrimSpace(got)
	g, err1 := hex.DecodeString(got)
	d, err2 := hex.DecodeString(dev)
	if err1 == nil && err2 == nil {
		return bytes.Equal(bytes.TrimRight(g, "\x00"), bytes.TrimRight(d, "\x00"))
	}
	return got == dev
}

// refuseDevSecrets fails on the first secret (a field tagged secret:"dev")
// that is blank or still holds its public development default. For a list
// of "version:key" pairs, a default key under any version counts.
func (c Config) refuseDevSecrets() error {
	v := reflect.ValueOf(c)
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("secret") != "dev" {
			continue
		}
		dev := false
		switch x := v.Field(i).Interface().(type) {
		case string:
			if strings.TrimSpace(x) == "" {
				return &FieldError{Var: f.Tag.Get("env"),
					Reason: "must be set in production: the backend or the surface would accept anyone (or SECKILL_ENV=development on a developer machine)"}
			}
			dev = sameSecret(x, f.Tag.Get("envDefault"))
		case []string:
			for _, pair := range x {
				for _, d := range strings.Split(f.Tag.Get("envDefault"), ",") {
					_, key, _ := strings.Cut(strings.TrimSpace(pair), ":")
					_, devKey, _ := strings.Cut(d, ":")
					dev = dev || sameSecret(key, devKey)
				}
			}
		}
		if dev {
			return &FieldError{Var: f.Tag.Get("env"), Value: "<redacted>",
				Reason: "is the public development default: set a secret of your own (or SECKILL_ENV=development on a developer machine)"}
		}
	}
	return nil
}

// IDKeys parses SECKILL_ID_SECRETS into version → key and checks that the
// current SECKILL_ID_KEY_VERSION is among them.
func (c Config) IDKeys() (map[int][]byte, error) {
	return versionedKeys("SECKILL_ID_SECRETS", c.IDSecrets, "SECKILL_ID_KEY_VERSION", c.IDKeyVersion)
}

// AuthKeys parses SECKILL_AUTH_SECRETS into version → key and checks that
// the current SECKILL_AUTH_KEY_VERSION is among them.
func (c Config) AuthKeys() (map[int][]byte, error) {
	return versionedKeys("SECKILL_AUTH_SECRETS", c.AuthSecrets, "SECKILL_AUTH_KEY_VERSION", c.AuthKeyVersion)
}

// PayloadKeys parses SECKILL_PAYLOAD_SECRETS into version → AES-256 key
// and checks that the current SECKILL_PAYLOAD_KEY_VERSION is among them.
func (c Config) PayloadKeys() (map[int][]byte, error) {
	const name = "SECKILL_PAYLOAD_SECRETS"
	keys, err := versionedKeys(name, c.PayloadSecrets, "SECKILL_PAYLOAD_KEY_VERSION", c.PayloadKeyVersion)
	if err != nil {
		return nil, err
	}
	for v, k := range keys {
		if len(k) != 32 {
			return nil, &FieldError{Var: name, Value: "<redacted>", Reason: fmt.Sprintf("key version %d must be hex of exactly 32 bytes (AES-256)", v)}
		}
	}
	return keys, nil
}

func versionedKeys(name string, pairs []string, currentName string, current int) (map[int][]byte, error) {
	keys := make(map[int][]byte, len(pairs))
	for _, pair := range pairs {
		ver, hexKey, ok := strings.Cut(strings.TrimSpace(pair), ":")
		var v int
		if _, err := fmt.Sscanf(ver, "%d", &v); !ok || err != nil || v <= 0 {
			return nil, &FieldError{Var: name, Value: "<redacted>", Reason: "each entry must be version:hexkey with a positive version"}
		}
		k, err := hex.DecodeString(hexKey)
		if err != nil || len(k) < 32 {
			return nil, &FieldError{Var: name, Value: "<redacted>", Reason: fmt.Sprintf("key version %d must be hex of at least 32 bytes", v)}
		}
		if _, dup := keys[v]; dup {
			return nil, &FieldError{Var: name, Value: "<redacted>", Reason: fmt.Sprintf("key version %d appears twice", v)}
		}
		keys[v] = k
	}
	if _, ok := keys[current]; !ok {
		return nil, &FieldError{Var: currentName, Value: fmt.Sprint(current), Reason: "no such version in " + name}
	}
	return keys, nil
}

// refuseUnsafe fails, outside development, on the first setting that would
// leave a connection in plain text or without credentials, keep the
// development database password, or switch a rate limit off. Each error
// names its variable.
func (c Config) refuseUnsafe() error {
	const dsnVar = "SECKILL_PG_DSN"
	pc, err := pgconn.ParseConfig(c.PostgresDSN)
	if err != nil {
		return &FieldError{Var: dsnVar, Value: "<redacted>", Reason: "does not parse as a PostgreSQL DSN"}
	}
	if dev, err := pgconn.ParseConfig(defaultOf("PostgresDSN")); err == nil && pc.Password != "" && pc.Password == dev.Password {
		return &FieldError{Var: dsnVar, Value: "<redacted>", Reason: "holds the development database password: set a password of your own"}
	}
	plain := pc.TLSConfig == nil
	for _, f := range pc.Fallbacks {
		plain = plain || f.TLSConfig == nil
	}
	if err := c.refuseWeakAdminTokens(); err != nil {
		return err
	}
	if plain {
		return &FieldError{Var: dsnVar, Value: "<redacted>",
			Reason: "allows a plain-text connection: set sslmode=verify-full (or require, verify-ca)"}
	}
	if err := c.refusePlainBackends(); err != nil {
		return err
	}
	for _, u := range []struct{ name, v string }{{"SECKILL_PAYSIM_URL", c.PaysimURL}, {"SECKILL_CALLBACK_URL", c.CallbackURL}} {
		if p, err := url.Parse(u.v); err != nil || p.Scheme != "https" || p.Host == "" {
			return &FieldError{Var: u.name, Value: u.v, Reason: "must be an https:// URL: payment traffic is never plain text"}
		}
	}
	for _, l := range []struct {
		name string
		v    int
	}{{"SECKILL_RATE_LIMIT_USER", c.RateLimitUser}, {"SECKILL_RATE_LIMIT_IP", c.RateLimitIP}, {"SECKILL_RATE_LIMIT_READ", c.RateLimitRead},
		{"SECKILL_RATE_LIMIT_CALLBACK", c.RateLimitCallback}, {"SECKILL_RATE_LIMIT_ADMIN", c.RateLimitAdmin}} {
		if l.v == 0 {
			return &FieldError{Var: l.name, Value: "0", Reason: "0 switches the limit off: production keeps every limit on"}
		}
	}
	return nil
}

// refusePlainBackends fails on a Redis spoken to in plain text and on a
// Temporal frontend reached without credentials (an API key, or a client
// certificate over TLS): whoever reaches either could read or rewrite
// reservations, or signal and terminate sagas.
func (c Config) refusePlainBackends() error {
	if !c.RedisTLS {
		return &FieldError{Var: "SECKILL_REDIS_TLS", Value: "false",
			Reason: "production speaks TLS to Redis, as to PostgreSQL: set it to true (SECKILL_REDIS_CA_FILE for a private CA)"}
	}
	if strings.TrimSpace(c.RocketMQAccessKey) == "" {
		return &FieldError{Var: "SECKILL_ROCKETMQ_ACCESS_KEY",
			Reason: "production signs every RocketMQ request: set the broker's ACL user (and SECKILL_ROCKETMQ_SECRET_KEY)"}
	}
	if strings.TrimSpace(c.TemporalAPIKey) == "" && (!c.TemporalTLS || c.TemporalCertFile == "") {
		return &FieldError{Var: "SECKILL_TEMPORAL_API_KEY",
			Reason: "production authenticates to Temporal: set an API key, or a client certificate " +
				"(SECKILL_TEMPORAL_TLS=true with SECKILL_TEMPORAL_CERT_FILE and _KEY_FILE)"}
	}
	return nil
}

// AdminCredentials parses SECKILL_ADMIN_TOKENS into operator → token.
func (c Config) AdminCredentials() (map[string]string, error) {
	const name = "SECKILL_ADMIN_TOKENS"
	out := map[string]string{}
	for _, pair := range c.AdminTokens {
		op, tok, ok := strings.Cut(strings.TrimSpace(pair), ":")
		switch {
		case !ok || !operatorName.MatchString(op):
			return nil, &FieldError{Var: name, Value: "<redacted>", Reason: "each entry must be operator:token, the operator 1 to 32 of a-z 0-9 _ -"}
		case op == "admin":
			return nil, &FieldError{Var: name, Value: "<redacted>", Reason: `"admin" names SECKILL_ADMIN_TOKEN: pick another operator name`}
		case out[op] != "":
			return nil, &FieldError{Var: name, Value: "<redacted>", Reason: fmt.Sprintf("operator %q appears twice", op)}
		}
		out[op] = tok
	}
	return out, nil
}

var operatorName = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// refuseWeakAdminTokens fails, outside development, on an admin credential
// that is not at least 32 random bytes in hex.
func (c Config) refuseWeakAdminTokens() error {
	ops, err := c.AdminCredentials()
	if err != nil {
		return err
	}
	toks := map[string]string{"SECKILL_ADMIN_TOKEN": c.AdminToken}
	for op, tok := range ops {
		toks["SECKILL_ADMIN_TOKENS ("+op+")"] = tok
	}
	for v, tok := range toks {
		if randomBytes(tok) < 32 {
			return &FieldError{Var: v, Value: "<redacted>",
				Reason: "must be at least 32 random bytes in hex (openssl rand -hex 32)"}
		}
	}
	return nil
}

// randomBytes is how many bytes tok encodes as hex (0 if it is not hex):
// any long word decodes as base64, so only hex says "generated".
func randomBytes(tok string) int {
	b, err := hex.DecodeString(tok)
	if err != nil {
		return 0
	}
	return len(b)
}

// defaultOf is the envDefault of Config's field name.
func defaultOf(name string) string {
	f, _ := reflect.TypeFor[Config]().FieldByName(name)
	return f.Tag.Get("envDefault")
}

// StackAppDSN is dsn logged in as the local stack's application role
// instead (seckill_app with the development password, scripts/stack.sh):
// what the stack's api and workers connect with. A dsn that is not a URL
// comes back as it is.
func StackAppDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return dsn
	}
	u.User = url.UserPassword("seckill_app", "seckill")
	return u.String()
}
