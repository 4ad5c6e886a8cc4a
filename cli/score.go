package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"agentrl/engine/tokenizer"
)

// scoreCommand prints teacher-forced log-probs, the argmax per position and a greedy continuation.
func scoreCommand(env Env) *cobra.Command {
	var bf backendFlags
	var dir, ids, dtype string
	var greedy int
	cmd := &cobra.Command{
		Use:   "score --model DIR --ids 1,2,3 [--greedy N]",
		Short: "teacher-forced log-probs, argmax and greedy continuation of token ids, as JSON",
		Long: `Prints {"next_token_logprobs": [...], "argmax": [...], "greedy": [...]}, where
next_token_logprobs[t] = log p(ids[t+1] given ids[..t]).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return errors.New("score: --model DIR is required")
			}
			prompt, err := parseIDs(ids)
			if err != nil {
				return fmt.Errorf("score: %w", err)
			}
			dt, err := parseDType(dtype)
			if err != nil {
				return fmt.Errorf("score: %w", err)
			}
			m, err := bf.loadModel(env.Stderr, dir, dt)
			if err != nil {
				return err
			}
			defer m.Close()
			s, err := m.Score([][]int32{prompt})
			if err != nil {
				return err
			}
			out := struct {
				NextTokenLogprobs []float32 `json:"next_token_logprobs"`
				Argmax            []int32   `json:"argmax"`
				Greedy            []int32   `json:"greedy"`
			}{s.NextLogProbs[0], s.Argmax[0], []int32{}}
			if greedy > 0 {
				if out.Greedy, err = m.Greedy(prompt, greedy); err != nil {
					return err
				}
			}
			return writeJSON(env.Stdout, out)
		},
	}
	bf.register(cmd.Flags())
	cmd.Flags().StringVar(&dir, "model", "", "HuggingFace model folder (config.json + safetensors)")
	cmd.Flags().StringVar(&ids, "ids", "", "comma-separated token ids")
	cmd.Flags().IntVar(&greedy, "greedy", 0, "also return the N-token greedy continuation")
	cmd.Flags().StringVar(&dtype, "dtype", "float32", "compute dtype: float32 or bfloat16")
	return cmd
}

// tokenizeCommand prints the ids and token strings of a text or a rendered chat.
func tokenizeCommand(env Env) *cobra.Command {
	var dir, chat string
	cmd := &cobra.Command{
		Use:   "tokenize --tokenizer DIR [--chat FILE.json] [TEXT]",
		Short: `token ids and token strings as JSON: {"ids": [...], "tokens": [...]}`,
		Long: `Prints {"ids": [...], "tokens": [...]}. --chat renders {"messages": [...], "tools": [...],
"add_generation_prompt": bool} with the Qwen chat template first.`,
		Args: oneArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			text := ""
			if len(args) > 0 {
				text = args[0]
			}
			if dir == "" {
				return errors.New("tokenize: --tokenizer DIR is required")
			}
			if (text == "") == (chat == "") {
				return errors.New("tokenize: give TEXT or --chat FILE.json (one of them)")
			}
			tok, err := tokenizer.Load(dir)
			if err != nil {
				return err
			}
			if chat != "" {
				if text, err = tokenizer.ReadChatFile(chat); err != nil {
					return err
				}
			}
			ids := tok.Encode(text)
			return writeJSON(env.Stdout, struct {
				IDs    []int32  `json:"ids"`
				Tokens []string `json:"tokens"`
			}{ids, tok.Tokens(ids)})
		},
	}
	cmd.Flags().StringVar(&dir, "tokenizer", "", "folder with tokenizer.json (or the file itself)")
	cmd.Flags().StringVar(&chat, "chat", "", `a JSON file {"messages": [...], "tools": [...], "add_generation_prompt": bool} rendered with the Qwen chat template first`)
	return cmd
}
