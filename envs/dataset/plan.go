package dataset

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"

	"agentrl/envs"
	"agentrl/recipes"
)

// Plan is what a recipe's data section asks for.
type Plan struct {
	// Train is the training data (a file or folder, ":SPLIT" allowed).
	Train string
	// Eval are the named evaluation sets, in the recipe's order.
	Eval []recipes.EvalSet
	Options
	// Shuffle shuffles the training tasks with Seed before anything is taken from them.
	Shuffle bool
	Seed    uint64
	// TrainSize keeps the first TrainSize training tasks (0 keeps all).
	TrainSize int
	// Validation tasks are taken from the training data, apart from the tasks trained on.
	Validation int
	// Heldout tasks are taken from the training data too when there is no evaluation set.
	Heldout int
	// AllowOverlap keeps an evaluation problem that is also a training problem; without it the
	// overlap is an error naming them.
	AllowOverlap bool
}

// PlanOf is the recipe's data plan (nil when data.train is empty: the tasks come from env.tasks).
func PlanOf(r *recipes.Recipe) (*Plan, error) {
	d := r.Data
	if d.Train == "" {
		return nil, nil
	}
	f, err := FieldsFrom(d.Fields)
	if err != nil {
		return nil, err
	}
	return &Plan{Train: d.Train, Eval: d.Eval, Options: Options{Fields: f, Template: d.PromptTemplate},
		Shuffle: d.Shuffle, Seed: uint64(r.Run.Seed), TrainSize: d.TrainSize,
		Validation: r.Eval.ValidationTasks, Heldout: r.Env.Tasks.HeldoutSize, AllowOverlap: d.AllowOverlap}, nil
}

// Tasks are a plan's task sets.
type Tasks struct {
	Train, Validation, Heldout []envs.Task
	// TrainSet is what data.train read to; EvalSets what each evaluation set did (their tasks cut
	// to size), in order.
	TrainSet *Set
	EvalSets []NamedSet
	// Overlaps are the evaluation problems also in the training data (kept only with
	// AllowOverlap).
	Overlaps []Overlap
}

// NamedSet is one evaluation set.
type NamedSet struct {
	Name string
	*Set
}

// Overlap is one evaluation problem found in the training data.
type Overlap struct {
	Set, EvalID, TrainID string
}

// MetaSet is the task Meta key that names an evaluation task's set.
const MetaSet = "set"

// Load reads the plan's data. The training tasks are shuffled (when asked), then the first
// Validation of them become the validation tasks, the next Heldout the held-out tasks when there
// is no evaluation set (each at most a third of the data), and the first TrainSize of the rest
// are trained on. Each evaluation set keeps its first size tasks, its tasks' Meta[MetaSet] its
// name; the held-out tasks are the sets one after another.
func Load(p *Plan) (*Tasks, error) {
	train, err := Read(p.Train, p.Options)
	if err != nil {
		return nil, fmt.Errorf("data.train: %w", err)
	}
	out := &Tasks{TrainSet: train}
	for _, es := range p.Eval {
		s, err := Read(es.Path, p.Options)
		if err != nil {
			return nil, fmt.Errorf("data.eval %s: %w", es.Name, err)
		}
		if es.Size > 0 && es.Size < len(s.Tasks) {
			s.Tasks, s.Problems = s.Tasks[:es.Size], s.Problems[:es.Size]
		}
		for i := range s.Tasks {
			t := &s.Tasks[i]
			t.Meta = map[string]string{MetaSet: es.Name}
			if len(p.Eval) > 1 {
				t.ID = es.Name + "/" + t.ID // ids stay apart across sets
			}
		}
		out.EvalSets = append(out.EvalSets, NamedSet{es.Name, s})
		out.Heldout = append(out.Heldout, s.Tasks...)
	}
	out.Overlaps = Overlaps(train, out.EvalSets)
	if len(out.Overlaps) > 0 && !p.AllowOverlap {
		return nil, overlapError(out.Overlaps)
	}
	order := make([]int, len(train.Tasks))
	for i := range order {
		order[i] = i
	}
	if p.Shuffle {
		rng := rand.New(rand.NewPCG(p.Seed, 0x9e3779b97f4a7c15))
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	all := make([]envs.Task, len(order))
	for i, j := range order {
		all[i] = train.Tasks[j]
	}
	v := min(p.Validation, len(all)/3)
	out.Validation, all = all[:v], all[v:]
	if len(p.Eval) == 0 {
		h := min(max(p.Heldout, 1), len(all)/3)
		if h == 0 {
			return nil, fmt.Errorf("data.train: %s has %d tasks, too few to hold some out for evaluation; add data.eval sets", p.Train, len(train.Tasks))
		}
		out.Heldout, all = all[:h], all[h:]
	}
	if p.TrainSize > 0 && p.TrainSize < len(all) {
		all = all[:p.TrainSize]
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("data.train: %s has no task left to train on after %d validation tasks", p.Train, v)
	}
	out.Train = all
	return out, nil
}

func overlapError(os []Overlap) error {
	var b strings.Builder
	for i, o := range os {
		if i == 8 {
			fmt.Fprintf(&b, ", … (%d in all)", len(os))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s = train %s", o.Set, o.EvalID, o.TrainID)
	}
	return fmt.Errorf("data: %d evaluation problems are also training problems (%s); remove them from one side, or set data.allow_overlap: true to evaluate on them anyway", len(os), b.String())
}

// Overlaps finds the evaluation problems that are also training problems: after Normalize, one
// text holds the other (so a problem wrapped in a dataset's instructions still matches), when the
// shorter has at least 16 characters; shorter ones must be equal.
func Overlaps(train *Set, sets []NamedSet) []Overlap {
	norm := make([]string, len(train.Problems))
	exact := map[string]int{}
	for i, p := range train.Problems {
		norm[i] = Normalize(p)
		if _, ok := exact[norm[i]]; !ok {
			exact[norm[i]] = i
		}
	}
	var out []Overlap
	for _, s := range sets {
		for i, p := range s.Problems {
			e := Normalize(p)
			hit := -1
			if j, ok := exact[e]; ok {
				hit = j
			} else if len(e) >= minContained {
				for j, t := range norm {
					if len(t) >= minContained && (strings.Contains(t, e) || strings.Contains(e, t)) {
						hit = j
						break
					}
				}
			}
			if hit >= 0 {
				out = append(out, Overlap{Set: s.Name, EvalID: s.Tasks[i].ID, TrainID: train.Tasks[hit].ID})
			}
		}
	}
	return out
}

// minContained is the shortest normalised problem found inside another.
const minContained = 16

var (
	latexSpacing = regexp.MustCompile(`\\(left|right|displaystyle|textstyle|[,;:! ]|quad|qquad)`)
	latexFrac    = regexp.MustCompile(`\\[dt]frac`)
	dropChars    = regexp.MustCompile(`[\s$\\{}]+`)
)

// Normalize is a problem's text as overlaps are compared: lower case, LaTeX spacing and sizing
// commands, \dfrac and \tfrac as \frac, dollar signs, braces, backslashes and all white space
// left out.
func Normalize(s string) string {
	s = strings.ToLower(s)
	s = latexSpacing.ReplaceAllString(s, "")
	s = latexFrac.ReplaceAllString(s, `\frac`)
	return dropChars.ReplaceAllString(s, "")
}
