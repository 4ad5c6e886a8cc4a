package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"agentrl/envs/retool"
)

// toolCommand runs code as the environment's executors would.
func toolCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tool VERB",
		Short: "run code as the environment would: tool run",
	}
	verbs(cmd, "tool needs a verb: tool run --executor python|starlark < code")
	var executor string
	var timeout time.Duration
	run := &cobra.Command{
		Use:   "run --executor python|starlark [--timeout D] < code",
		Short: `runs code from stdin and prints {"observation", "status", …} (status ok, error, timeout or killed)`,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			code, err := readAll(env.Stdin)
			if err != nil {
				return fmt.Errorf("tool run: reading code from stdin: %w", err)
			}
			res, err := retool.RunTool(context.Background(), executor, timeout, code)
			if err != nil {
				return fmt.Errorf("tool run: %w", err)
			}
			return writeJSON(env.Stdout, res)
		},
	}
	run.Flags().StringVar(&executor, "executor", "starlark", "starlark (embedded) or python (python3 sandbox)")
	run.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "wall-clock limit of the call")
	cmd.AddCommand(run)
	return cmd
}
