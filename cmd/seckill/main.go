// Command seckill is the one binary of the flash-sale system. Its subcommands
// run the gateway, the workers, migrations, the local stack and the demo.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "seckill:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "seckill",
		Short:         "Flash-sale order system: Redis admission, RocketMQ, Temporal sagas, PostgreSQL authority",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newMigrateCmd(), newStackCmd(), newSmokeCmd(), newAPICmd(), newWorkerCmd(), newTokenCmd(), newSaleCmd(), newBenchCmd(), newDemoCmd(), newReconcileCmd(), newRedisCmd(), newPaysimCmd(), newChaosCmd(), newMQCmd(),
		newExplainCmd(), newCheckCmd(), newRepairCmd())
	return root
}
