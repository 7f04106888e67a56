package config

import (
	"errors"
	"strings"
	"testing"
)

func TestDefaultsAreValid(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if c.RedisAddr != "127.0.0.1:56379" || c.TemporalAddress != "127.0.0.1:7233" {
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
		{"short auth secret", "SECKILL_AUTH_SECRET", "abcd", "SECKILL_AUTH_SECRET"},
		{"bad id secret", "SECKILL_ID_SECRETS", "x:zz", "SECKILL_ID_SECRETS"},
		{"unknown key version", "SECKILL_ID_KEY_VERSION", "9", "SECKILL_ID_KEY_VERSION"},
		{"bad log level", "SECKILL_LOG_LEVEL", "loud", "SECKILL_LOG_LEVEL"},
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

func TestSecretsAreNotPrinted(t *testing.T) {
	t.Setenv("SECKILL_AUTH_SECRET", "00")
	_, err := Load()
	var fe *FieldError
	if !errors.As(err, &fe) || strings.Contains(err.Error(), `"00"`) {
		t.Fatalf("secret value leaked or wrong error type: %v", err)
	}
}

func TestIDKeysKeepOldVersions(t *testing.T) {
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
