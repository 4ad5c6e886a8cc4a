package grade

import (
	"errors"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file ports verl's math_dapo reward and the ReTool examples' use of it, case for case.
//
// Sources read:
//
//   - verl/utils/reward_score/math_dapo.py, volcengine/verl: unchanged in behaviour from its first
//     version (3a27a9864, 2025-04-04) to HEAD b178a3cd56f5 (2026-01-29); the last edits
//     (00a10a8ef, 2025-06-30) were formatting, and the SIGALRM timeout class was removed (3a7376acf).
//   - recipe/retool/retool.py, volcengine/verl at ea56e9ac47c3 (2025-11-17, the last commit before
//     the recipes moved to verl-recipe): compute_score calls math_dapo.compute_score(solution_str,
//     ground_truth, strict_box_verify=True) and shapes a negative score with
//     min(-0.6, score + (num_turns-2)/2*0.1). Before 3a394c9bd (2025-08-22) the cap was min(0, …).
//   - num_turns there is extra_info["num_turns"], set by verl's NaiveRewardManager from the agent
//     loop's __num_turns__: ToolAgentLoop returns user_turns + assistant_turns + 1, where a tool
//     round (its results appended to the context) is one user turn and every generation one
//     assistant turn; every way the loop ends leaves assistant_turns = user_turns + 1, so
//     num_turns = 2*toolRounds + 2 and (num_turns-2)/2 is the number of tool rounds.
//   - slime (THUDM/slime 624b824a898a) examples/retool/generate_with_retool.py reward_func: the same
//     compute_score(prompt + response, label, strict_box_verify=True) from
//     slime/rollout/rm_hub/math_dapo_utils.py (strict path identical to verl's) and the same
//     shaping, but with num_turns = sample.tool_call_count, the count of rounds whose observation
//     held "<interpreter>": no 2k+2 mapping, so zero tool calls give -1.1.
//   - SkyRL (NovaSky-AI/SkyRL a9564572eb8e) has no ReTool shaping: skyrl-gym's aime env scores
//     with a copy of math_dapo.compute_score in the non-strict Minerva mode, with the answer
//     pattern (?i)Answer\s*:\s*([^\n<]+) (stops at "<"), +1/-1.
//
// Python semantics kept: strings are sequences of code points, so the 300- and 100-character cuts
// count runes (an invalid UTF-8 byte counts as one); \s and str.strip() use Python's whitespace;
// str.isdigit() accepts Unicode digits such as "²"; the regular expressions are the source's, run
// with Go's leftmost-first matching, which chooses the submatches Python's backtracking does.
//
// Not like a verifier: math_dapo's last_boxed_only_string looks for "\boxed{" only — "\boxed 5"
// and "\fbox{5}" are no answer (lm-eval's hendrycks_math, which the file adapts, handled them; this
// copy does not) — and the strict mode compares the box's content with the truth as strings: no
// normalisation, no spaces trimmed, so \boxed{0.5} is wrong for \frac{1}{2}, \boxed{033} for 33 and
// \boxed{ 33} for 33, while "\boxed{\text{(A)}}" is right only for a truth written the same way.

// DapoResult is math_dapo.compute_score's dictionary.
type DapoResult struct {
	Score float64 // 1 or -1 before any shaping
	Acc   bool
	Pred  string // the extracted (strict) or normalised (Minerva) prediction; "" when none
	// HasPred is false where Python's pred is None: the strict mode found no \boxed{…}.
	HasPred bool
}

// The characters the cuts keep (math_dapo.compute_score and is_correct_strict_box).
const (
	dapoSolutionChars = 300
	dapoStrictChars   = 100
)

// StrictBox is math_dapo.compute_score(solution, truth, strict_box_verify=True) as the ReTool
// examples call it: the last \boxed{…} in the last 100 characters (the last 300, then the last
// 100 of those), its content compared with truth as a string.
func StrictBox(solution, truth string) DapoResult {
	solution = lastChars(solution, dapoSolutionChars)
	score, pred, ok := IsCorrectStrictBox(solution, truth)
	return DapoResult{Score: float64(score), Acc: score == 1, Pred: pred, HasPred: ok}
}

// Minerva is math_dapo.compute_score(solution, truth) with the default strict_box_verify=False:
// the last "Answer: …" in the last 300 characters, normalised with NormalizeFinalAnswer, equal
// as a string to the normalised truth. With no "Answer:" the prediction is "[INVALID]".
func Minerva(solution, truth string) DapoResult {
	solution = lastChars(solution, dapoSolutionChars)
	ok, pred := IsCorrectMinerva(solution, truth)
	score := -1.0
	if ok {
		score = 1
	}
	return DapoResult{Score: score, Acc: ok, Pred: pred, HasPred: true}
}

// IsCorrectStrictBox is is_correct_strict_box(pred, gt) without pause tokens: 1 when the last
// \boxed{…} of pred's last 100 characters holds exactly gt, else -1; extracted and ok are the box's
// content and whether there was one (Python's None). No box never equals a truth, not even "".
func IsCorrectStrictBox(pred, gt string) (score int, extracted string, ok bool) {
	pred = lastChars(pred, dapoStrictChars)
	boxed, found := LastBoxedOnlyString(pred)
	if found {
		extracted, _ = RemoveBoxed(boxed) // a LastBoxedOnlyString result always has the shape
		ok = true
	}
	if ok && extracted == gt {
		return 1, extracted, true
	}
	return -1, extracted, ok
}

// LastBoxedOnlyString is last_boxed_only_string: from the last "\boxed{" to the brace that closes
// it, counting every { and } (escaped ones too); ok is false with no "\boxed{" or no closing brace.
func LastBoxedOnlyString(s string) (string, bool) {
	idx := strings.LastIndex(s, `\boxed{`)
	if idx < 0 {
		return "", false
	}
	open := 0
	for i := idx; i < len(s); i++ {
		switch s[i] {
		case '{':
			open++
		case '}':
			open--
			if open == 0 {
				return s[idx : i+1], true
			}
		}
	}
	return "", false
}

var errBox = errors.New("box error")

// RemoveBoxed is remove_boxed: the content of "\boxed{…}"; Python's assert is the error.
func RemoveBoxed(s string) (string, error) {
	const left = `\boxed{`
	if !strings.HasPrefix(s, left) || !strings.HasSuffix(s, "}") || len(s) < len(left)+1 {
		return "", errBox
	}
	return s[len(left) : len(s)-1], nil
}

// pyWS is Python's whitespace (str.isspace, re's \s for str patterns), CPython 3.11.
const pyWS = `\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`

var (
	// The default answer_pattern of is_correct_minerva, r"(?i)Answer\s*:\s*([^\n]+)".
	minervaAnswerRE = regexp.MustCompile(`(?i)Answer[` + pyWS + `]*:[` + pyWS + `]*([^\n]+)`)

	dollarRE   = regexp.MustCompile(`(.*?)(\$)(.*?)(\$)(.*)`)
	textRE     = regexp.MustCompile(`(\\text\{)(.*?)(\})`)
	textbfRE   = regexp.MustCompile(`(\\textbf\{)(.*?)(\})`)
	overlineRE = regexp.MustCompile(`(\\overline\{)(.*?)(\})`)
	boxedRE    = regexp.MustCompile(`(\\boxed\{)(.*)(\})`)
	fracRE     = regexp.MustCompile(`(frac)([^{])(.)`)
	sqrtRE     = regexp.MustCompile(`(sqrt)([^{])`)
)

// IsCorrectMinerva is is_correct_minerva(solution, gt) with its defaults (gt_need_extract=False):
// the last match of (?i)Answer\s*:\s*([^\n]+), normalised, against the normalised gt.
func IsCorrectMinerva(solution, gt string) (bool, string) {
	extracted := "[INVALID]"
	if all := minervaAnswerRE.FindAllStringSubmatch(solution, -1); len(all) > 0 {
		extracted = all[len(all)-1][1]
	}
	pred := NormalizeFinalAnswer(extracted)
	return pred == NormalizeFinalAnswer(gt), pred
}

// substitutions and removedExpressions are SUBSTITUTIONS and REMOVED_EXPRESSIONS, in order.
var substitutions = [][2]string{
	{"an ", ""},
	{"a ", ""},
	{".$", "$"},
	{`\$`, ""},
	{`\ `, ""},
	{" ", ""},
	{"mbox", "text"},
	{`,\text{and}`, ","},
	{`\text{and}`, ","},
	{`\text{m}`, `\text{}`},
}

var removedExpressions = []string{
	"square", "ways", "integers", "dollars", "mph", "inches", "hours", "km", "units", `\ldots`,
	"sue", "points", "feet", "minutes", "digits", "cents", "degrees", "cm", "gm", "pounds",
	"meters", "meals", "edges", "students", "childrentickets", "multiples",
	`\text{s}`, `\text{.}`, "\\text{\ns}", `\text{}^2`, `\text{}^3`, "\\text{\n}", `\text{}`,
	`\mathrm{th}`, `^\circ`, `^{\circ}`, `\;`, `,\!`, "{,}", `"`, `\dots`,
}

// NormalizeFinalAnswer is normalize_final_answer: the text after the last "=", the substitutions
// and removals, then the regular expressions in the source's order ($…$, \text, \textbf,
// \overline, \boxed, \fracab, \sqrta), "$" dropped, commas dropped from an all-digit answer,
// whitespace stripped.
func NormalizeFinalAnswer(s string) string {
	if i := strings.LastIndex(s, "="); i >= 0 {
		s = s[i+1:]
	}
	for _, sub := range substitutions {
		s = strings.ReplaceAll(s, sub[0], sub[1])
	}
	for _, expr := range removedExpressions {
		s = strings.ReplaceAll(s, expr, "")
	}
	s = dollarRE.ReplaceAllString(s, "$$${3}$$")
	s = textRE.ReplaceAllString(s, "${2}")
	s = textbfRE.ReplaceAllString(s, "${2}")
	s = overlineRE.ReplaceAllString(s, "${2}")
	s = boxedRE.ReplaceAllString(s, "${2}")
	s = fracRE.ReplaceAllString(s, "frac{${2}}{${3}}")
	s = sqrtRE.ReplaceAllString(s, "sqrt{${2}}")
	s = strings.ReplaceAll(s, "$", "")
	if pyIsDigit(strings.ReplaceAll(s, ",", "")) {
		s = strings.ReplaceAll(s, ",", "")
	}
	return strings.TrimFunc(s, pyIsSpace)
}

// VerlNumTurns is the num_turns verl's ToolAgentLoop reports for a trajectory with toolCalls
// tool rounds: user_turns + assistant_turns + 1 = toolCalls + (toolCalls+1) + 1.
func VerlNumTurns(toolCalls int) int { return 2*toolCalls + 2 }

// ReToolShaping is the ReTool examples' "encourage model to call tools" term: a negative score
// becomes min(-0.6, score + (numTurns-2)/2*0.1), computed in the source's order; other scores stay.
func ReToolShaping(score float64, numTurns int) float64 {
	if score < 0 {
		toolCallReward := float64(numTurns-2) / 2 * 0.1
		if s := score + toolCallReward; s < -0.6 {
			return s
		}
		return -0.6
	}
	return score
}

// mathDapo is the ReTool examples' compute_score: verl's (num_turns = VerlNumTurns(toolCalls))
// or slime's (num_turns = toolCalls).
type mathDapo struct{ slime bool }

func (g mathDapo) Name() string {
	if g.slime {
		return "math_dapo_slime"
	}
	return "math_dapo"
}

func (g mathDapo) Version() string {
	if g.slime {
		return "slime@624b824a898a examples/retool/generate_with_retool.py + slime/rollout/rm_hub/math_dapo_utils.py"
	}
	return "verl@ea56e9ac47c3 verl/utils/reward_score/math_dapo.py + recipe/retool/retool.py"
}

func (g mathDapo) Grade(response, truth string, toolCalls int) Verdict {
	r := StrictBox(response, truth)
	numTurns := VerlNumTurns(toolCalls)
	if g.slime {
		numTurns = toolCalls
	}
	return Verdict{
		Correct:    r.Acc,
		Score:      ReToolShaping(r.Score, numTurns),
		Extracted:  r.Pred,
		Normalized: r.Pred, // strict box compares the content as it is
		Grader:     label(g),
	}
}

// lastChars is Python's s[-n:]: the last n code points (an invalid UTF-8 byte counts as one).
func lastChars(s string, n int) string {
	i := len(s)
	for k := 0; k < n && i > 0; k++ {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

// pyIsSpace is Python's str.isspace for one character (CPython 3.11, Unicode 14).
func pyIsSpace(r rune) bool {
	switch {
	case r >= '\t' && r <= '\r', r >= 0x1c && r <= 0x20, r == 0x85, r == 0xa0, r == 0x1680,
		r >= 0x2000 && r <= 0x200a, r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
		return true
	}
	return false
}

// digitNotDecimal holds the characters Python's str.isdigit accepts beyond the decimal digits
// (Numeric_Type=Digit: superscripts, subscripts, circled and parenthesised digits, …), from
// CPython 3.11 (Unicode 14).
var digitNotDecimal = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0xb2, Hi: 0xb3, Stride: 1}, {Lo: 0xb9, Hi: 0xb9, Stride: 1},
		{Lo: 0x1369, Hi: 0x1371, Stride: 1}, {Lo: 0x19da, Hi: 0x19da, Stride: 1},
		{Lo: 0x2070, Hi: 0x2070, Stride: 1}, {Lo: 0x2074, Hi: 0x2079, Stride: 1},
		{Lo: 0x2080, Hi: 0x2089, Stride: 1}, {Lo: 0x2460, Hi: 0x2468, Stride: 1},
		{Lo: 0x2474, Hi: 0x247c, Stride: 1}, {Lo: 0x2488, Hi: 0x2490, Stride: 1},
		{Lo: 0x24ea, Hi: 0x24ea, Stride: 1}, {Lo: 0x24f5, Hi: 0x24fd, Stride: 1},
		{Lo: 0x24ff, Hi: 0x24ff, Stride: 1}, {Lo: 0x2776, Hi: 0x277e, Stride: 1},
		{Lo: 0x2780, Hi: 0x2788, Stride: 1}, {Lo: 0x278a, Hi: 0x2792, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x10a40, Hi: 0x10a43, Stride: 1}, {Lo: 0x10e60, Hi: 0x10e68, Stride: 1},
		{Lo: 0x11052, Hi: 0x1105a, Stride: 1}, {Lo: 0x1f100, Hi: 0x1f10a, Stride: 1},
	},
}

// pyIsDigit is Python's str.isdigit: not empty, and every character a decimal digit (Go's
// unicode.Nd) or another digit (digitNotDecimal).
func pyIsDigit(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsDigit(r) && !unicode.Is(digitNotDecimal, r) {
			return false
		}
	}
	return true
}
