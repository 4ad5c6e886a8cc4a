package train

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
)

// compileKind is the kind under which Config.Compiles counts e's programs: "train" for the
// micro-step graphs (one per micro-batch shape: rows × length bucket), "optimizer" for AdamW on
// accumulated gradients, "logprob" and "value" for the forward-only graphs; another graph counts
// under its name.
func (tr *Trainer) compileKind(e *Exec) string {
	switch e {
	case tr.fused, tr.gradFirst, tr.gradNext:
		return "train"
	case tr.apply:
		return "optimizer"
	case tr.logprob:
		return "logprob"
	case tr.value:
		return "value"
	}
	return e.Name()
}
