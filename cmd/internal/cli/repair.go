package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/state/steps"
)

func newRepairCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "repair", Short: "Repair sagas through their repair signal (docs/operations.md)"}
	cmd.AddCommand(newRepairApplyCmd(), newRepairBulkCmd(), newRepairBulkItemsCmd())
	return cmd
}

func newRepairApplyCmd() *cobra.Command {
	var req steps.RepairRequest
	var wait time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "apply <reservation_id> --action A --repair-id ID --operator O --reason R",
		Short: "Repair one reservation through its saga, running or not (closed, failed, never started)",
		Long: "Checks the repair against PostgreSQL (one that does not fit the reservation's state is refused with the\n" +
			"reason and nothing is sent), then sends it as the saga's repair signal. A saga that does not run is started\n" +
			"again from PostgreSQL with the repair as its first signal: a reservation in MANUAL_REVIEW whose saga was\n" +
			"terminated, failed or never started gets its repair all the same. Waits up to --wait for the saga's record\n" +
			"of it (repair_task). The same --repair-id again sends nothing and prints the recorded result. Example:\n" +
			"  seckill repair apply <rid> --action retry-compensation --repair-id INC-42-<rid> --operator alice \\\n" +
			"    --reason 'INC-42: key restored from backup'",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rid, err := uuid.Parse(args[0])
			if err != nil {
				return fmt.Errorf("repair apply: %q is not a reservation id (a UUID)", args[0])
			}
			if wait <= 0 {
				return fmt.Errorf("--wait %s: want a positive duration", wait)
			}
			req.ReservationID = rid
			b, conns, err := openCLI(cmd.Context())
			if err != nil {
				return err
			}
			defer conns.Close()
			out, err := app.Repair(cmd.Context(), conns, b.Cfg.TemporalTaskQueue, req, wait)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(out); err != nil {
					return err
				}
			} else if err := printRepair(cmd.OutOrStdout(), out); err != nil {
				return err
			}
			switch out.Status {
			case state.RepairApplied:
				return nil
			case state.Repair{}:
				return fmt.Errorf("the saga did not record repair %s within %s: look at its steps (seckill explain %s)", out.RepairID, wait, rid)
			}
			return fmt.Errorf("repair %s %s: %s", out.RepairID, out.Status, out.Result)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Action, "action", "", "repair action: "+strings.Join(steps.RepairActions, ", "))
	f.StringVar(&req.RepairID, "repair-id", "", "fixed id of this decision, e.g. INC-42-<reservation_id> (sending it twice does nothing twice)")
	f.StringVar(&req.Operator, "operator", "", "who is doing this (recorded)")
	f.StringVar(&req.Reason, "reason", "", "why, with the evidence or incident id (recorded)")
	f.DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the saga's record of the repair")
	f.BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return cmd
}

func printRepair(w io.Writer, out app.RepairOutcome) error {
	status := out.Status.String()
	if status == "" {
		status = "NOT RECORDED YET"
	}
	dup := ""
	if out.Duplicate {
		dup = " (repair_id recorded before: nothing sent)"
	}
	_, err := fmt.Fprintf(w, "repair %s: %s%s; result %s; before %s; reservation now %s\n", out.RepairID, status, dup,
		orNone(out.Result), orNone(out.Before), out.Reservation)
	return err
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
