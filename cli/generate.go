package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"agentrl/engine/model"
	"agentrl/engine/play"
	"agentrl/engine/residency"
	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
	"agentrl/recipes"
)

// promptIDs is what generate feeds the model for --prompt TEXT: by default TEXT as the user's
// message of a chat, rendered with the chat template after the system prompt a ReTool rollout
// opens with (the default recipe's observation format) and the generation prompt, as a run's
// rollout builds it (engine/play); with raw, TEXT tokenized as it is.
func promptIDs(tok *tokenizer.Tokenizer, prompt string, raw bool) ([]int32, error) {
	if raw {
		return tok.Encode(prompt), nil
	}
	return play.PromptIDs(tok, recipes.Default(), prompt, "")
}

// generateCommand runs one request through the rollout engine.
func generateCommand(env Env) *cobra.Command {
	var bf backendFlags
	var dir, ids, prompt, tokDir, dtype string
	var maxNew, topK int
	var temp, topP float64
	var seed uint64
	var asJSON, raw bool
	cmd := &cobra.Command{
		Use:   "generate [--model DIR] (--ids 1,2,3 | --prompt TEXT [--raw]) [--max-new N] [--json]",
		Short: "run one request through the rollout engine",
		Long: `Runs one request through the rollout engine and prints the generated text (with --ids or
--raw, also the new token ids, their log-probs and why it stopped).

--prompt TEXT is a question, as a ReTool rollout asks it: TEXT becomes the user's message of a
chat, rendered with the chat template after the ReTool system prompt, with the assistant's turn
opened (what a run's model is trained on), e.g.
  agentrl-tui generate --model testdata/builtin --prompt "What is 77 + 87?" --max-new 96
--raw feeds TEXT tokenized as it is, with no template and no system prompt; --ids feeds token
ids as they are.

Without --model it runs the built-in model, as run, eval and serve do.

With --json it prints {"new_ids", "logprobs", "stop_reason"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" { // as run, eval and serve: the built-in model
				var err error
				if dir, err = model.BuiltinDir(env.Builtin); err != nil {
					return fmt.Errorf("generate: %w", err)
				}
			}
			if (ids == "") == (prompt == "") {
				return errors.New("generate: give exactly one of --ids 1,2,3 or --prompt TEXT")
			}
			if raw && prompt == "" {
				return errors.New("generate: --raw goes with --prompt TEXT (it feeds TEXT without the chat template)")
			}
			var tok *tokenizer.Tokenizer
			if prompt != "" || tokDir != "" {
				if tokDir == "" {
					tokDir = dir
				}
				var err error
				if tok, err = tokenizer.Load(tokDir); err != nil {
					return fmt.Errorf("generate: %w", err)
				}
			}
			var in []int32
			var err error
			chat := prompt != "" && !raw
			if prompt != "" {
				if in, err = promptIDs(tok, prompt, raw); err != nil {
					return fmt.Errorf("generate: %w", err)
				}
			} else if in, err = parseIDs(ids); err != nil {
				return fmt.Errorf("generate: %w", err)
			}
			dt, err := parseDType(dtype)
			if err != nil {
				return fmt.Errorf("generate: %w", err)
			}
			loaded, err := bf.loadModel(env.Stderr, dir, dt)
			if err != nil {
				return err
			}
			defer loaded.Close()
			m, done, err := residency.InferenceModel(loaded, false) // as serve decodes (see serve)
			if err != nil {
				return fmt.Errorf("generate: %w", err)
			}
			defer done()
			res, err := rollout.GenerateOnce(context.Background(), m, tok, in, maxNew,
				rollout.Sampling{Temperature: float32(temp), TopP: float32(topP), TopK: topK, Seed: seed})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(env.Stdout, struct {
					NewIDs     []int32   `json:"new_ids"`
					LogProbs   []float32 `json:"logprobs"`
					StopReason string    `json:"stop_reason"`
				}{res.IDs, res.LogProbs, string(res.Stop)})
			}
			if tok != nil {
				fmt.Fprintf(env.Stdout, "%s\n", tok.Decode(res.IDs, false))
			}
			if chat {
				fmt.Fprintf(env.Stdout, "stop: %s after %d tokens\n", res.Stop, len(res.IDs))
				return nil
			}
			fmt.Fprintf(env.Stdout, "new ids: %v\nlog-probs: %v\nstop: %s\n", res.IDs, res.LogProbs, res.Stop)
			return nil
		},
	}
	fl := cmd.Flags()
	bf.register(fl)
	fl.StringVar(&dir, "model", "", "HuggingFace model folder")
	fl.StringVar(&ids, "ids", "", "comma-separated prompt token ids")
	fl.StringVar(&prompt, "prompt", "", "the user's message, rendered with the chat template and the ReTool system prompt, then tokenized with --tokenizer (default: the model folder's tokenizer.json)")
	fl.BoolVar(&raw, "raw", false, "with --prompt: tokenize TEXT as it is, without the chat template or system prompt")
	fl.StringVar(&tokDir, "tokenizer", "", "tokenizer folder or file for --prompt and for decoding (default: --model)")
	fl.IntVar(&maxNew, "max-new", 32, "tokens to generate at most")
	fl.Float64Var(&temp, "temperature", 0, "sampling temperature; 0 = greedy")
	fl.Float64Var(&topP, "top-p", 1, "nucleus sampling mass (1 = off)")
	fl.IntVar(&topK, "top-k", 0, "top-k sampling (0 = off)")
	fl.Uint64Var(&seed, "seed", 1, "random seed of the request")
	fl.BoolVar(&asJSON, "json", false, "print {new_ids, logprobs, stop_reason} as JSON")
	fl.StringVar(&dtype, "dtype", "float32", "compute dtype: float32 or bfloat16")
	return cmd
}
