package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"agentrl/envs/grade"
	"agentrl/envs/mathverify"
)

// verifyCommand judges model responses against reference answers with one of the reward's graders
// (envs/grade): one response on stdin against --truth, or a JSONL table with --jsonl.
func verifyCommand(env Env) *cobra.Command {
	var truth, graderName string
	var fallback, jsonl bool
	var toolCalls int
	cmd := &cobra.Command{
		Use:   "verify (--truth ANSWER | --jsonl) [--grader NAME] [--tool-calls N] [--last-number-fallback] < input",
		Short: `judges a response on stdin against --truth as training does (or a JSONL table with --jsonl); prints {"correct", "score", "extracted", "normalized", "grader"}`,
		Long: `Reads a model response on stdin, judges it against --truth with a grader and prints one JSON line:
{"correct": true|false, "score": S, "extracted": "…", "normalized": "…", "grader": "NAME@VERSION"}.

--grader NAME chooses how (` + strings.Join(grade.Names(), ", ") + `):
  verifier         the default and the training verifier (envs/mathverify): extracts the final
                   answer (the last \boxed{…}, else the last "Answer: …" line, else the last
                   <answer>…</answer>) and compares values: LaTeX normalised, exact rationals,
                   expressions, tuples, sets, intervals, lists. score 1 or 0.
  math_dapo        the reward of verl's ReTool recipe: math_dapo.compute_score with
                   strict_box_verify=True — the last \boxed{…} in the response's final 100
                   characters must be the truth as a string, with no normalisation (\boxed{0.5} is
                   wrong for \frac{1}{2}, \boxed{033} for 33); score +1, or for a wrong answer (or
                   no box) min(-0.6, -1 + 0.1·tool calls): -1, -0.9, -0.8, -0.7, then -0.6.
  math_dapo_slime  the same as slime's ReTool example scores it, where num_turns is the tool-call
                   count itself: a wrong answer gets min(-0.6, -1 + 0.05·(tool calls - 2)), -1.1
                   with no tool call, -0.6 from ten.
--tool-calls N is the trajectory's number of tool-call rounds, for the math_dapo shaping (0 by
default). --last-number-fallback is the verifier's reward.last_number_fallback: an answer counts
when its last number equals a numeric truth, and a response with nothing to extract is judged by
its last number.

--jsonl judges a whole table in one process: each stdin line is
{"response": "…", "truth": "…", "tool_calls": N} (tool_calls optional, other fields ignored) and
each gives one output line, the verdict with the input's line number first:
{"line": N, "correct": …, "score": …, "extracted": …, "normalized": …, "grader": …}. A line that
is not such an object gives {"line": N, "error": "…"} and the run goes on; blank lines are skipped.

Exit status: 0 when every response was judged, correct or not (read "correct"); 1 for an error: a
missing --truth (with the usage), an unknown grader, a stdin that cannot be read, or with --jsonl
any malformed line (after all lines are written; standard error says how many).`,
		Example: `  echo 'so the answer is $\boxed{\frac12}$' | agentrl-tui verify --truth 0.5
  printf 'work…\nAnswer: 33\n' | agentrl-tui verify --truth 033
  echo 'so $\boxed{0.5}$' | agentrl-tui verify --grader math_dapo --tool-calls 2 --truth '\frac{1}{2}'
  agentrl-tui verify --jsonl --grader math_dapo < table.jsonl > verdicts.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g, err := grade.New(graderName, mathverify.Options{LastNumberFallback: fallback})
			if err != nil {
				return usagef(cmd, "verify: --grader: %v", err)
			}
			if fallback && g.Name() != "verifier" {
				return usagef(cmd, "verify: --last-number-fallback is an option of the verifier; --grader %s takes none", g.Name())
			}
			if toolCalls < 0 {
				return usagef(cmd, "verify: --tool-calls %d is negative", toolCalls)
			}
			if jsonl {
				if cmd.Flags().Changed("truth") || cmd.Flags().Changed("tool-calls") {
					return usagef(cmd, "verify: --truth and --tool-calls judge one response; with --jsonl every line carries its own truth and tool_calls")
				}
				return verifyJSONL(env, g)
			}
			if strings.TrimSpace(truth) == "" {
				return usagef(cmd, "verify: --truth is missing or empty; give the reference answer, e.g. --truth 42 or --truth '\\frac{1}{2}' (or use --jsonl)")
			}
			response, err := readAll(env.Stdin)
			if err != nil {
				return fmt.Errorf("verify: reading the response from stdin: %w", err)
			}
			return writeJSON(env.Stdout, g.Grade(response, truth, toolCalls))
		},
	}
	cmd.Flags().StringVar(&truth, "truth", "", "the reference answer (required without --jsonl)")
	cmd.Flags().StringVar(&graderName, "grader", grade.Default, "the grader: "+strings.Join(grade.Names(), ", "))
	cmd.Flags().IntVar(&toolCalls, "tool-calls", 0, "the trajectory's tool-call rounds, for the math_dapo graders' shaping of a wrong answer")
	cmd.Flags().BoolVar(&jsonl, "jsonl", false, `judge stdin's JSON lines {"response", "truth", "tool_calls"}, one verdict line each`)
	cmd.Flags().BoolVar(&fallback, "last-number-fallback", false, "count an answer whose last number equals a numeric truth (reward.last_number_fallback; verifier only)")
	return cmd
}

// verifyLine is one input line of verify --jsonl.
type verifyLine struct {
	Response  *string `json:"response"`
	Truth     *string `json:"truth"`
	ToolCalls *int    `json:"tool_calls"`
}

// lineVerdict is one output line of verify --jsonl.
type lineVerdict struct {
	Line int `json:"line"`
	grade.Verdict
}

type lineError struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// verifyJSONL judges every line of stdin with g and writes one line each; malformed lines are
// reported in place and make the exit status 1 at the end.
func verifyJSONL(env Env, g grade.Grader) error {
	in := bufio.NewReaderSize(env.Stdin, 1<<16)
	out := bufio.NewWriterSize(env.Stdout, 1<<16)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	bad, firstBad := 0, 0
	for n := 1; ; n++ {
		raw, readErr := in.ReadBytes('\n')
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			out.Flush()
			return fmt.Errorf("verify: reading line %d of stdin: %w", n, readErr)
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			var rec any
			if v, err := parseVerifyLine(raw); err != nil {
				if bad == 0 {
					firstBad = n
				}
				bad++
				rec = lineError{Line: n, Error: err.Error()}
			} else {
				rec = lineVerdict{Line: n, Verdict: g.Grade(*v.Response, *v.Truth, toolCallsOf(v))}
			}
			if err := enc.Encode(rec); err != nil {
				return err
			}
			// Flush whenever the next line is not already read, so that a caller feeding one line
			// at a time reads each verdict at once.
			if in.Buffered() == 0 {
				if err := out.Flush(); err != nil {
					return err
				}
			}
		}
		if readErr != nil { // io.EOF
			break
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if bad > 0 {
		fmt.Fprintf(env.Stderr, "agentrl-tui: verify: %d malformed line(s), the first line %d; see their \"error\" lines\n", bad, firstBad)
		return exitStatus(1)
	}
	return nil
}

func toolCallsOf(v verifyLine) int {
	if v.ToolCalls == nil {
		return 0
	}
	return *v.ToolCalls
}

func parseVerifyLine(raw []byte) (verifyLine, error) {
	var v verifyLine
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("not a JSON object {\"response\", \"truth\", \"tool_calls\"}: %v", err)
	}
	switch {
	case v.Response == nil:
		return v, errors.New(`"response" is missing`)
	case v.Truth == nil || strings.TrimSpace(*v.Truth) == "":
		return v, errors.New(`"truth" is missing or empty`)
	case v.ToolCalls != nil && *v.ToolCalls < 0:
		return v, fmt.Errorf(`"tool_calls" %d is negative`, *v.ToolCalls)
	}
	return v, nil
}
