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
	"github.com/seckill/seckill/internal/repairs"
	"github.com/seckill/seckill/state"
	"github.com/seckill/seckill/workflows"
)

func newRepairCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "repair", Short: "Repair sagas through their repair signal (docs/operations.md)"}
	cmd.AddCommand(newRepairApplyCmd(), newRepairBulkCmd())
	return cmd
}

func newRepairApplyCmd() *cobra.Command {
	var req repairs.Request
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
			case "":
				return fmt.Errorf("the saga did not record repair %s within %s: look at its steps (seckill explain %s)", out.RepairID, wait, rid)
			}
			return fmt.Errorf("repair %s %s: %s", out.RepairID, out.Status, out.Result)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Action, "action", "", "repair action: "+strings.Join(repairs.Actions, ", "))
	f.StringVar(&req.RepairID, "repair-id", "", "fixed id of this decision, e.g. INC-42-<reservation_id> (sending it twice does nothing twice)")
	f.StringVar(&req.Operator, "operator", "", "who is doing this (recorded)")
	f.StringVar(&req.Reason, "reason", "", "why, with the evidence or incident id (recorded)")
	f.DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the saga's record of the repair")
	f.BoolVar(&asJSON, "json", false, "print the outcome as JSON")
	return cmd
}

func printRepair(w io.Writer, out app.RepairOutcome) error {
	status := string(out.Status)
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

func newRepairBulkCmd() *cobra.Command {
	var in workflows.BulkRepairInput
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bulk (--query Q | --manual-review-of SALE) --action A --operator O --reason R [--dry-run] [--rate N]",
		Short: "Send the same repair to every running saga a Temporal visibility query lists, checked against PostgreSQL first",
		Long: "Runs BulkRepairWorkflow: it lists the running reservation sagas of --query, checks the repair against\n" +
			"PostgreSQL for each (a repair that does not fit a saga's state is refused, with the reason), and signals\n" +
			"the others with a fixed repair_id per saga, at most --rate a second. The same command again signals the\n" +
			"same repair_ids, which every saga records once: nothing is done twice. --dry-run signals nothing and\n" +
			"reports what would happen. --manual-review-of SALE lists, instead, every reservation of the sale that\n" +
			"PostgreSQL holds in MANUAL_REVIEW, whatever its saga does; a saga that does not run (terminated, failed,\n" +
			"never started) is started again from PostgreSQL with the repair as its first signal. Example:\n" +
			"  seckill repair bulk --query 'ActivityId = 1001 AND ReservationStatus = \"MANUAL_REVIEW\"' \\\n" +
			"    --action mark-resolved --operator alice --reason 'INC-42: settled by hand' --dry-run",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := workflows.ValidateBulkRepair(in); err != nil {
				return err
			}
			b, conns, err := openCLI(cmd.Context())
			if err != nil {
				return err
			}
			defer conns.Close()
			run, err := app.StartBulkRepair(cmd.Context(), conns.Temporal, b.Cfg.TemporalTaskQueue, in)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "started %s (run %s); waiting for its report\n", run.GetID(), run.GetRunID())
			var rep workflows.BulkRepairReport
			if err := run.Get(cmd.Context(), &rep); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return printBulk(cmd.OutOrStdout(), rep)
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Query, "query", "", "Temporal visibility query of the sagas (e.g. 'ActivityId = 1001 AND ReservationStatus = \"MANUAL_REVIEW\"')")
	f.Int64Var(&in.ManualReviewOf, "manual-review-of", 0, "instead of --query: every reservation of this sale in MANUAL_REVIEW in PostgreSQL, its saga running or not (one that does not run is started again with the repair)")
	f.StringVar(&in.Action, "action", "", "repair action: "+strings.Join(repairs.Actions, ", "))
	f.StringVar(&in.Operator, "operator", "", "who is doing this (recorded with every repair)")
	f.StringVar(&in.Reason, "reason", "", "why, with the evidence or incident id (recorded with every repair)")
	f.BoolVar(&in.DryRun, "dry-run", false, "signal nothing; report what would happen")
	f.Float64Var(&in.PerSecond, "rate", 20, "at most this many signals a second")
	f.IntVar(&in.Limit, "limit", 1000, "stop after this many sagas (run it again for the rest)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

func printBulk(w io.Writer, rep workflows.BulkRepairReport) error {
	verb := "applied"
	n := rep.Applied
	if rep.DryRun {
		verb, n = "would apply", rep.Would
	}
	if _, err := fmt.Fprintf(w, "bulk repair %s of %d saga(s): %s %d, refused %d, skipped %d%s\n", rep.Action, rep.Listed, verb, n,
		rep.Refused, rep.Skipped, map[bool]string{true: " (limit reached: run it again for the rest)"}[rep.Truncated]); err != nil {
		return err
	}
	for reason, c := range rep.RefusedByReason {
		if _, err := fmt.Fprintf(w, "  refused %d: %s\n", c, reason); err != nil {
			return err
		}
	}
	for _, it := range rep.Items {
		if _, err := fmt.Fprintf(w, "  %-12s %s %s\n", it.Outcome, it.WorkflowID, it.Reason); err != nil {
			return err
		}
	}
	return nil
}
