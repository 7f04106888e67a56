package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/sale"
)

func newSaleCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sale", Short: "Set up flash-sale activities"}
	cmd.AddCommand(&cobra.Command{
		Use:   "create FILE.json",
		Short: "Create (or re-apply) an activity with its SKUs; live stock is never reset",
		Long: `Reads an activity definition (the body of POST /v1/admin/activities), writes it to
PostgreSQL and initialises Redis from it. "-" reads standard input.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := LoadBase()
			if err != nil {
				return err
			}
			raw, err := readArg(args[0])
			if err != nil {
				return err
			}
			var a sale.Activity
			if err := json.Unmarshal(raw, &a); err != nil {
				return fmt.Errorf("%s: not a valid activity definition: %w", args[0], err)
			}
			if err := a.Validate(); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			ctx := cmd.Context()
			pool, err := pg.Open(ctx, b.Cfg.PostgresDSN, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			rdb, err := redisx.Dial(ctx, b.Cfg, 2)
			if err != nil {
				return err
			}
			defer rdb.Close()
			res, err := sale.Setup(ctx, pool, rdb, a)
			if errors.Is(err, sale.ErrRedisNeedsRebuild) {
				return fmt.Errorf("%w (see docs/operations.md)", err)
			}
			if err != nil {
				return err
			}
			for _, r := range res {
				state := "created"
				if !r.Created {
					state = "kept (existing stock not reset)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "activity %d sku %d: %s, PostgreSQL initial %d available %d, Redis available %d\n",
					a.ActivityID, r.SKUID, state, r.InitialStock, r.AvailableStock, r.RedisAvailable)
			}
			return nil
		},
	})
	return cmd
}

func readArg(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name) // #nosec G304 -- a path the operator or the harness chose (a file it names on the command line, a pid or log file of the stack)
}
