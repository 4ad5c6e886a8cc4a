package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"agentrl/engine/regrade"
	"agentrl/store"
)

// regradeCommand judges a stored run's trajectories again with a grader and lists the verdicts
// that change.
func regradeCommand(env Env) *cobra.Command {
	var path, grader string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "regrade --store PATH RUN [--grader NAME] [--json]",
		Short: "judge a stored run's trajectories again (a grader or verifier change): the verdicts that change",
		Long: `Reads every stored trajectory of RUN, training and evaluation, takes its final answer as the run's
parser read it and its task's reference answer from the run's own task sets, and judges it with
--grader (verifier, math_dapo, math_dapo_slime; default: the run's reward.grader, as the current
binary implements it). Prints each trajectory whose verdict differs from the one the run recorded,
then a count: what a verifier change, or another experiment's grader, would have made of the
same run. The store is opened read-only.`,
		Example: `  agentrl-tui regrade --store runs/agentrl.db retool-hybrid-s1-20261128-141500
  agentrl-tui regrade --store runs/agentrl.db RUN --grader math_dapo --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				return err
			}
			defer st.Close()
			n, changed, err := regrade.Run(st, args[0], grader)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(env.Stdout)
				for _, c := range changed {
					if err := enc.Encode(c); err != nil {
						return err
					}
				}
				return enc.Encode(map[string]int{"judged": n, "changed": len(changed)})
			}
			for _, c := range changed {
				kind := "step"
				if c.Eval {
					kind = "eval of step"
				}
				fmt.Fprintf(env.Stdout, "%s %d task %s sample %d: %v -> %v  answer %q truth %q (%s)\n",
					kind, c.Step, c.TaskID, c.Sample, c.Stored, c.Now, c.Answer, c.Truth, c.Details)
			}
			_, err = fmt.Fprintf(env.Stdout, "%d trajectories judged, %d verdicts changed\n", n, len(changed))
			return err
		},
	}
	cmd.Flags().StringVar(&path, "store", "runs/agentrl.db", "the store holding the run")
	cmd.Flags().StringVar(&grader, "grader", "", "the grader to judge with (default: the run's reward.grader)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per changed verdict, then the counts")
	return cmd
}
