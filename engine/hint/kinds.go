package hint

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"agentrl/engine/batch"
	"agentrl/engine/model"
	"agentrl/engine/tokenizer"
	"agentrl/envs"
	"agentrl/envs/retool"
	"agentrl/envs/sandbox"
	"agentrl/envs/synthetic"
)

// KindLift is what one kind of rules hint does for a model as teacher: over tasks, the mean
// per-token change of the model's log-prob of each task's reference demonstration when the hint
// for a first attempt with that flaw stands before the problem. It is the run's hint_lift_demo
// for one kind of hint at a time, without a run.
type KindLift struct {
	Flaw    string  `json:"flaw"`
	Lift    float64 `json:"lift"`
	Tasks   int     `json:"tasks"`
	Example string  `json:"example"` // the hint written for the first task
	// Groups splits Lift by kind of task (synthetic.TaskGroup), in the order the groups first occur.
	Groups []GroupLift `json:"groups"`
}

// GroupLift is a KindLift over the tasks of one synthetic.TaskGroup.
type GroupLift struct {
	Group string  `json:"group"`
	Lift  float64 `json:"lift"`
	Tasks int     `json:"tasks"`
}

// ProbeKinds measures KindLift for every flaw of retool.Flaws over tasks, with m as
// the teacher. Demonstrations and hints are laid out as the SFT lays them out (batch.MaskAssistant, as engine/sft does),
// their code run through sessions of exec.
func ProbeKinds(ctx context.Context, m *model.Model, tok *tokenizer.Tokenizer, tasks []envs.Task, exec sandbox.Executor, seed uint64) ([]KindLift, error) {
	sess, err := exec.NewSession()
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	demos := make([][]envs.Message, len(tasks))
	plain := make([][]float32, len(tasks))
	for i, t := range tasks {
		if demos[i], err = retool.Demonstration(ctx, t, retool.DemoTool, sess, retool.FormatInterpreter); err != nil {
			return nil, err
		}
		if plain[i], err = demoLogProbs(m, tok, retool.DefaultSystem, t, demos[i], ""); err != nil {
			return nil, err
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var out []KindLift
	for _, flaw := range retool.Flaws {
		row := KindLift{Flaw: flaw}
		for i, t := range tasks {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			h, err := retool.FlawedAttemptHint(ctx, t, flaw, sess, rng)
			if err != nil {
				return nil, err
			}
			if i == 0 {
				row.Example = h
			}
			with, err := demoLogProbs(m, tok, retool.DefaultSystem, t, demos[i], h)
			if err != nil {
				return nil, err
			}
			lift, err := meanLift(t, with, plain[i])
			if err != nil {
				return nil, err
			}
			row.Lift += lift
			row.Tasks++
			group := synthetic.TaskGroup(t)
			g := slices.IndexFunc(row.Groups, func(g GroupLift) bool { return g.Group == group })
			if g < 0 {
				g = len(row.Groups)
				row.Groups = append(row.Groups, GroupLift{Group: group})
			}
			row.Groups[g].Lift += lift
			row.Groups[g].Tasks++
		}
		row.Lift /= float64(max(row.Tasks, 1))
		for g := range row.Groups {
			row.Groups[g].Lift /= float64(row.Groups[g].Tasks)
		}
		out = append(out, row)
	}
	return out, nil
}

// DemoConversation is t's demonstration after the system prompt and t's problem with hint
// ("" for none) before it.
func DemoConversation(system string, t envs.Task, demo []envs.Message, hint string) []envs.Message {
	conv := []envs.Message{{Role: "system", Content: system}, {Role: "user", Content: retool.WithHint(t.Prompt, hint)}}
	for _, msg := range demo {
		conv = append(conv, envs.Message{Role: msg.Role, Content: msg.Content})
	}
	return conv
}

// demoLogProbs is m's log-prob of each of the demonstration's own (assistant) tokens after the
// system prompt and t's problem with hint ("" for none), laid out as a rollout lays out a
// trajectory (maskAssistant).
func demoLogProbs(m *model.Model, tok *tokenizer.Tokenizer, system string, t envs.Task, demo []envs.Message, hint string) ([]float32, error) {
	conv := DemoConversation(system, t, demo, hint)
	ids, mask, err := batch.MaskAssistant(tok, conv, nil)
	if err != nil {
		return nil, fmt.Errorf("task %s: the demonstration does not render: %w", t.ID, err)
	}
	first := len(ids) // the demonstration's first own token: what comes before is not read
	for j := 1; j < len(ids); j++ {
		if mask[j] {
			first = j
			break
		}
	}
	lp, err := m.LogProbsFrom(ids, first)
	if err != nil {
		return nil, err
	}
	var out []float32
	for j := first; j < len(ids); j++ {
		if mask[j] {
			out = append(out, lp[j])
		}
	}
	return out, nil
}

// meanLift is the mean per-token difference of a demonstration's own-token log-probs with a
// hint (with) and without (without).
func meanLift(t envs.Task, with, without []float32) (float64, error) {
	if len(with) != len(without) || len(with) == 0 {
		return 0, fmt.Errorf("task %s: the demonstration has %d own tokens after the hinted prompt and %d after the plain one", t.ID, len(with), len(without))
	}
	var sum float64
	for j := range with {
		sum += float64(with[j] - without[j])
	}
	return sum / float64(len(with)), nil
}
