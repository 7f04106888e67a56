package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/repairs"
	"github.com/seckill/seckill/workflows"
)

func newRepairCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "repair", Short: "Repair sagas through their repair signal (docs/operations.md)"}
	cmd.AddCommand(newRepairBulkCmd())
	return cmd
}

func newRepairBulkCmd() *cobra.Command {
	var in workflows.BulkRepairInput
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bulk --query Q --action A --operator O --reason R [--dry-run] [--rate N]",
		Short: "Send the same repair to every running saga a Temporal visibility query lists, checked against PostgreSQL first",
		Long: "Runs BulkRepairWorkflow: it lists the running reservation sagas of --query, checks the repair against\n" +
			"PostgreSQL for each (a repair that does not fit a saga's state is refused, with the reason), and signals\n" +
			"the others with a fixed repair_id per saga, at most --rate a second. The same command again signals the\n" +
			"same repair_ids, which every saga records once: nothing is done twice. --dry-run signals nothing and\n" +
			"reports what would happen. Example:\n" +
			"  seckill repair bulk --query 'ActivityId = 1001 AND ReservationStatus = \"MANUAL_REVIEW\"' \\\n" +
			"    --action mark-resolved --operator alice --reason 'INC-42: settled by hand' --dry-run",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := workflows.ValidateBulkRepair(in); err != nil {
				return err
			}
			b, err := loadBase()
			if err != nil {
				return err
			}
			conns, err := app.Open(cmd.Context(), b.cfg, "seckill-cli", true, b.log, nil)
			if err != nil {
				return err
			}
			defer conns.Close()
			run, err := app.StartBulkRepair(cmd.Context(), conns.Temporal, b.cfg.TemporalTaskQueue, in)
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
