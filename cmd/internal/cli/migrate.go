package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/internal/platform/config"
	"github.com/seckill/seckill/migrations"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations (idempotent) or show the schema version",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration to SECKILL_PG_DSN",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load()
			if err != nil {
				return err
			}
			applied, err := migrations.Up(cmd.Context(), cfg.PostgresDSN)
			if err != nil {
				return err
			}
			for _, r := range applied {
				fmt.Fprintf(cmd.OutOrStdout(), "applied %05d %s\n", r.Version, r.Source)
			}
			v, err := migrations.Version(cmd.Context(), cfg.PostgresDSN)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema at version %d (%d applied now)\n", v, len(applied))
			return nil
		},
	}, &cobra.Command{
		Use:   "version",
		Short: "Print the applied schema version",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load()
			if err != nil {
				return err
			}
			v, err := migrations.Version(cmd.Context(), cfg.PostgresDSN)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), v)
			return nil
		},
	})
	return cmd
}
