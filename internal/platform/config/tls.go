package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ClientTLS is the TLS of a client to a backend: TLS 1.2 at least, the
// server verified against the PEM certificates of caFile when set (else
// the system roots), and, when certFile and keyFile are set, a client
// certificate (mutual TLS). An error names the variable (caVar, certVar) of
// the file that cannot be read or holds no certificate.
func ClientTLS(caVar, caFile, certVar, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile) // #nosec G304 -- an operator's setting, not a client's input
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caVar, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate", caVar, caFile)
		}
		c.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", certVar, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
