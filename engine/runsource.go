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

// Stores reads runs from several stores, each run from the first store that has it. Runs made at
// the same time live in stores of their own (a running run holds its store's write lock), and a
// comparison of seeds run side by side needs all of them.
type Stores []*store.Store

// GetRun finds id in the first store that has it.
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

func (ss Stores) holding(id string) (*store.Store, error) {
	var errs []string
	for _, st := range ss {
		_, err := st.GetRun(id)
		if err == nil {
			return st, nil
		}
		errs = append(errs, err.Error())
	}
	if len(errs) == 0 {
		return nil, errors.New("no store given")
	}
	if len(errs) == 1 {
		return nil, errors.New(errs[0])
	}
	return nil, fmt.Errorf("no store has run %q: %s", id, strings.Join(errs, "; "))
}
