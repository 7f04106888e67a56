// Package cli holds the cobra commands of the production binary (cmd/seckill):
// the gateway, the workers, migrations and the operator commands. The
// development binary (cmd/seckill-dev) adds its own commands to the same ones,
// so that both answer the operator commands alike.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Commands returns the production commands: api, worker, migrate, sale,
// token, reconcile, explain, check, repair, redis, mq and codec-server.
func Commands() []*cobra.Command {
	return []*cobra.Command{newMigrateCmd(), newAPICmd(), newWorkerCmd(), newTokenCmd(), newSaleCmd(), newReconcileCmd(),
		newRedisCmd(), newMQCmd(), newExplainCmd(), newCheckCmd(), newRepairCmd(), newCodecServerCmd()}
}

// NewRoot returns the root command of a binary named use, with cmds.
func NewRoot(use, short string, cmds ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:           use,
		Short:         short,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(cmds...)
	return root
}

// Main runs root until it returns or SIGINT/SIGTERM cancels its context; on
// an error it prints it after the binary's name and exits 1.
func Main(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, root.Name()+":", err)
		os.Exit(1)
	}
}
