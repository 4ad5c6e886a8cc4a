package engine

import (
	"errors"
	"fmt"
	"strings"

	"agentrl/store"
)

// RunSource is what a comparison reads of runs: their records and evaluations.
type RunSource interface {
	GetRun(id string) (store.Run, error)
	Evals(run string) ([]store.Eval, error)
}

var (
	_ RunSource = (*store.Store)(nil)
	_ RunSource = Stores(nil)
)

// Stores reads runs from several stores, each run from the store that has it. Runs made at
// the same time live in stores of their own (a running run holds its store's write lock), and a
// comparison of seeds run side by side needs all of them.
type Stores []*store.Store

// GetRun finds id in the store that has it.
func (ss Stores) GetRun(id string) (store.Run, error) {
	st, err := ss.holding(id)
	if err != nil {
		return store.Run{}, err
	}
	return st.GetRun(id)
}

// Evals returns run's evaluations from the store that has it.
func (ss Stores) Evals(run string) ([]store.Eval, error) {
	st, err := ss.holding(run)
	if err != nil {
		return nil, err
	}
	return st.Evals(run)
}

// holding is the one store that has run id. A run id found in two stores is refused: runs made
// at the same time in stores of their own can share an id (ids before the seed was in them
// did), and reading the first would pair the wrong runs without a word.
func (ss Stores) holding(id string) (*store.Store, error) {
	var errs, in []string
	var found *store.Store
	for _, st := range ss {
		_, err := st.GetRun(id)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		found = st
		in = append(in, st.Path())
	}
	switch {
	case len(in) > 1:
		return nil, fmt.Errorf("run %q is in %d of the stores given (%s): give them to compare one at a time, or only the store of the run meant", id, len(in), strings.Join(in, ", "))
	case found != nil:
		return found, nil
	case len(errs) == 0:
		return nil, errors.New("no store given")
	case len(errs) == 1:
		return nil, errors.New(errs[0])
	}
	return nil, fmt.Errorf("no store has run %q: %s", id, strings.Join(errs, "; "))
}
