package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/invariants"
)

// errViolated makes `seckill check` exit 1 after printing the violations.
var errViolated = errors.New("invariants violated (see above)")

func newCheckCmd() *cobra.Command {
	var activity int64
	var quiescent, asJSON bool
	cmd := &cobra.Command{
		Use:   "check --activity N",
		Short: "Check the invariants of every SKU of a sale (no oversell, one order per user, stock conservation, ...); exit 1 on a violation",
		Long: "Runs internal/invariants on PostgreSQL and Redis for each SKU of the activity, the same checks as the demo,\n" +
			"the end-to-end tests and reconciliation. --quiescent also checks what must hold once nothing is in flight\n" +
			"(after the sale and its sagas are done): Redis and PostgreSQL agree exactly, every refund is finished.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if activity <= 0 {
				return fmt.Errorf("check: --activity must be a positive activity id, got %d", activity)
			}
			b, err := LoadBase()
			if err != nil {
				return err
			}
			conns, err := app.Open(cmd.Context(), b.Cfg, "seckill-cli", false, b.Log, nil)
			if err != nil {
				return err
			}
			defer conns.Close()
			res, err := invariants.CheckActivity(cmd.Context(), conns.Pool, conns.Redis, activity, quiescent)
			if err != nil {
				return err
			}
			bad := 0
			for _, r := range res {
				bad += len(r.Violations)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				err = enc.Encode(map[string]any{"activity_id": activity, "quiescent": quiescent, "skus": res, "violations": bad})
			} else {
				err = printCheck(cmd, activity, res)
			}
			if err == nil && bad > 0 {
				return errViolated
			}
			return err
		},
	}
	cmd.Flags().Int64Var(&activity, "activity", 0, "the sale activity to check (required)")
	cmd.Flags().BoolVar(&quiescent, "quiescent", false, "also check what must hold once nothing is in flight")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func printCheck(cmd *cobra.Command, activity int64, res []invariants.SKUResult) error {
	w := cmd.OutOrStdout()
	for _, r := range res {
		s := r.Snapshot
		verdict := "ok"
		if len(r.Violations) > 0 {
			verdict = fmt.Sprintf("%d violation(s)", len(r.Violations))
		}
		if _, err := fmt.Fprintf(w, "activity %d SKU %d: %s (PostgreSQL %d = available %d + occupied %d + sold %d; Redis available %d, open %d, committed %d; paid %d, cancelled %d, refunded %d)\n",
			activity, r.SKUID, verdict, s.PGInitial, s.PGAvailable, s.PGOccupied, s.PGSold, s.RedisAvailable, s.RedisOpen, s.RedisCommitted,
			s.Paid, s.Cancelled, s.Refunded); err != nil {
			return err
		}
		for _, v := range r.Violations {
			if _, err := fmt.Fprintf(w, "  %s\n", v); err != nil {
				return err
			}
		}
	}
	return nil
}
