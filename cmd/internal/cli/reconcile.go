package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/seckill/seckill/internal/platform/pg"
	"github.com/seckill/seckill/internal/reconcile"
	"github.com/seckill/seckill/state/steps"
	"github.com/seckill/seckill/workers/reconciler"
	"github.com/seckill/seckill/workflows"
)

func newReconcileCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "reconcile", Short: "Stock-conservation reconciliation: run it now, read reports, keep its Schedule"}
	cmd.AddCommand(newReconcileRunCmd(), newReconcileReportCmd(), newReconcileScheduleCmd())
	return cmd
}

func newReconcileRunCmd() *cobra.Command {
	var activity int64
	var asJSON bool
	run := &cobra.Command{
		Use:   "run",
		Short: "Run ReconcileWorkflow now (a worker must be running) and print its report",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, conns, err := openCLI(cmd.Context())
			if err != nil {
				return err
			}
			defer conns.Close()
			wr, err := conns.Temporal.ExecuteWorkflow(cmd.Context(), client.StartWorkflowOptions{
				ID: workflows.ReconcileWorkflowIDPrefix + "manual-" + uuid.NewString(), TaskQueue: b.Cfg.TemporalTaskQueue,
			}, workflows.ReconcileWorkflow, steps.ReconcileInput{ActivityID: activity})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "started %s; waiting for it\n", wr.GetID())
			var s steps.ReconcileSummary
			if err := wr.Get(cmd.Context(), &s); err != nil {
				return err
			}
			rep, err := reconcile.Load(cmd.Context(), conns.Pool, s.ReportID)
			if err != nil {
				return err
			}
			if err := printReport(cmd.OutOrStdout(), rep, asJSON); err != nil {
				return err
			}
			if len(s.FailedSKUs) > 0 {
				return fmt.Errorf("%d SKUs not reconciled (%s): see %s in the report", len(s.FailedSKUs),
					strings.Join(s.FailedSKUs, ", "), reconcile.SKUNotReconciled)
			}
			return nil
		},
	}
	run.Flags().Int64Var(&activity, "activity", 0, "reconcile only this activity (default: every recent sale)")
	run.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return run
}

func newReconcileReportCmd() *cobra.Command {
	var asJSON bool
	var id string
	report := &cobra.Command{
		Use:   "report",
		Short: "Print a stored reconciliation report (default: the newest)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := LoadBase()
			if err != nil {
				return err
			}
			rid := uuid.Nil
			if id != "" {
				if rid, err = uuid.Parse(id); err != nil {
					return fmt.Errorf("--id: %w", err)
				}
			}
			pool, err := pg.Open(cmd.Context(), b.Cfg.PostgresDSN, 2)
			if err != nil {
				return err
			}
			defer pool.Close()
			rep, err := reconcile.Load(cmd.Context(), pool, rid)
			if err != nil {
				return err
			}
			return printReport(cmd.OutOrStdout(), rep, asJSON)
		},
	}
	report.Flags().StringVar(&id, "id", "", "report id (default: the newest)")
	report.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return report
}

func newReconcileScheduleCmd() *cobra.Command {
	schedule := &cobra.Command{
		Use:   "schedule",
		Short: "Create the Temporal Schedule that runs reconciliation every SECKILL_RECONCILE_EVERY (idempotent)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, conns, err := openCLI(cmd.Context())
			if err != nil {
				return err
			}
			defer conns.Close()
			if err := reconciler.EnsureSchedule(cmd.Context(), conns.Temporal, b.Cfg.TemporalTaskQueue, b.Cfg.ReconcileEvery); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s runs every %s\n", workflows.ReconcileScheduleID, b.Cfg.ReconcileEvery)
			return nil
		},
	}
	return schedule
}

func printReport(w io.Writer, rep reconcile.Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(w, "report %s  %s → %s  watermark %s\n", rep.ReportID, rep.StartedAt.Format("15:04:05"),
		rep.FinishedAt.Format("15:04:05"), rep.Watermark.Format("15:04:05"))
	fmt.Fprintf(w, "skus %d, reservations checked %d, summary %v\n", rep.SKUs, rep.Checked, rep.Summary)
	for _, a := range rep.Anomalies {
		repair := "-" // LEFT and CHECK_FAILED entries have no repair
		if len(a.RepairID) >= 12 {
			repair = a.RepairID[:12]
		}
		fmt.Fprintf(w, "  %-30s %-18s %s  %s  repair %s\n", a.Type, a.Action, a.Object, a.Detail, repair)
	}
	return nil
}
