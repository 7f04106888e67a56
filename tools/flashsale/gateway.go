package flashsale

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/config"
)

// attach is start for Options.Gateway: it starts neither a gateway nor a
// worker, but checks the running gateway answers /healthz and opens only
// PostgreSQL and Redis (and RocketMQ's producer, which app.Open always
// makes), to watch the sale converge and check the invariants. The running
// processes' own configuration applies (rate limits, payment callback URL);
// opts.Failpoints are not armed in them.
func attach(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options) (*system, error) {
	base := strings.TrimRight(opts.Gateway, "/")
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", base, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("gateway %s does not answer /healthz (is bin/seckill api running?): %w", base, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("gateway %s/healthz: %s", base, resp.Status)
	}
	conns, err := app.Open(ctx, cfg, "seckill-demo", false, log, nil)
	if err != nil {
		return nil, err
	}
	// werr stays nil (never ready): the workers are other processes.
	return &system{cfg: cfg, conns: conns, base: base, close: conns.Close}, nil
}
