package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
)

// toolCommand runs code as the environment's executors would.
func toolCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tool VERB",
		Short: "run code as the environment would: tool run",
	}
	verbs(cmd, "tool needs a verb: tool run --executor python|starlark < code")
	var executor, format string
	var timeout time.Duration
	run := &cobra.Command{
		Use:   "run --executor python|starlark [--timeout D] [--format chat|retool|tool_call] < code (or, with --format, an assistant turn)",
		Short: `runs code from stdin and prints {"observation", "status", …}; with --format, reads a whole assistant turn and prints what the environment parsed, each run and what the context takes`,
		Long: `Without --format, stdin is code: it runs once and the JSON says what the model would see
(observation, status ok, error, timeout or killed, output, seconds).

With --format chat, retool or tool_call (env.format), stdin is a whole assistant turn as the model
wrote it (a ReTool-SFT response with its <code> blocks, fences and <interpreter> blocks, or a
<tool_call>): the JSON gives the code blocks the environment parsed (fences taken off), the tool
calls and the message content before them (tool_call), the answer it read (answer, has_answer)
and any format error; runs, each block run in order in one session, with its observation exactly
as the format appends it (retool: "\n<interpreter>\n…\n</interpreter>\n" after the block's
</code>); and for chat and tool_call, appended: the text the context takes after the turn when
generation stopped at its tool call (the closing <|im_end|> and the observation turn; none when
the turn gave an answer, which ends the trajectory).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			code, err := readAll(env.Stdin)
			if err != nil {
				return fmt.Errorf("tool run: reading code from stdin: %w", err)
			}
			if format != "" {
				res, err := retool.RunTurn(context.Background(), executor, timeout, retool.Layout(format), code)
				if err != nil {
					return fmt.Errorf("tool run: %w", err)
				}
				return writeJSON(env.Stdout, turnReport{TurnRun: res, Appended: appended(res)})
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
	run.Flags().StringVar(&format, "format", "", "read stdin as a whole assistant turn of this trajectory format: chat, retool or tool_call (env.format)")
	cmd.AddCommand(run)
	return cmd
}

// turnReport is `tool run --format`'s JSON.
type turnReport struct {
	retool.TurnRun
	// Appended is, in the chat and tool_call formats, what the context takes after the turn:
	// <|im_end|> closing it and the observation turn as the chat template renders it.
	Appended string `json:"appended,omitempty"`
}

// appended is the text a chat or tool_call turn's runs add to the context (the environment joins
// the observations of a turn's blocks into one turn), "" for retool (each run's observation is
// appended after its own block) and for a turn that answered.
func appended(res retool.TurnRun) string {
	if res.Format == retool.LayoutReTool || res.HasAnswer || len(res.Runs) == 0 {
		return ""
	}
	var obs []string
	for _, r := range res.Runs {
		obs = append(obs, r.Observation)
	}
	m := envs.Message{Role: "user", Content: strings.Join(obs, "\n")}
	if res.Format == retool.LayoutToolCall {
		m.Role = "tool"
	}
	return "<|im_end|>" + tokenizer.ObservationTurn(m)
}
