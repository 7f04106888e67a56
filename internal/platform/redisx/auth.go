package redisx

import (
	"crypto/tls"

	"github.com/seckill/seckill/internal/platform/config"
)

// auth is what a client presents to Redis: SECKILL_REDIS_USERNAME and
// SECKILL_REDIS_PASSWORD for AUTH, and the TLS settings of SECKILL_REDIS_TLS.
type auth struct {
	username, password string
	tls                *tls.Config
}

// authOf reads the credentials of cfg; a CA file that cannot be read or
// holds no certificate is an error naming SECKILL_REDIS_CA_FILE.
func authOf(cfg config.Config) (auth, error) {
	a := auth{username: cfg.RedisUsername, password: cfg.RedisPassword}
	if !cfg.RedisTLS {
		return a, nil
	}
	t, err := config.ClientTLS("SECKILL_REDIS_CA_FILE", cfg.RedisCAFile, "", "", "")
	if err != nil {
		return auth{}, err
	}
	a.tls = t
	return a, nil
}
