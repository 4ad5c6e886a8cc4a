package retool

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"agentrl/envs"
)

// The model PRM (prm.kind model), in the seed's convention: a language model reads the whole
// trajectory — its steps with the tools' outputs — gives each step a verdict on a line of its own
// ("Step 2: wrong") and ends with one bridge thought as \boxed{…}, or \boxed{-1} when the
// attempt needs no fix. PRMPrompt fills the recipe's template (recipes/prm-retool.txt by
// default) within a token budget; ParsePRM reads the reply.

// PRMCase is what the PRM reads of one finished trajectory.
type PRMCase struct {
	Task envs.Task
	// Steps are the trajectory's steps in order: each the policy's text of one stretch (up to a
	// tool call or the end) followed by the tool's output, as the PRM reads them.
	Steps   []string
	Summary envs.Summary
}

// PRMStepText is one step as the PRM reads it: the assistant's text, then the tool's output.
func PRMStepText(assistant, observation string) string {
	s := strings.TrimSpace(assistant)
	if o := strings.TrimSpace(observation); o != "" {
		s += "\n[tool output]\n" + o
	}
	return s
}

// PRMPrompt fills template for c: {problem}, {answer} (the reference answer), {outcome} (the
// verifier's finding), {steps} (how many there are, and which are left out) and {trajectory}
// (the steps, "Step k:" before each). count is the PRM's token count of a text; budget is the
// most tokens the prompt may take (≤ 0: no bound). A trajectory that does not fit loses whole
// steps, never part of one: first those after step 1, from the earliest on (the start of the
// attempt sets it up, its end holds the answer and the last errors), then step 1 too; a marker
// says where and how many, and {steps} says so. shown lists the 1-based steps the prompt holds
// (empty when not even the last step fits: the PRM cannot judge it).
func PRMPrompt(template string, c PRMCase, count func(string) int, budget int) (prompt string, shown []int) {
	n := len(c.Steps)
	texts := make([]string, n)
	for i, s := range c.Steps {
		texts[i] = fmt.Sprintf("Step %d:\n%s\n", i+1, s)
	}
	// render shows steps [0, keepHead) and [from, n), with a marker between when it left some out.
	render := func(keepHead, from int) (string, []int) {
		var b strings.Builder
		var shown []int
		for i := 0; i < keepHead; i++ {
			b.WriteString(texts[i])
			b.WriteString("\n")
			shown = append(shown, i+1)
		}
		steps := strconv.Itoa(n)
		if from > keepHead {
			fmt.Fprintf(&b, "[%s left out here: the attempt is longer than the %s tokens this judge reads. Judge only the steps shown.]\n\n",
				stepRange(keepHead+1, from+1), strconv.Itoa(budget))
			steps += " (" + stepRange(keepHead+1, from+1) + " left out to fit)"
		}
		for i := from; i < n; i++ {
			b.WriteString(texts[i])
			b.WriteString("\n")
			shown = append(shown, i+1)
		}
		if n == 0 {
			b.WriteString("(the attempt is empty)\n")
		}
		return fillPRM(template, c, steps, strings.TrimRight(b.String(), "\n")), shown
	}
	prompt, shown = render(n, n)
	if budget <= 0 || count(prompt) <= budget {
		return prompt, shown
	}
	// Sizes measured once: the frame with one marker and no steps, and each step; then the
	// choice is checked on the whole text, leaving one more step out while it is over.
	frame := count(fillPRM(template, c, strconv.Itoa(n)+" (steps 1–1 left out to fit)",
		fmt.Sprintf("[steps 1–1 left out here: the attempt is longer than the %d tokens this judge reads. Judge only the steps shown.]", budget)))
	sizes := make([]int, n)
	for i, t := range texts {
		sizes[i] = count(t) + 1
	}
	for head := 1; head >= 0; head-- {
		if head > n-1 {
			continue
		}
		used := frame
		for i := 0; i < head; i++ {
			used += sizes[i]
		}
		// Add steps from the end while they fit; then confirm on the real text.
		from := n
		for from > head && used+sizes[from-1] <= budget {
			from--
			used += sizes[from]
		}
		for ; from < n; from++ {
			if p, s := render(head, from); count(p) <= budget {
				return p, s
			}
		}
	}
	p, _ := render(0, n)
	return p, nil
}

func stepRange(a, b int) string { // steps a … b−1, 1-based a
	if b-a == 1 {
		return "step " + strconv.Itoa(a)
	}
	return fmt.Sprintf("steps %d–%d", a, b-1)
}

// fillPRM replaces the template's placeholders.
func fillPRM(template string, c PRMCase, steps, trajectory string) string {
	outcome := "the final answer is wrong"
	switch {
	case c.Summary.Correct:
		outcome = "the final answer is correct"
	case !c.Summary.Answered:
		outcome = "the attempt gave no final answer"
	}
	return strings.NewReplacer(
		"{problem}", strings.TrimSpace(c.Task.Prompt),
		"{answer}", strings.TrimSpace(c.Task.Answer),
		"{outcome}", outcome,
		"{steps}", steps,
		"{trajectory}", trajectory,
	).Replace(template)
}

// Verdict scores: a step judged correct is worth 1, a wrong one 0.
const (
	VerdictCorrect = 1.0
	VerdictWrong   = 0.0
)

var verdictRE = regexp.MustCompile(`(?im)^[\s>*#\-]*step\s*(\d+)\s*\**\s*[:.)\-–—]\s*\**\s*(correct|right|good|ok|wrong|incorrect|bad|flawed)\b`)

// PRMReply is a PRM's reply as read by ParsePRM.
type PRMReply struct {
	// Verdicts has one entry per step of the trajectory: VerdictCorrect, VerdictWrong, or NaN for
	// a step the reply gave no verdict on (one left out of the prompt).
	Verdicts []float64
	// Hint is the bridge thought, "" for \boxed{-1}.
	Hint string
	// OK is false for a malformed reply: no usable \boxed{…} (none, unclosed, empty, with tags or
	// chat tokens, revealing the answer) or a shown step without a verdict. A malformed reply
	// gives neither verdicts nor a hint.
	OK bool
	// Why says what was malformed, "" when OK.
	Why string
}

// ParsePRM reads a reply to PRMPrompt for a trajectory of n steps of which shown were in the
// prompt: a verdict line per shown step ("Step k: correct|wrong", also right/good/ok and
// incorrect/bad/flawed; the last line for a step wins; after </think> when the reply thinks),
// and the last \boxed{…} as ParseJudgeHint reads it (answer is the reference answer a hint must
// not reveal, maxChars the hint's bound in characters). Verdicts for steps not shown, or beyond
// n, are ignored.
func ParsePRM(reply string, n int, shown []int, answer string, maxChars int) PRMReply {
	hint, ok := ParseJudgeHint(reply, answer, maxChars)
	if !ok {
		return PRMReply{Why: "no usable \\boxed{…}"}
	}
	if i := strings.LastIndex(reply, "</think>"); i >= 0 {
		reply = reply[i+len("</think>"):]
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	for _, m := range verdictRE.FindAllStringSubmatch(reply, -1) {
		k, err := strconv.Atoi(m[1])
		if err != nil || k < 1 || k > n {
			continue
		}
		switch strings.ToLower(m[2]) {
		case "correct", "right", "good", "ok":
			v[k-1] = VerdictCorrect
		default:
			v[k-1] = VerdictWrong
		}
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = math.NaN()
	}
	for _, k := range shown {
		if k < 1 || k > n {
			continue
		}
		if math.IsNaN(v[k-1]) {
			return PRMReply{Why: fmt.Sprintf("no verdict for step %d", k)}
		}
		out[k-1] = v[k-1]
	}
	return PRMReply{Verdicts: out, Hint: hint, OK: true}
}
