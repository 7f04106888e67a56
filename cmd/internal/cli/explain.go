package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/seckill/seckill/app"
)

// errInconsistent makes `seckill explain` exit 1 after printing a verdict
// that is not consistent.
var errInconsistent = errors.New("the purchase is not consistent (see the verdict above)")

func newExplainCmd() *cobra.Command {
	var asJSON bool
	var activity int64
	cmd := &cobra.Command{
		Use:   "explain <reservation_id | order_id | payment_id>",
		Short: "Print everything the system knows about one purchase, oldest first, and whether it is consistent",
		Long: "Reads PostgreSQL, Redis and Temporal for the purchase the id belongs to and prints one timeline and a\n" +
			"verdict: consistent, or which invariant is off with the repair that fits and the exact command to run.\n" +
			"Exits 1 when the purchase is not consistent.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return fmt.Errorf("explain: %q is not an id: want the UUID of a reservation, an order or a payment", args[0])
			}
			b, err := LoadBase()
			if err != nil {
				return err
			}
			conns, temporalErr := app.Open(cmd.Context(), b.Cfg, "seckill-cli", true, b.Log, nil)
			if temporalErr != nil { // explain without Temporal rather than not at all
				if conns, err = app.Open(cmd.Context(), b.Cfg, "seckill-cli", false, b.Log, nil); err != nil {
					return err
				}
			}
			defer conns.Close()
			ex, err := app.Explainer(b.Cfg, conns)
			if err != nil {
				return err
			}
			rep, err := ex.ExplainIn(cmd.Context(), id, activity)
			if err != nil {
				return err
			}
			if temporalErr != nil {
				rep.SagaError = "Temporal unreachable: " + temporalErr.Error()
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				err = enc.Encode(rep)
			} else {
				err = rep.WriteText(cmd.OutOrStdout())
			}
			if err == nil && !rep.Verdict.Consistent {
				return errInconsistent
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().Int64Var(&activity, "activity", 0, "the sale the id belongs to, if known: a reservation only Redis holds is then looked for among its SKUs alone")
	return cmd
}
