package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/app"
)

func newTokenCmd() *cobra.Command {
	var user int64
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "token --user ID",
		Short: "Mint a development bearer token for a user (signed with the current SECKILL_AUTH_SECRETS key)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := LoadBase()
			if err != nil {
				return err
			}
			a, err := app.Authenticator(b.Cfg)
			if err != nil {
				return err
			}
			tok, err := a.Mint(user, ttl)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	cmd.Flags().Int64Var(&user, "user", 0, "user id (positive)")
	cmd.Flags().DurationVar(&ttl, "ttl", time.Hour, "token lifetime (at most SECKILL_AUTH_MAX_TTL)")
	_ = cmd.MarkFlagRequired("user")
	return cmd
}
