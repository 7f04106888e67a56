package cli

import (
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/api"
	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/temporalx"
)

func newCodecServerCmd() *cobra.Command {
	var addr string
	var origins []string
	cmd := &cobra.Command{
		Use: "codec-server",
		Short: "Serve the Temporal payload codec (POST /decode, /encode) on a loopback address, " +
			"for the Web UI's and the CLI's --codec-endpoint (docs/operations.md, \"Payload encryption\")",
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, _, err := net.SplitHostPort(addr)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("--addr %q: must be a loopback host:port: the codec server decrypts for anyone who reaches it", addr)
			}
			b, err := LoadBase()
			if err != nil {
				return err
			}
			codec, err := temporalx.CodecFor(b.Cfg)
			if err != nil {
				return err
			}
			if len(origins) == 0 {
				origins = []string{b.Cfg.TemporalUI}
			}
			return app.ServeHTTP(cmd.Context(), api.Server(addr, temporalx.CodecHandler(codec, origins...)), b.Log, "codec-server")
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8234", "loopback host:port to listen on")
	cmd.Flags().StringSliceVar(&origins, "origin", nil, "Web UI origin allowed by CORS (default SECKILL_TEMPORAL_UI)")
	return cmd
}
