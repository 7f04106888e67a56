package redisx

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

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
	a.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.RedisCAFile == "" {
		return a, nil
	}
	pem, err := os.ReadFile(cfg.RedisCAFile)
	if err != nil {
		return auth{}, fmt.Errorf("SECKILL_REDIS_CA_FILE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return auth{}, fmt.Errorf("SECKILL_REDIS_CA_FILE %s: no PEM certificate", cfg.RedisCAFile)
	}
	a.tls.RootCAs = pool
	return a, nil
}
