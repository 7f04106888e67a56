package temporalx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/seckill/seckill/internal/platform/config"
)

// keyFrontend is a frontend that records the authorization header of each call.
type keyFrontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
	mu   sync.Mutex
	seen []string
}

func (f *keyFrontend) GetSystemInfo(ctx context.Context, _ *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.seen = append(f.seen, md.Get("authorization")...)
	f.mu.Unlock()
	return &workflowservice.GetSystemInfoResponse{}, nil
}

// SECKILL_TEMPORAL_API_KEY goes out as a bearer token on every call, over
// TLS verified against SECKILL_TEMPORAL_CA_FILE.
func TestDialSendsTheAPIKeyOverTLS(t *testing.T) {
	p := newPKI(t)
	p.issue(t, "server", &x509.Certificate{IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, p.ca, p.key)
	pair, err := tls.LoadX509KeyPair(p.file("server.crt"), p.file("server.key"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &keyFrontend{}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})))
	workflowservice.RegisterWorkflowServiceServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	cfg := config.Config{TemporalAddress: ln.Addr().String(), TemporalNamespace: "default", TemporalTLS: true,
		TemporalCAFile: p.file("ca.crt"), TemporalAPIKey: "test-api-key",
		PayloadSecrets: []string{"1:" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}, PayloadKeyVersion: 1}
	c, err := Dial(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 || f.seen[0] != "Bearer test-api-key" {
		t.Fatalf("authorization headers %q, want the API key as a bearer token", f.seen)
	}
}
