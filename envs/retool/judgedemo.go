package retool

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strings"

	"agentrl/envs"
	"agentrl/envs/sandbox"
)

// JudgeKinds are the attempts a judge demonstration shows the model PRM: the three a policy
// solves with (tool, recover, direct), a malformed turn it recovers from (format), the flaws the
// rules hinter writes bridge thoughts for (Flaws, less timeout, which Starlark's step limit makes
// a resource stop), and two that recover from a failed run and still end wrong, so that the shape
// of an attempt never gives its verdict away: the outcome line has to be read.
var JudgeKinds = []string{"tool", "recover", "direct", "format", "wrong_copy", "computed_else", "guessed", "name_error", "no_answer",
	"recover_wrong_copy", "recover_computed_else"}

// JudgeDemo is one judge demonstration: the model PRM's prompt for an attempt and the reply it
// should write, from what the environment knows of the attempt — each step's checked verdict
// (CheckedSteps) and the bridge thought the rules hinter writes for it (Rules.HintFor), or -1.
type JudgeDemo struct {
	Prompt, Reply string
	Verdicts      []float64
	Hint          string // "" for \boxed{-1}
	Summary       envs.Summary
}

// JudgeDemonstration plays an attempt of the given kind at t through a real environment (the
// chat layout, observations in the interpreter format, code run by session s's executor), then
// writes the PRM prompt from template as the PRM phase does (no token budget: the caller drops
// what is too long) and the reply a judge should give: "Step k: correct|wrong" per step, then
// \boxed{bridge thought} or \boxed{-1}.
func JudgeDemonstration(ctx context.Context, t envs.Task, kind string, exec sandbox.Executor, rng *rand.Rand, template string) (JudgeDemo, error) {
	code := t.Meta["code"]
	if code == "" {
		return JudgeDemo{}, fmt.Errorf("task %s has no reference code", t.ID)
	}
	box := func(s string) string { return `\boxed{` + s + `}` }
	run := func(c string) string { return "<code>\n" + c + "\n</code>" }
	wrong := func() string {
		a, ok := new(big.Int).SetString(t.Answer, 10)
		if !ok {
			return t.Answer + "1"
		}
		return a.Add(a, big.NewInt(int64(1+rng.IntN(9)))).String()
	}
	var actions []func(lastOutput string) string
	fixed := func(s string) func(string) string { return func(string) string { return s } }
	switch kind {
	case "tool":
		actions = append(actions, fixed(run(code)), fixed(box(t.Answer)))
	case "recover":
		broken := strings.Replace(code, "print(", "print(undefined_name + ", 1)
		actions = append(actions, fixed(run(broken)), fixed(run(code)), fixed(box(t.Answer)))
	case "direct":
		actions = append(actions, fixed(box(t.Answer)))
	case "format":
		actions = append(actions, fixed("Let me think about it."), fixed(run(code)), fixed(box(t.Answer)))
	case "wrong_copy":
		actions = append(actions, fixed(run(code)), fixed(box(wrong())))
	case "computed_else":
		other, ok := otherOperation(code)
		if !ok {
			return JudgeDemo{}, fmt.Errorf("task %s: no other operation for %q", t.ID, code)
		}
		actions = append(actions, fixed(run(other)), func(out string) string { return box(strings.TrimSpace(out)) })
	case "guessed":
		actions = append(actions, fixed(box(wrong())))
	case "name_error":
		actions = append(actions, fixed(run(strings.Replace(code, "print(", "print(undefined_name + ", 1))), fixed(box(wrong())))
	case "no_answer":
		actions = append(actions, fixed(run(code)))
	case "recover_wrong_copy", "recover_computed_else":
		broken := strings.Replace(code, "print(", "print(undefined_name + ", 1)
		actions = append(actions, fixed(run(broken)))
		if kind == "recover_wrong_copy" {
			actions = append(actions, fixed(run(code)), fixed(box(wrong())))
			break
		}
		other, ok := otherOperation(code)
		if !ok {
			return JudgeDemo{}, fmt.Errorf("task %s: no other operation for %q", t.ID, code)
		}
		actions = append(actions, fixed(run(other)), func(out string) string { return box(strings.TrimSpace(out)) })
	default:
		return JudgeDemo{}, fmt.Errorf("judge demonstration kind %q is not one of %v", kind, JudgeKinds)
	}
	env, err := New(Config{Executor: exec, MaxTurns: len(actions), Format: FormatInterpreter})
	if err != nil {
		return JudgeDemo{}, err
	}
	defer env.Close()
	if _, err := env.Reset(ctx, t); err != nil {
		return JudgeDemo{}, err
	}
	var steps []string
	var facts []StepFacts
	last := ""
	for i, act := range actions {
		a := act(last)
		st, err := env.Step(ctx, a)
		if err != nil {
			return JudgeDemo{}, err
		}
		f := StepFacts{FormatError: st.FormatError != "" && len(st.ToolCalls) == 0}
		if len(st.ToolCalls) > 0 {
			tc := st.ToolCalls[len(st.ToolCalls)-1]
			f.ToolStatus, f.Output, last = tc.Status, tc.Output, tc.Output
		}
		steps, facts = append(steps, PRMStepText(a, st.Observation)), append(facts, f)
		if st.Done {
			if i != len(actions)-1 {
				return JudgeDemo{}, fmt.Errorf("task %s: the %s attempt ended after %d of %d turns", t.ID, kind, i+1, len(actions))
			}
			break
		}
	}
	sum := env.Summary()
	d := JudgeDemo{Summary: sum, Verdicts: CheckedSteps(facts, sum, t, env.cfg.Verify)}
	if !sum.Correct {
		if d.Hint = sayableHint(Rules{}.HintFor(sum, t), t.Answer); d.Hint == "" {
			return JudgeDemo{}, fmt.Errorf("task %s: the %s attempt's bridge thought cannot be written in a PRM reply", t.ID, kind)
		}
	}
	d.Prompt, _ = PRMPrompt(template, PRMCase{Task: t, Steps: steps, Summary: sum}, nil, 0)
	d.Reply = JudgeReply(d.Verdicts, d.Hint)
	return d, nil
}

// PRMHintText is a rules hint as a PRM can write it inside its \boxed{…}: without boxes or tags
// of its own, which would end the box or make the reply unreadable (ParsePRM).
func PRMHintText(h string) string {
	return strings.NewReplacer(`\boxed{answer}`, "a boxed answer", `\boxed{}`, "the box", "<code>", "code tags", "</code>", "").Replace(h)
}

var quotedRE = regexp.MustCompile(`\s*\(?"[^"]*"\)?`)

// sayableHint is the rules hint h as a PRM reply can carry it: boxes and tags written out
// (PRMHintText); where the hint would then reveal the answer or not parse (a copying slip names
// the printed number, which is the answer; an error message may hold it), the hint without its
// quotes, else the copying slip's generic sentence; "" when none can be said.
func sayableHint(h, answer string) string {
	ok := func(c string) bool {
		got, ok := ParseJudgeHint(`\boxed{`+c+`}`, answer, 0)
		return ok && got == c
	}
	cands := []string{PRMHintText(h), PRMHintText(quotedRE.ReplaceAllString(h, ""))}
	if strings.HasPrefix(h, hintCopySlip) {
		cands = append(cands, "The final answer does not match the printed result: copy the number the code printed into the box.")
	}
	for _, c := range cands {
		if ok(c) {
			return c
		}
	}
	return ""
}

// JudgeReply is the model PRM's reply in the seed's convention: a verdict line per step, then the
// bridge thought boxed, or \boxed{-1} for none.
func JudgeReply(verdicts []float64, hint string) string {
	var b strings.Builder
	for k, v := range verdicts {
		word := "correct"
		if v != VerdictCorrect {
			word = "wrong"
		}
		fmt.Fprintf(&b, "Step %d: %s\n", k+1, word)
	}
	if hint == "" {
		b.WriteString(NoHint)
	} else {
		b.WriteString(`\boxed{` + hint + `}`)
	}
	return b.String()
}

// otherOperation is a one-line program's code with its operation changed (+ to *, * to +, - to +,
// % to -, // to *): what an attempt that computed something else ran.
func otherOperation(code string) (string, bool) {
	for _, sw := range [][2]string{{" // ", " * "}, {" + ", " * "}, {" * ", " + "}, {" - ", " + "}, {" % ", " - "}} {
		if strings.Contains(code, sw[0]) {
			return strings.Replace(code, sw[0], sw[1], 1), true
		}
	}
	return "", false
}
