package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/auth"
	"github.com/seckill/seckill/internal/platform/pg"
)

func newTokenCmd() *cobra.Command {
	var user int64
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "token --user ID",
		Short: "Mint a development bearer token for a user (signed with the current SECKILL_AUTH_SECRETS key)",
		Args:  cobra.NoArgs,
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
	cmd.AddCommand(newTokenRevokeCmd())
	return cmd
}

func newTokenRevokeCmd() *cobra.Command {
	var user int64
	var by string
	cmd := &cobra.Command{
		Use:   "revoke --user ID --by OPERATOR",
		Short: "Refuse every token of a user issued until now (the gateways apply it within SECKILL_AUTH_REVOCATION_REFRESH)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := LoadBase()
			if err != nil {
				return err
			}
			pool, err := pg.Open(cmd.Context(), b.Cfg.PostgresDSN, 1)
			if err != nil {
				return err
			}
			defer pool.Close()
			nb, err := auth.RevokeTokens(cmd.Context(), pool, user, by)
			if err != nil {
				return err
			}
			b.Log.Info("tokens revoked", "user_id", user, "by", by, "not_before", nb)
			fmt.Fprintf(cmd.OutOrStdout(), "user %d: tokens issued before %s are refused (within %s on every gateway)\n",
				user, nb.UTC().Format(time.RFC3339), b.Cfg.AuthRevocationRefresh)
			return nil
		},
	}
	cmd.Flags().Int64Var(&user, "user", 0, "user id (positive)")
	cmd.Flags().StringVar(&by, "by", "", "who revokes (kept in user_token_epoch.revoked_by)")
	_ = cmd.MarkFlagRequired("user")
	_ = cmd.MarkFlagRequired("by")
	return cmd
}
