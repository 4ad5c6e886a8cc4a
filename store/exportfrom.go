package store

import (
	"fmt"
	"strings"
)

// ExportFrom writes the checkpoint of run at step in the store at path to dir as a HuggingFace
// folder, opening the store read-only; a run or step that is not there is named with what is.
func ExportFrom(path, run string, step int, dir string) error {
	st, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.GetRun(run); err != nil {
		return fmt.Errorf("%w (agentrl-tui runs --store %s lists the runs)", err, path)
	}
	if _, err := st.Manifest(run, step); err != nil {
		var steps []string
		if cps, cerr := st.Checkpoints(run); cerr == nil {
			for _, m := range cps {
				steps = append(steps, fmt.Sprint(m.Step))
			}
		}
		if len(steps) == 0 {
			return fmt.Errorf("run %s has no checkpoint to evaluate", run)
		}
		return fmt.Errorf("run %s has no checkpoint at step %d; its checkpoints are at steps %s", run, step, strings.Join(steps, ", "))
	}
	return st.Export(run, step, dir)
}
