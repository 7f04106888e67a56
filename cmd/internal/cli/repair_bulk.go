package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/repairs"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workflows"
)

func newRepairBulkCmd() *cobra.Command {
	var in workflows.BulkRepairInput
	var asJSON bool
	var show int
	cmd := &cobra.Command{
		Use:   "bulk (--query Q | --manual-review-of SALE) --action A --operator O --reason R [--dry-run] [--rate N] [--limit N]",
		Short: "Send the same repair to every running saga a Temporal visibility query lists, checked against PostgreSQL first",
		Long: "Runs BulkRepairWorkflow: it lists the running reservation sagas of --query, checks the repair against\n" +
			"PostgreSQL for each (a repair that does not fit a saga's state is refused, with the reason), and signals\n" +
			"the others with a fixed repair_id per saga, at most --rate a second, until --limit sagas are repaired\n" +
			"(refused and skipped ones do not count). The same command again signals the same repair_ids, which every\n" +
			"saga records once: nothing is done twice, and it goes on with the rest. --dry-run signals nothing and\n" +
			"reports what would happen. --manual-review-of SALE lists, instead, every reservation of the sale that\n" +
			"PostgreSQL holds in MANUAL_REVIEW, whatever its saga does; a saga that does not run (terminated, failed,\n" +
			"never started) is started again from PostgreSQL with the repair as its first signal. Progress goes to\n" +
			"stderr every 10 s; the report gives the counts and the first --show refused or skipped sagas; every\n" +
			"saga's outcome is kept in PostgreSQL: `seckill repair bulk-items <bulk id>` pages them. Example:\n" +
			"  seckill repair bulk --query 'ActivityId = 1001 AND ReservationStatus = \"MANUAL_REVIEW\"' \\\n" +
			"    --action mark-resolved --operator alice --reason 'INC-42: settled by hand' --dry-run",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := workflows.ValidateBulkRepair(in); err != nil {
				return err
			}
			if show < 0 {
				return fmt.Errorf("--show %d: want 0 or more", show)
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
			rep, err := awaitBulk(cmd.Context(), cmd.ErrOrStderr(), conns, run)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return printBulk(cmd.Context(), cmd.OutOrStdout(), conns, rep, show)
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Query, "query", "", "Temporal visibility query of the sagas (e.g. 'ActivityId = 1001 AND ReservationStatus = \"MANUAL_REVIEW\"')")
	f.Int64Var(&in.ManualReviewOf, "manual-review-of", 0, "instead of --query: every reservation of this sale in MANUAL_REVIEW in PostgreSQL, its saga running or not (one that does not run is started again with the repair)")
	f.StringVar(&in.Action, "action", "", "repair action: "+strings.Join(steps.RepairActions, ", "))
	f.StringVar(&in.Operator, "operator", "", "who is doing this (recorded with every repair)")
	f.StringVar(&in.Reason, "reason", "", "why, with the evidence or incident id (recorded with every repair)")
	f.BoolVar(&in.DryRun, "dry-run", false, "signal nothing; report what would happen")
	f.Float64Var(&in.PerSecond, "rate", 20, "at most this many signals a second (from 0.0000116, one a day, to 1000)")
	f.IntVar(&in.Limit, "limit", 1000, "stop after repairing this many sagas (refused and skipped ones do not count; run it again for the rest)")
	f.IntVar(&show, "show", 20, "print at most this many refused or skipped sagas (all of them: seckill repair bulk-items)")
	f.BoolVar(&asJSON, "json", false, "print the report (counts) as JSON")
	return cmd
}

// awaitBulk waits for the bulk repair's report, printing its progress (the
// items recorded so far) every 10 s.
func awaitBulk(ctx context.Context, w io.Writer, conns *app.Conns, run client.WorkflowRun) (workflows.BulkRepairReport, error) {
	bulkID := run.GetID() + "/" + run.GetRunID()
	if d, err := conns.Temporal.DescribeWorkflowExecution(ctx, run.GetID(), ""); err == nil && d.GetWorkflowExecutionInfo().GetFirstRunId() != "" {
		bulkID = run.GetID() + "/" + d.GetWorkflowExecutionInfo().GetFirstRunId() // attached to a run that continued as new
	}
	fmt.Fprintf(w, "started %s (bulk id %s); waiting for its report\n", run.GetID(), bulkID)
	var rep workflows.BulkRepairReport
	done := make(chan error, 1)
	go func() { done <- run.Get(ctx, &rep) }()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return rep, err
		case <-tick.C:
			if n, err := repairs.BulkCounts(ctx, conns.Pool, bulkID); err == nil {
				fmt.Fprintf(w, "  so far: applied %d, would apply %d, refused %d, skipped %d\n", n[steps.BulkApplied],
					n[steps.BulkWouldApply], n[steps.BulkRefused], n[steps.BulkSkipped])
			}
		}
	}
}

func printBulk(ctx context.Context, w io.Writer, conns *app.Conns, rep workflows.BulkRepairReport, show int) error {
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
	items := rep.Items // a bulk repair of the old shape carries them
	if rep.BulkID != "" && show > 0 {
		for _, o := range []string{steps.BulkRefused, steps.BulkSkipped} {
			if len(items) >= show {
				break
			}
			page, err := repairs.BulkItems(ctx, conns.Pool, rep.BulkID, o, "", show-len(items))
			if err != nil {
				return err
			}
			items = append(items, page...)
		}
	}
	for _, it := range items[:min(len(items), max(show, 0))] {
		if _, err := fmt.Fprintf(w, "  %-12s %s %s\n", it.Outcome, it.WorkflowID, it.Reason); err != nil {
			return err
		}
	}
	if rep.BulkID != "" {
		_, err := fmt.Fprintf(w, "every saga's outcome: seckill repair bulk-items %s\n", rep.BulkID)
		return err
	}
	return nil
}

func newRepairBulkItemsCmd() *cobra.Command {
	var outcome, after string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bulk-items <bulk id> [--outcome O] [--after WORKFLOW_ID] [--limit N]",
		Short: "Page what a bulk repair did to each saga (kept in PostgreSQL), in workflow ID order",
		Long: "Prints the outcome of each saga of a bulk repair (its bulk id is in the report), at most --limit, after\n" +
			"--after; the last line says how to get the next page. Example:\n" +
			"  seckill repair bulk-items bulk-repair-40f3c5e619ba91b4/<run id> --outcome REFUSED",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch outcome {
			case "", steps.BulkApplied, steps.BulkWouldApply, steps.BulkRefused, steps.BulkSkipped:
			default:
				return fmt.Errorf("--outcome %q: want APPLIED, WOULD_APPLY, REFUSED or SKIPPED", outcome)
			}
			if limit < 1 || limit > 100000 {
				return fmt.Errorf("--limit %d: want between 1 and 100000", limit)
			}
			_, conns, err := openCLI(cmd.Context())
			if err != nil {
				return err
			}
			defer conns.Close()
			items, err := repairs.BulkItems(cmd.Context(), conns.Pool, args[0], outcome, after, limit)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, it := range items {
				if asJSON {
					if err := json.NewEncoder(w).Encode(it); err != nil {
						return err
					}
				} else if _, err := fmt.Fprintf(w, "%-12s %s %s\n", it.Outcome, it.WorkflowID, it.Reason); err != nil {
					return err
				}
			}
			if len(items) == limit {
				fmt.Fprintf(cmd.ErrOrStderr(), "next page: seckill repair bulk-items %s --after %s\n", args[0], items[len(items)-1].WorkflowID)
			} else if len(items) == 0 && after == "" {
				return fmt.Errorf("no items recorded for bulk repair %s (the bulk id is in its report)", args[0])
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&outcome, "outcome", "", "only this outcome: APPLIED, WOULD_APPLY, REFUSED, SKIPPED")
	f.StringVar(&after, "after", "", "start after this workflow ID (the last of the previous page)")
	f.IntVar(&limit, "limit", 1000, "at most this many items")
	f.BoolVar(&asJSON, "json", false, "one JSON object a line")
	return cmd
}
