package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"agentrl/engine/record"
	"agentrl/store"
)

// fingerprintCommand prints a stored run's fingerprint (record.FingerprintOf): two runs of one
// recipe and seed made before and after a change that must not move the numbers print the same
// hash.
func fingerprintCommand(env Env) *cobra.Command {
	var path string
	var lines bool
	cmd := &cobra.Command{
		Use:   "fingerprint --store PATH [RUN] [--lines]",
		Short: "a stored run's metrics, trajectories, evaluations and checkpoint weights, timings left out, as one hash",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := store.Open(path, store.Options{ReadOnly: true})
			if err != nil {
				return err
			}
			defer s.Close()
			id := ""
			if len(args) == 1 {
				id = args[0]
			} else {
				run, err := s.NewestRun()
				if err != nil {
					return fmt.Errorf("fingerprint: %s: %w", path, err)
				}
				id = run.ID
			}
			f, err := record.FingerprintOf(s, id)
			if err != nil {
				return fmt.Errorf("fingerprint: run %s: %w", id, err)
			}
			if lines {
				for _, l := range f.Lines {
					fmt.Fprintln(env.Stdout, l)
				}
				return nil
			}
			kept := ""
			if f.EvalTrajectories > 0 {
				kept = fmt.Sprintf(" (%d evaluation trajectories kept, not hashed)", f.EvalTrajectories)
			}
			fmt.Fprintf(env.Stdout, "%s  %s: %d steps, %d trajectories, %d evaluations%s, %d checkpoints\n",
				f.Hash, id, f.Steps, f.Trajectories, f.Evaluations, kept, f.Checkpoints)
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "store", defaultStore, "the store file")
	cmd.Flags().BoolVar(&lines, "lines", false, "print the normalised records instead of their hash (to diff two runs)")
	return cmd
}
