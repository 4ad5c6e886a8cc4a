package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"agentrl/envs/dataset"
	"agentrl/recipes"
)

// dataCommand looks at dataset files as a run would read them: data inspect.
func dataCommand(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "data VERB",
		Short: "dataset files as a run reads them: data inspect",
	}
	verbs(cmd, "data needs a verb: data inspect PATH [--recipe R] [--json]")
	var recipePath string
	var asJSON bool
	var set runFlags // only --set
	inspect := &cobra.Command{
		Use:   "inspect PATH[:SPLIT] [--recipe R] [--set data.fields.PART=FIELD] [--json]",
		Short: "how many tasks a dataset file or folder gives, which fields they came from, and the first task's user turn and answer as the environment sees them",
		Long: `data inspect reads PATH (a .jsonl or .parquet file, or a HuggingFace dataset folder, ":SPLIT"
choosing a split) as data.train or a data.eval set would, and prints how many tasks it read, which
fields the problem, answer and id came from, and the first task: its user turn exactly as the
environment will see it (after data.prompt_template) and its answer. --recipe R takes data.fields
and data.prompt_template from the recipe R; without it the defaults apply. --set changes them as
it would for a run (--set data.fields.answer=solution), with or without --recipe.`,
		Example: "  agentrl-tui data inspect testdata/data/dapo-verl.parquet\n  agentrl-tui data inspect testdata/data/aime2024:train --recipe recipes/retool.yaml --json",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef(cmd, "data inspect needs one PATH (a .jsonl or .parquet file, or a dataset folder)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var o dataset.Options
			over, err := set.overrides()
			if err != nil {
				return err
			}
			if recipePath != "" {
				r, err := recipes.Load(recipePath, recipes.Options{NoDataFiles: true, Overrides: over})
				if err != nil {
					return err
				}
				if o.Fields, err = dataset.FieldsFrom(r.Data.Fields); err != nil {
					return err
				}
				o.Template = r.Data.PromptTemplate
			} else if len(over) > 0 { // no recipe: the data fields and template alone
				fields := map[string]string{}
				for k, v := range over {
					switch part, ok := strings.CutPrefix(k, "data.fields."); {
					case ok && part != "":
						fields[part] = v
					case k == "data.prompt_template":
						o.Template = v
					default:
						return fmt.Errorf("data inspect: --set %s: without --recipe, --set takes data.fields.PART=FIELD and data.prompt_template only", k)
					}
				}
				if o.Fields, err = dataset.FieldsFrom(fields); err != nil {
					return err
				}
			}
			o.Progress = func(p dataset.Progress) { fmt.Fprintln(env.Stderr, "data inspect:", p) }
			s, err := dataset.Read(args[0], o)
			if err != nil {
				return fmt.Errorf("data inspect: %w", err)
			}
			rep := inspectReport(s)
			if asJSON {
				return writeJSON(env.Stdout, rep)
			}
			printInspect(env, rep)
			return nil
		},
	}
	inspect.Flags().StringVar(&recipePath, "recipe", "", "take data.fields and data.prompt_template from this recipe")
	inspect.Flags().StringArrayVar(&set.set, "set", nil, "set a data field as a run would: --set data.fields.answer=solution (repeatable)")
	inspect.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.AddCommand(inspect)
	return cmd
}

// dataInspect is what data inspect reports.
type dataInspect struct {
	Path  string   `json:"path"`
	Split string   `json:"split,omitempty"`
	Files []string `json:"files"`
	Tasks int      `json:"tasks"`
	// Repeats are rows left out as repeats of an earlier one; SystemDropped rows whose chat
	// prompt's system message was left out.
	Repeats       int               `json:"repeats"`
	SystemDropped int               `json:"system_dropped"`
	Fields        map[string]string `json:"fields"` // part → the field it came from ("" id: numbered by row)
	// Chat says the prompt field held chat messages, of which the last user message was read.
	Chat  bool `json:"chat"`
	First struct {
		ID       string `json:"id"`
		UserTurn string `json:"user_turn"`
		Answer   string `json:"answer"`
	} `json:"first"`
}

func inspectReport(s *dataset.Set) dataInspect {
	rep := dataInspect{Path: s.Path, Split: s.Split, Files: s.Files, Tasks: len(s.Tasks), Repeats: s.Repeats, SystemDropped: s.SystemDropped, Chat: s.Chat,
		Fields: map[string]string{"prompt": s.Used.Prompt, "answer": s.Used.Answer, "id": s.Used.ID}}
	t := s.Tasks[0]
	rep.First.ID, rep.First.UserTurn, rep.First.Answer = t.ID, t.Prompt, t.Answer
	return rep
}

func printInspect(env Env, rep dataInspect) {
	w := env.Stdout
	fmt.Fprintf(w, "%s\n", rep.Path)
	fmt.Fprintf(w, "  files    %s\n", strings.Join(rep.Files, ", "))
	notes := ""
	if rep.Repeats > 0 {
		notes += fmt.Sprintf(" (%d repeated rows left out)", rep.Repeats)
	}
	if rep.SystemDropped > 0 {
		notes += fmt.Sprintf(" (%d system messages left out: the environment writes its own)", rep.SystemDropped)
	}
	fmt.Fprintf(w, "  tasks    %d%s\n", rep.Tasks, notes)
	id := rep.Fields["id"]
	if id == "" {
		id = "(none: numbered by row)"
	}
	prompt := rep.Fields["prompt"]
	if rep.Chat {
		prompt += " (chat messages: the last user message)"
	}
	fmt.Fprintf(w, "  fields   prompt ← %s, answer ← %s, id ← %s\n", prompt, rep.Fields["answer"], id)
	fmt.Fprintf(w, "first task %s\n", rep.First.ID)
	fmt.Fprintf(w, "  answer   %s\n", rep.First.Answer)
	fmt.Fprintf(w, "  user turn (as the environment sees it):\n")
	for _, l := range strings.Split(rep.First.UserTurn, "\n") {
		fmt.Fprintf(w, "    %s\n", l)
	}
}
