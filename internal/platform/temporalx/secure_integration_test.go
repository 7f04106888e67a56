package temporalx

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/internal/testenv"
)

// pki is a CA and the certificates it signed, written as PEM files.
type pki struct {
	dir  string
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	p.ca, p.key = p.issue(t, "ca", &x509.Certificate{IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.ca)
	return p
}

// issue makes a certificate from tmpl signed by parent (itself when nil)
// and writes name.crt and name.key.
func (p *pki) issue(t *testing.T, name string, tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.Subject = pkix.Name{CommonName: "seckill test " + name}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{name + ".crt": {Type: "CERTIFICATE", Bytes: der},
		name + ".key": {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(filepath.Join(p.dir, file), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func (p *pki) file(name string) string { return filepath.Join(p.dir, name) }

// mtlsProxy is a frontend that demands mutual TLS: it terminates TLS,
// verifies the client's certificate against the CA and passes the bytes to
// the stack's Temporal server. verified counts the clients it let through.
func mtlsProxy(t *testing.T, p *pki, upstream string) (addr string, verified *atomic.Int64) {
	t.Helper()
	p.issue(t, "server", &x509.Certificate{IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, p.ca, p.key)
	pair, err := tls.LoadX509KeyPair(p.file("server.crt"), p.file("server.key"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	verified = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				if tc.HandshakeContext(context.Background()) != nil {
					return
				}
				verified.Add(1)
				up, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, tc) }()
				_, _ = io.Copy(tc, up)
			}()
		}
	}()
	return ln.Addr().String(), verified
}

// Dial speaks mutual TLS with the files of SECKILL_TEMPORAL_TLS, _CA_FILE,
// _CERT_FILE and _KEY_FILE to a frontend that requires it (the stack's
// server behind a TLS terminator) and reaches the server; without the client
// certificate, or in plain text, the frontend turns it away.
func TestDialSpeaksMutualTLS(t *testing.T) {
	cfg := testenv.Require(t)
	p := newPKI(t)
	addr, verified := mtlsProxy(t, p, cfg.TemporalAddress)
	p.issue(t, "client", &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}, p.ca, p.key)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.TemporalAddress = addr

	mtls := cfg
	mtls.TemporalTLS, mtls.TemporalCAFile = true, p.file("ca.crt")
	mtls.TemporalCertFile, mtls.TemporalKeyFile = p.file("client.crt"), p.file("client.key")
	c, err := Dial(context.Background(), mtls, quiet)
	if err != nil {
		t.Fatalf("dial with mutual TLS: %v", err)
	}
	if _, err := c.WorkflowService().GetSystemInfo(context.Background(), nil); err != nil {
		t.Errorf("a call through mutual TLS: %v", err)
	}
	c.Close()
	if verified.Load() == 0 {
		t.Fatal("the frontend verified no client certificate")
	}
	before := verified.Load()

	noCert := mtls
	noCert.TemporalCertFile, noCert.TemporalKeyFile = "", ""
	plain := cfg
	for name, bad := range map[string]config.Config{"no client certificate": noCert, "plain text": plain} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := Dial(ctx, bad, quiet)
		cancel()
		if err == nil {
			c.Close()
			t.Errorf("%s: dial succeeded through a frontend that requires a client certificate", name)
		}
	}
	if verified.Load() != before {
		t.Errorf("the frontend let %d more clients through", verified.Load()-before)
	}
}
