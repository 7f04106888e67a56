package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/cmd/internal/cli"
	"github.com/seckill/seckill/internal/platform/logx"
	"github.com/seckill/seckill/internal/platform/mq"
	"github.com/seckill/seckill/tools/flashsale"
)

func newDemoCmd() *cobra.Command {
	var o flashsale.Options
	var logPath string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a flash sale end to end on the stack and print its outcome with the invariant check",
		Long: `Starts the gateway and every worker in this process, sets up a sale, lets --buyers
concurrent buyers race for --stock units over HTTP, waits until every saga is final, then
prints orders, compensations and the stock of both stores, and checks the invariants.
--pg-shortfall lowers PostgreSQL's stock below Redis's to show compensation at work.
With a payment window (--payment-timeout), buyers then pay early, pay right at the
deadline (racing the cancel), pay after their order was cancelled (refunded), or never.
The payment provider is the stack's simulator (SECKILL_PAYSIM_URL).
With --gateway URL (what make run passes) it starts neither the gateway nor the workers:
the sale goes over HTTP to the running gateway (bin/seckill api, started with
SECKILL_RATE_LIMIT_IP=0, since every buyer of the demo comes from one address), the
running workers (bin/seckill worker) do the rest, and the demo reads PostgreSQL and
Redis as usual to wait for the outcome and check the invariants.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := cli.LoadBase()
			if err != nil {
				return err
			}
			log, closeLog, err := demoLog(logPath, b.Cfg.LogLevel)
			if err != nil {
				return err
			}
			defer closeLog()
			if o.Gateway == "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "logs of every process of the demo: %s (RocketMQ client: %s)\n", logPath, sdkLogPath(logPath))
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "driving the running gateway %s; the demo's own log: %s\n", o.Gateway, logPath)
			}
			o.Progress = cmd.ErrOrStderr()
			rep, err := flashsale.Run(cmd.Context(), b.Cfg, log, o)
			if err != nil {
				return err
			}
			rep.Print(cmd.OutOrStdout())
			fmt.Fprintf(cmd.OutOrStdout(), "\nFind every saga in the Temporal UI: %s (query: ActivityId = %d)\n", b.Cfg.TemporalUI, rep.ActivityID)
			if len(rep.Violations) > 0 {
				return fmt.Errorf("%d invariant violations", len(rep.Violations))
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&o.Stock, "stock", 100, "units on sale")
	cmd.Flags().IntVar(&o.Buyers, "buyers", 2000, "distinct buyers racing for them")
	cmd.Flags().IntVar(&o.Concurrency, "concurrency", 64, "buyers in flight at once")
	cmd.Flags().Int64Var(&o.PGShortfall, "pg-shortfall", 10, "units PostgreSQL holds fewer than Redis admits (shows compensation)")
	cmd.Flags().DurationVar(&o.PaymentTimeout, "payment-timeout", 8*time.Second,
		"payment window of the sale; buyers then pay early, race the deadline, pay after the cancel, or never (0: no payment phase)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 3*time.Minute, "how long to wait for every saga to finish")
	cmd.Flags().StringVar(&o.Gateway, "gateway", "",
		"a running gateway (e.g. http://127.0.0.1:8080) to drive over HTTP, with the running workers; empty: start both in this process")
	cmd.Flags().StringVar(&logPath, "log", filepath.Join(".stack", "logs", "demo.log"),
		"file the gateway's and workers' logs go to (the terminal keeps progress and the outcome)")
	return cmd
}

// demoLog opens the demo's log file (appending) and routes the RocketMQ
// SDK's own lines to a file beside it.
func demoLog(path, level string) (*slog.Logger, func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, nil, fmt.Errorf("demo log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600) // #nosec G304 -- the operator's --log path
	if err != nil {
		return nil, nil, fmt.Errorf("demo log: %w", err)
	}
	if err := mq.SetSDKLogOutput(sdkLogPath(path)); err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("demo log: %w", err)
	}
	return logx.New(f, level), func() { _ = f.Close() }, nil
}

func sdkLogPath(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + "-rocketmq.log"
}
