package train

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"

	"agentrl/engine/model"
)

// A trainer of a model with LoRA adapters (model.LoRA) trains the adapters only: the frozen base
// is an input of every graph, never differentiated, donated or updated, and has no AdamW
// moments. Without adapters every parameter is trained. tr.train lists the trained model
// parameters (indices into the model's specs); the value head's, when there is one, follow.

// numTrained is the number of trained parameter tensors: the model's trainable ones, then the
// value head's.
func (tr *Trainer) numTrained() int { return len(tr.train) + tr.nh }

// trainedNodes picks the trained parameters out of a graph's parameter nodes (every model
// parameter in spec order, then the value head's).
func (tr *Trainer) trainedNodes(all []*Node) []*Node {
	np := len(tr.m.Params.Specs)
	out := make([]*Node, 0, tr.numTrained())
	for _, i := range tr.train {
		out = append(out, all[i])
	}
	return append(out, all[np:]...)
}

// allParams are every graph's parameter tensors: the model's (frozen base included), then the
// value head's.
func (tr *Trainer) allParams() []*tensors.Tensor {
	return append(append([]*tensors.Tensor{}, tr.m.Params.Values...), tr.head...)
}

// paramArgs are allParams as graph arguments, the trained ones donated when donate (a frozen
// base is shared with rollout and the reference model and is never donated).
func (tr *Trainer) paramArgs(donate bool) []arg {
	all := tr.allParams()
	out := tensorArgs(all, false)
	if donate {
		np := len(tr.m.Params.Values)
		for _, i := range tr.train {
			out[i].donate = true
		}
		for i := np; i < len(all); i++ {
			out[i].donate = true
		}
	}
	return out
}

// setTrained installs new values of the trained parameters (params order).
func (tr *Trainer) setTrained(values []*tensors.Tensor) {
	for k, i := range tr.train {
		tr.m.Params.Values[i] = values[k]
	}
	copy(tr.head, values[len(tr.train):])
}

// TrainedSpecs lists the model parameters the trainer updates, in the order of Moments: the
// adapters with LoRA, every parameter without.
func (tr *Trainer) TrainedSpecs() []model.ParamSpec {
	out := make([]model.ParamSpec, len(tr.train))
	for k, i := range tr.train {
		out[k] = tr.m.Params.Specs[i]
	}
	return out
}
