package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"agentrl/envs/mathverify"
)

// verifyCommand judges one model response against a reference answer with the training
// verifier (envs/mathverify).
func verifyCommand(env Env) *cobra.Command {
	var truth string
	var fallback bool
	cmd := &cobra.Command{
		Use:   "verify --truth ANSWER [--last-number-fallback] < response",
		Short: `judges a response on stdin against --truth as training does; prints {"correct", "extracted", "normalized"}`,
		Long: `Reads a model response on stdin, extracts its final answer (the last \boxed{…}, else the last
"Answer: …" line, else the last <answer>…</answer>), compares it with --truth as the ReTool reward
does (envs/mathverify: LaTeX normalised, exact rationals, expressions, tuples, sets, intervals,
lists) and prints one JSON line: {"correct": true|false, "extracted": "…", "normalized": "…"}.

--last-number-fallback is the recipe's reward.last_number_fallback: an answer counts when its last
number equals a numeric truth, and a response with nothing to extract is judged by its last number.

Exit status: 0 when the response was judged, correct or not (read "correct"); 1 for an error: a
missing --truth (with the usage) or a stdin that cannot be read.`,
		Example: `  echo 'so the answer is $\boxed{\frac12}$' | agentrl-tui verify --truth 0.5
  printf 'work…\nAnswer: 33\n' | agentrl-tui verify --truth 033`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(truth) == "" {
				return usagef(cmd, "verify: --truth is missing or empty; give the reference answer, e.g. --truth 42 or --truth '\\frac{1}{2}'")
			}
			response, err := readAll(env.Stdin)
			if err != nil {
				return fmt.Errorf("verify: reading the response from stdin: %w", err)
			}
			return writeJSON(env.Stdout, mathverify.Check(response, truth, mathverify.Options{LastNumberFallback: fallback}))
		},
	}
	cmd.Flags().StringVar(&truth, "truth", "", "the reference answer (required)")
	cmd.Flags().BoolVar(&fallback, "last-number-fallback", false, "count an answer whose last number equals a numeric truth (reward.last_number_fallback)")
	return cmd
}
