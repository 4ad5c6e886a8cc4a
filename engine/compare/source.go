package compare

import (
	"errors"
	"fmt"
	"strings"

	"agentrl/store"
)

// Source is what a comparison reads of runs: their records and evaluations.
type Source interface {
	GetRun(id string) (store.Run, error)
	Evals(run string) ([]store.Eval, error)
}

var (
	_ Source = (*store.Store)(nil)
	_ Source = Stores(nil)
)

// Stores reads runs from several stores, each run from the store that has it. Runs made at
// the same time live in stores of their own (a running run holds its store's write lock), and a
// comparison of seeds run side by side needs all of them.
type Stores []*store.Store

// GetRun finds id in the store that has it (or, for PATH:ID, in the store at PATH).
func (ss Stores) GetRun(id string) (store.Run, error) {
	st, id, err := ss.holding(id)
	if err != nil {
		return store.Run{}, err
	}
	return st.GetRun(id)
}

// Evals returns run's evaluations from the store that has it (or, for PATH:ID, from the store
// at PATH).
func (ss Stores) Evals(run string) ([]store.Eval, error) {
	st, run, err := ss.holding(run)
	if err != nil {
		return nil, err
	}
	return st.Evals(run)
}

// holding is the one store that has run id, and the id within it. An id may name its store, as
// PATH:ID with PATH one of the stores given as it was given; a bare id found in two stores is
// refused: runs made at the same time in stores of their own can share an id (the same recipe
// and seed started in the same second, with other --set values), and reading the first would
// pair the wrong runs without a word.
func (ss Stores) holding(id string) (*store.Store, string, error) {
	for _, st := range ss {
		if rest, ok := strings.CutPrefix(id, st.Path()+":"); ok {
			return st, rest, nil
		}
	}
	st, err := ss.bare(id)
	if _, several := err.(inSeveral); err != nil && !several { // not an id: perhaps a run's name, as runs prints it
		if nst, nid, ok, nerr := ss.named(id); ok || nerr != nil {
			return nst, nid, nerr
		}
	}
	return st, id, err
}

// named is the one run whose name is name among the stores, its store and id; ok is false when
// no run has that name, and a name several runs share is an error listing their ids.
func (ss Stores) named(name string) (*store.Store, string, bool, error) {
	var found *store.Store
	var ids []string
	for _, st := range ss {
		runs, err := st.Runs()
		if err != nil {
			continue
		}
		for _, r := range runs {
			if r.Name == name {
				found = st
				ids = append(ids, r.ID)
			}
		}
	}
	switch len(ids) {
	case 0:
		return nil, "", false, nil
	case 1:
		return found, ids[0], true, nil
	}
	return nil, "", false, fmt.Errorf("%d runs are named %q (%s): give one of their ids", len(ids), name, strings.Join(ids, ", "))
}

// inSeveral is bare's error for an id found in more than one store.
type inSeveral struct{ msg string }

func (e inSeveral) Error() string { return e.msg }

// bare is the one store among ss that has run id.
func (ss Stores) bare(id string) (*store.Store, error) {
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
		return nil, inSeveral{fmt.Sprintf("run %q is in %d of the stores given (%s): name the store before the id, as %s:%s", id, len(in), strings.Join(in, ", "), in[0], id)}
	case found != nil:
		return found, nil
	case len(errs) == 0:
		return nil, errors.New("no store given")
	case len(errs) == 1:
		return nil, errors.New(errs[0])
	}
	return nil, fmt.Errorf("no store has run %q: %s", id, strings.Join(errs, "; "))
}
