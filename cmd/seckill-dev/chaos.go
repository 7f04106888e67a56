package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seckill/seckill/cmd/internal/cli"
	"github.com/seckill/seckill/internal/platform/failpoint"
	"github.com/seckill/seckill/tools/chaos"
)

func newChaosCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "chaos", Short: "Crash-point matrix and kill soak on the local stack (docs/chaos.md)"}
	cmd.AddCommand(newChaosMatrixCmd(), newChaosKillCmd())
	return cmd
}

func newChaosMatrixCmd() *cobra.Command {
	var (
		runs     int
		points   string
		pipeline bool
		asJSON   bool
		logs     string
	)
	matrix := &cobra.Command{
		Use:   "matrix",
		Short: "Arm each matrix failpoint in its real process, let it crash there, restart it, check the invariants; repeat",
		Long: `For each failpoint (default: the ten of docs/spec.md#failpoints) and each run: the process that checks it on its real
path (gateway, saga worker or starter) is restarted with SECKILL_FAILPOINTS=<name>=1:crash, a small sale is
played over HTTP (a rejection, a payment through the provider's callback, an expiry), the process kills
itself at the failpoint (SIGKILL), is restarted clean, and the sale must settle: every reservation final,
nothing open, nothing owed, no saga running, invariants I1-I7. Prints a table: runs, crashes, violations,
time to converge p50/p99. Uses its own database, Redis logical database, topics and task queue on the stack
started by 'make up'. Exit status 1 if anything was violated.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := chaosCluster(cmd, logs)
			if err != nil {
				return err
			}
			defer c.Close()
			var fps []string
			if points != "" {
				fps = strings.Split(points, ",")
			}
			rep, err := chaos.Matrix(cmd.Context(), c, chaos.MatrixOptions{Failpoints: fps, Runs: runs, Pipeline: pipeline,
				Progress: cmd.ErrOrStderr()})
			return printChaos(cmd, rep, err, asJSON)
		},
	}
	matrix.Flags().IntVar(&runs, "runs", 5, "runs per failpoint")
	matrix.Flags().StringVar(&points, "failpoints", "", "comma-separated failpoints (default: "+strings.Join(failpoint.Seed, ",")+")")
	matrix.Flags().BoolVar(&pipeline, "pipeline", false, "restart the crashed process armed again at once (soak speed); sales settle meanwhile")
	matrix.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	matrix.Flags().StringVar(&logs, "logs", "", "directory for the processes' logs (default: a new one under .stack/logs/chaos)")
	return matrix
}

func newChaosKillCmd() *cobra.Command {
	var (
		asJSON   bool
		logs     string
		duration time.Duration
		every    time.Duration
		targets  string
		freeze   time.Duration
		rounds   int
	)
	kill := &cobra.Command{
		Use:   "kill",
		Short: "Random SIGKILLs (or, with --freeze, SIGSTOPs) of the gateway, workers, Temporal server, broker, PostgreSQL and Redis under load",
		Long: `Plays sales continuously while killing a random component with SIGKILL every --every (±50%), restarting
it after a short random pause (ours directly, the stack's with scripts/stack.sh up), for --duration. Then
stops killing, waits for every sale to settle and checks the invariants of each. Prints kills per component,
violations and time to converge after the last disturbance p50/p99.

With --freeze D a component is frozen instead (SIGSTOP for D, then SIGCONT; resumed whatever happens, also
by a detached backstop should this command die): the report adds what the gateway's callers saw while it was
frozen (answers, 503s with Retry-After, requests left without an answer, slowest answer), and convergence
is counted from the SIGCONT. --rounds N disturbs each component in turn, N times over, instead of a random
one for --duration.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if freeze < 0 || rounds < 0 {
				return fmt.Errorf("--freeze %s, --rounds %d: want a positive duration and count (0 for none)", freeze, rounds)
			}
			c, err := chaosCluster(cmd, logs)
			if err != nil {
				return err
			}
			defer c.Close()
			var comps []string
			if targets != "" {
				comps = strings.Split(targets, ",")
			}
			root, err := os.Getwd()
			if err != nil {
				return err
			}
			rep, err := chaos.Kill(cmd.Context(), c, chaos.KillOptions{Duration: duration, Every: every, Components: comps, Freeze: freeze, Rounds: rounds,
				StackScript: filepath.Join(root, "scripts", "stack.sh"), StackDir: filepath.Join(root, ".stack"), Progress: cmd.ErrOrStderr()})
			return printChaos(cmd, rep, err, asJSON)
		},
	}
	kill.Flags().DurationVar(&duration, "duration", 5*time.Minute, "how long to keep killing")
	kill.Flags().DurationVar(&every, "every", 20*time.Second, "mean time between kills")
	kill.Flags().StringVar(&targets, "components", "", "comma-separated subset of "+strings.Join(chaos.KillTargets, ","))
	kill.Flags().DurationVar(&freeze, "freeze", 0, "freeze (SIGSTOP, then SIGCONT) for this long instead of SIGKILL, e.g. 8s")
	kill.Flags().IntVar(&rounds, "rounds", 0, "disturb each component in turn this many times over instead of at random for --duration")
	kill.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	kill.Flags().StringVar(&logs, "logs", "", "directory for the processes' logs (default: a new one under .stack/logs/chaos)")
	return kill
}

func chaosCluster(cmd *cobra.Command, logs string) (*chaos.Cluster, error) {
	if !failpoint.Enabled {
		return nil, fmt.Errorf("this binary was built without failpoints: build it with -tags failpoints (make chaos builds bin/seckill-chaos)")
	}
	b, err := cli.LoadBase()
	if err != nil {
		return nil, err
	}
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if logs == "" {
		logs = filepath.Join(".stack", "logs", "chaos", time.Now().Format("20060102-150405"))
	}
	c, err := chaos.NewCluster(cmd.Context(), chaos.ClusterOptions{Bin: bin, Dir: logs, Config: b.Cfg, Log: b.Log})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "chaos: processes' logs in %s\n", logs)
	if err := c.Start(cmd.Context()); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func printChaos(cmd *cobra.Command, rep chaos.Report, err error, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.Print(cmd.OutOrStdout())
	}
	if err != nil {
		return err
	}
	if n := rep.Violations(); n > 0 {
		return fmt.Errorf("%d violations", n)
	}
	return nil
}
