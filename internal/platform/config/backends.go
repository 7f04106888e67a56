package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// validateRedis checks the cluster seeds and the logical database.
func (c Config) validateRedis() error {
	for _, a := range c.RedisClusterAddrs {
		host, port, err := net.SplitHostPort(strings.TrimSpace(a))
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return &FieldError{Var: "SECKILL_REDIS_CLUSTER_ADDRS", Value: strings.Join(c.RedisClusterAddrs, ","),
				Reason: fmt.Sprintf("%q is not host:port (a comma-separated list of seed nodes)", a)}
		}
	}
	if c.RedisCluster() && c.RedisDB != 0 {
		return &FieldError{Var: "SECKILL_REDIS_DB", Value: fmt.Sprint(c.RedisDB),
			Reason: "must be 0 with SECKILL_REDIS_CLUSTER_ADDRS set: a Redis Cluster has only database 0"}
	}
	return nil
}

// validateTemporalTLS checks that the certificate files come with TLS and
// the client certificate with its key.
func (c Config) validateTemporalTLS() error {
	for _, f := range []struct{ name, v string }{{"SECKILL_TEMPORAL_CA_FILE", c.TemporalCAFile},
		{"SECKILL_TEMPORAL_CERT_FILE", c.TemporalCertFile}, {"SECKILL_TEMPORAL_KEY_FILE", c.TemporalKeyFile}} {
		if f.v != "" && !c.TemporalTLS {
			return &FieldError{Var: f.name, Value: f.v, Reason: "needs SECKILL_TEMPORAL_TLS=true"}
		}
	}
	if c.TemporalCompression != "none" && c.TemporalCompression != "gzip" {
		return &FieldError{Var: "SECKILL_TEMPORAL_COMPRESSION", Value: c.TemporalCompression, Reason: "must be none or gzip"}
	}
	if (c.TemporalCertFile == "") != (c.TemporalKeyFile == "") {
		return &FieldError{Var: "SECKILL_TEMPORAL_CERT_FILE", Value: c.TemporalCertFile,
			Reason: "and SECKILL_TEMPORAL_KEY_FILE go together (a client certificate and its key)"}
	}
	return nil
}

// RedisCluster reports whether the processes use a Redis Cluster
// (SECKILL_REDIS_CLUSTER_ADDRS set) instead of the single Redis.
func (c Config) RedisCluster() bool { return len(c.RedisClusterAddrs) > 0 }
