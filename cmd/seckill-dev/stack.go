package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"
)

// newStackCmd runs scripts/stack.sh, which owns the local stack (it installs
// Debian packages, resolves Maven artifacts and starts processes, work that
// belongs in a shell script rather than in the service binary).
func newStackCmd() *cobra.Command {
	return &cobra.Command{
		Use:       "stack up|down|status|env",
		Short:     "Start, stop or show the local stack of real services (scripts/stack.sh)",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"up", "down", "status", "env"},
		RunE: func(cmd *cobra.Command, args []string) error {
			script, err := findStackScript()
			if err != nil {
				return err
			}
			c := exec.CommandContext(cmd.Context(), "bash", script, args[0]) // #nosec G204 -- the command and its arguments are this program's own (its binary, the stack script, the benchmark tools), not user input
			c.Stdout, c.Stderr, c.Stdin = cmd.OutOrStdout(), cmd.ErrOrStderr(), os.Stdin
			return c.Run()
		},
	}
}

func findStackScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "stack.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("scripts/stack.sh not found above the working directory: run from the project checkout")
		}
		dir = parent
	}
}
