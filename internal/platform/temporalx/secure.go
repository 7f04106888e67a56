package temporalx

import (
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/platform/config"
)

// secure sets the transport and credentials of cfg on o: TLS to the
// frontend (SECKILL_TEMPORAL_TLS, verified against SECKILL_TEMPORAL_CA_FILE
// or the system roots), a client certificate (SECKILL_TEMPORAL_CERT_FILE and
// _KEY_FILE: mutual TLS) and an API key (SECKILL_TEMPORAL_API_KEY, sent as a
// bearer token, over TLS only: the SDK turns TLS on for it).
func secure(cfg config.Config, o *client.Options) error {
	if cfg.TemporalTLS {
		t, err := config.ClientTLS("SECKILL_TEMPORAL_CA_FILE", cfg.TemporalCAFile,
			"SECKILL_TEMPORAL_CERT_FILE", cfg.TemporalCertFile, cfg.TemporalKeyFile)
		if err != nil {
			return err
		}
		o.ConnectionOptions.TLS = t
	}
	if cfg.TemporalAPIKey != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(cfg.TemporalAPIKey)
	}
	return nil
}
