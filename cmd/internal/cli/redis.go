package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/internal/platform/redisx"
	"github.com/seckill/seckill/internal/rebuild"
)

func newRedisCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "redis", Short: "Redis admission state maintenance"}
	var activity int64
	var force bool
	rb := &cobra.Command{
		Use:   "rebuild --activity N",
		Short: "Rebuild a sale's Redis stock, counters and projections from PostgreSQL (after FLUSHALL or a failover)",
		Long: `Rewrites the sale's Redis counters, window, reservation hashes, request maps, user
guards and markers from PostgreSQL, the authority. Refuses while the sale is admitting
unless --force: reservations that only Redis knew are lost with it, so rebuild again
once the message backlog has drained (see docs/operations.md).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if activity <= 0 {
				return fmt.Errorf("--activity: a positive activity id is required")
			}
			b, err := LoadBase()
			if err != nil {
				return err
			}
			pool, err := pg.Open(cmd.Context(), b.Cfg.PostgresDSN, 4)
			if err != nil {
				return err
			}
			defer pool.Close()
			rdb, err := redisx.Dial(cmd.Context(), b.Cfg, 4)
			if err != nil {
				return err
			}
			defer rdb.Close()
			skus, err := rebuild.Rebuild(cmd.Context(), pool, rdb, activity, b.Cfg.ReservationTTL, force)
			if err != nil {
				return err
			}
			for _, s := range skus {
				fmt.Fprintf(cmd.OutOrStdout(), "activity %d sku %d: initial %d = available %d + open_reserved %d + committed %d (%d reservations rebuilt)\n",
					activity, s.SKUID, s.Initial, s.Available, s.OpenReserved, s.Committed, s.Reservations)
			}
			return nil
		},
	}
	rb.Flags().Int64Var(&activity, "activity", 0, "the sale to rebuild")
	rb.Flags().BoolVar(&force, "force", false, "rebuild even while the sale is admitting")
	cmd.AddCommand(rb)
	return cmd
}
