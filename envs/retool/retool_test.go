package retool

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"agentrl/envs"
	"agentrl/envs/mathverify"
	"agentrl/envs/sandbox"
	"agentrl/envs/synthetic"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name      string
		text      string
		code      []string
		answer    string
		hasAnswer bool
		formatErr string
	}{
		{"code tag", "Let me compute.\n<code>\nprint(1+1)\n</code>", []string{"print(1+1)"}, "", false, ""},
		{"two code tags", "<code>a=1</code> then <code>print(a)</code>", []string{"a=1", "print(a)"}, "", false, ""},
		{"python fence", "```python\nprint(2)\n```", []string{"print(2)"}, "", false, ""},
		{"bare fence", "```\nx = 3\nprint(x)\n```", []string{"x = 3\nprint(x)"}, "", false, ""},
		{"two fences", "```py\na=1\n```\n```python\nprint(a)\n```", []string{"a=1", "print(a)"}, "", false, ""},
		{"tool call", `<tool_call>{"name": "python", "arguments": {"code": "print(3)"}}</tool_call>`, []string{"print(3)"}, "", false, ""},
		{"tool call string args", `<tool_call>{"name": "python", "arguments": "{\"code\": \"print(4)\"}"}</tool_call>`, []string{"print(4)"}, "", false, ""},
		{"boxed", `So the answer is \boxed{42}.`, nil, "42", true, ""},
		{"nested boxed", `\boxed{\frac{1}{2}}`, nil, `\frac{1}{2}`, true, ""},
		{"last boxed wins", `\boxed{1} no wait \boxed{2}`, nil, "2", true, ""},
		{"code and answer", "<code>print(1)</code>\n\\boxed{1}", []string{"print(1)"}, "1", true, ""},
		{"unclosed code", "<code>print(1)", nil, "", false, "<code> is not closed"},
		{"unclosed fence", "```python\nprint(1)", nil, "", false, "fence is not closed"},
		{"unclosed tool call", `<tool_call>{"name": "python"`, nil, "", false, "<tool_call> is not closed"},
		{"bad tool json", `<tool_call>{name: python}</tool_call>`, nil, "", false, "not valid JSON"},
		{"wrong tool", `<tool_call>{"name": "bash", "arguments": {"code": "ls"}}</tool_call>`, nil, "", false, `unknown tool "bash"`},
		{"tool call without code", `<tool_call>{"name": "python", "arguments": {}}</tool_call>`, nil, "", false, `no "code" argument`},
		{"unbalanced boxed", `\boxed{12`, nil, "", false, "unbalanced"},
		{"nothing", "I think it is forty-two.", nil, "", false, ""},
		{"three blocks", "<code>a=1</code><code>b=2</code>\n<code>print(a+b)</code>", []string{"a=1", "b=2", "print(a+b)"}, "", false, ""},
		{"code tag and tool call", "<code>a=1</code>\n<tool_call>{\"name\": \"python\", \"arguments\": {\"code\": \"print(a)\"}}</tool_call>", []string{"a=1", "print(a)"}, "", false, ""},
		{"fence inside code tag runs once, unfenced", "<code>\n```python\nprint(1)\n```\n</code>", []string{"print(1)"}, "", false, ""},
		{"fence in a tool call's code", `<tool_call>{"name": "python", "arguments": {"code": "` + "```python\\nprint(3)\\n```" + `"}}</tool_call>`, []string{"print(3)"}, "", false, ""},
		{"interpreter block is not an answer", "<code>print(1)</code>\n<interpreter>\n\\boxed{9}\n</interpreter>\nAnswer: \\boxed{1}", []string{"print(1)"}, "1", true, ""},
		{"answer only in interpreter", "<code>print(1)</code>\n<interpreter>\n\\boxed{9}\n</interpreter>\n", []string{"print(1)"}, "", false, ""},
		{"truncated closing tag", "<code>print(1)</cod", nil, "", false, "<code> is not closed"},
		{"second block truncated", "<code>a=1</code><code>print(a)", []string{"a=1"}, "", false, "<code> is not closed"},
		{"truncated tool call json", `<tool_call>{"name": "python", "arguments": {"code": "print(1)"</tool_call>`, nil, "", false, "not valid JSON"},
		{"boxed inside code is not an answer", "<code>print('\\boxed{7}')</code>", []string{"print('\\boxed{7}')"}, "", false, ""},
		{"boxed after code", "<code>print(7)</code> so \\boxed{7}", []string{"print(7)"}, "7", true, ""},
		{"boxed in unclosed code is ignored", "<code>x = '\\boxed{1}'", nil, "", false, "<code> is not closed"},
		{"deeply nested boxed", `\boxed{\frac{\sqrt{2}}{2}}`, nil, `\frac{\sqrt{2}}{2}`, true, ""},
		{"empty boxed", `\boxed{}`, nil, "", true, ""},
		{"stray closing tag", "</code> \\boxed{3}", nil, "3", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Parse(tc.text)
			if !slices.Equal(a.Code, tc.code) || a.Answer != tc.answer || a.HasAnswer != tc.hasAnswer {
				t.Errorf("got code %q answer %q (%v); want %q %q (%v)", a.Code, a.Answer, a.HasAnswer, tc.code, tc.answer, tc.hasAnswer)
			}
			if (tc.formatErr == "") != (a.FormatError == "") || !strings.Contains(a.FormatError, tc.formatErr) {
				t.Errorf("format error %q; want one containing %q", a.FormatError, tc.formatErr)
			}
		})
	}
}

// ReTool-SFT turns: fenced code inside <code>, <interpreter> blocks already in the text,
// "Answer: \boxed{}" or a bare \boxed{}; and what each layout reads of the same text.
func TestParseLayouts(t *testing.T) {
	sft := "<think>\nLet me compute the area.\n\n<code>\n```python\n# area\na = 2 + 2\nprint(f\"Area: {a}\")\n```\n</code>\n<interpreter>\nArea: 4\n</interpreter>\n\nSo twice that.\n<code>\n```python\nprint(2 * 4)\n```\n</code>\n<interpreter>\n8\n</interpreter>\n\n</think>\n<answer>\nThe area is 8.\n\nAnswer: \\boxed{8}\n</answer>"
	call := "I will compute it.\n<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"print(6 * 7)\"}}\n</tool_call>"
	for _, tc := range []struct {
		name      string
		layout    Layout
		text      string
		code      []string
		answer    string
		hasAnswer bool
		calls     int
		content   string
	}{
		{"retool-sft turn", LayoutReTool, sft, []string{"# area\na = 2 + 2\nprint(f\"Area: {a}\")", "print(2 * 4)"}, "8", true, 0, sft},
		{"retool-sft turn read as chat", LayoutChat, sft, []string{"# area\na = 2 + 2\nprint(f\"Area: {a}\")", "print(2 * 4)"}, "8", true, 0, sft},
		{"retool stretch to </code>", LayoutReTool, "Compute.\n<code>\n```python\nprint(1)\n```\n</code>", []string{"print(1)"}, "", false, 0, "Compute.\n<code>\n```python\nprint(1)\n```\n</code>"},
		{"retool bare boxed", LayoutReTool, "so \\boxed{5}", nil, "5", true, 0, "so \\boxed{5}"},
		{"retool ignores fences and tool calls", LayoutReTool, "```python\nprint(1)\n```\n" + call, nil, "", false, 0, "```python\nprint(1)\n```\n" + call},
		{"tool call", LayoutToolCall, call, []string{"print(6 * 7)"}, "", false, 1, "I will compute it."},
		{"tool call ignores code tags", LayoutToolCall, "<code>print(1)</code> \\boxed{1}", nil, "1", true, 0, "<code>print(1)</code> \\boxed{1}"},
		{"tool call without content", LayoutToolCall, call[len("I will compute it.\n"):], []string{"print(6 * 7)"}, "", false, 1, ""},
		// DAPO-Math-17k's prompt asks for the answer on a last "Answer: $Answer" line.
		{"retool answer line", LayoutReTool, "So the total is 42.\nAnswer: 42", nil, "42", true, 0, "So the total is 42.\nAnswer: 42"},
		{"tool call answer line", LayoutToolCall, "Answer: $\\frac{3}{4}$", nil, "\\frac{3}{4}", true, 0, "Answer: $\\frac{3}{4}$"},
		{"retool answer tag", LayoutReTool, "<answer>17</answer>", nil, "17", true, 0, "<answer>17</answer>"},
		{"chat keeps boxed only", LayoutChat, "Answer: 42", nil, "", false, 0, "Answer: 42"},
		{"answer line in the interpreter is no answer", LayoutReTool, "<code>\nprint(1)\n</code>\n<interpreter>\nAnswer: 1\n</interpreter>\n", []string{"print(1)"}, "", false, 0, "<code>\nprint(1)\n</code>\n<interpreter>\nAnswer: 1\n</interpreter>\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := ParseAs(tc.layout, tc.text, nil)
			if !slices.Equal(a.Code, tc.code) || a.Answer != tc.answer || a.HasAnswer != tc.hasAnswer || a.FormatError != "" {
				t.Errorf("got code %q answer %q (%v) error %q; want %q %q (%v)", a.Code, a.Answer, a.HasAnswer, a.FormatError, tc.code, tc.answer, tc.hasAnswer)
			}
			if len(a.Calls) != tc.calls || a.Content != tc.content {
				t.Errorf("got %d calls, content %q; want %d, %q", len(a.Calls), a.Content, tc.calls, tc.content)
			}
		})
	}
	a := ParseAs(LayoutToolCall, call, nil)
	if got := a.Calls[0]; got.Name != "python" || got.Text() != `{"code": "print(6 * 7)"}` {
		t.Errorf("call %+v; want python with the arguments as written", got)
	}
	if a := ParseAs(LayoutToolCall, `<tool_call>{"name": "run", "arguments": {"code": "1"}}</tool_call>`, []string{"run"}); len(a.Code) != 1 {
		t.Errorf("a tool named in names: %+v", a)
	}
	for _, bad := range []string{"chat ", "", "ReTool"} {
		if err := CheckLayout(bad); err == nil {
			t.Errorf("CheckLayout(%q) accepted", bad)
		}
	}
}

func TestVerify(t *testing.T) {
	for _, tc := range []struct {
		pred, ref string
		want      bool
	}{
		{"42", "42", true},
		{" 42 ", "42", true},
		{"42.", "42", true},
		{"42.0", "42", true},
		{"42.00", "42", true},
		{"+42", "42", true},
		{"-7", "-7", true},
		{"−7", "-7", true},
		{"-7", "7", false},
		{"7", "-7", false},
		{"1,234", "1234", true},
		{"1,234,567", "1234567", true},
		{`1\,234`, "1234", true},
		{"1234", "1,234", true},
		{"1/2", "0.5", true},
		{`\frac{1}{2}`, "1/2", true},
		{`\dfrac{3}{4}`, "0.75", true},
		{`\tfrac{-3}{4}`, "-0.75", true},
		{`\frac{2}{4}`, "1/2", true},
		{"0.333", "1/3", false},
		{"1/3", "2/6", true},
		{"$42$", "42", true},
		{`\(42\)`, "42", true},
		{`42 \text{ apples}`, "42", false}, // apples are not a unit: only the last-number fallback reads 42
		{"42 apples", "42", false},
		{"x = 42", "42", true},
		{"The answer is 42.", "42", false},
		{"42 cm", "42", true},
		{`\$5`, "5", true},
		{"43", "42", false},
		{"4.2", "42", false},
		{"420", "42", false},
		{"", "42", false},
		{"forty-two", "42", false},
		{"1e3", "1000", false}, // scientific notation is not accepted as a number
		{"1000", "1000", true},
		{"100000000000000000000001", "100000000000000000000001", true},
		{"100000000000000000000001", "100000000000000000000000", false},
		{"abc", "ABC", true},
		{"x + 1", "x+1", true},
		{"x + 2", "x+1", false},
		{"3 and 4", "4", false}, // free text reduces to its last number only with the fallback
		{"4 and 3", "4", false},
		{`\boxed{5}`, "5", true},
		{"0", "0", true},
		{"-0", "0", true},
		{"007", "7", true},
		{"1/0", "1/0", true}, // not a number: compared as text
		{`$\frac{1}{2}$`, "0.5", true},
		{`\dfrac{10}{4}`, "5/2", true},
		{"2.50", "5/2", true},
		{`-\frac{1}{2}`, "-0.5", true},
		{`\frac{-1}{2}`, "-1/2", true},
		{"12,345.5", "12345.5", true},
		{`\text{42}`, "42", true},
		{`\mathrm{42}`, "42", true},
		{`\left(3\right)`, "3", true},
		{`42\%`, "42%", true},
		{".5", "0.5", true},
		{"5.", "5", true},
		{"−1,000", "-1000", true},
		{"The answer is $42$.", "42", false},
		{"42 dollars", "42", true},
		{"42", "42.000", true},
		{"1/2", "0.51", false},
		{"-0.5", "0.5", false},
		{`\frac{1}{3}`, "0.33", false},
		{"12,34", "1234", false},   // not a thousands grouping
		{"1,2345", "12345", false}, // nor this
		{"42", "-42", false},
		{"0", "1", false},
		{"x = 41", "42", false},
		{"42 or 43", "42", false},
		{"", "", false},
		{"2/4", "0.4", false},
		{"1/2", "2", false},
	} {
		if got := Verify(tc.pred, tc.ref, mathverify.Options{}); got != tc.want {
			t.Errorf("Verify(%q, %q) = %v; want %v", tc.pred, tc.ref, got, tc.want)
		}
	}
	// reward.last_number_fallback: free text counts by its last number, as before envs/mathverify.
	fallback := mathverify.Options{LastNumberFallback: true}
	for _, tc := range []struct {
		pred, ref string
		want      bool
	}{
		{`42 \text{ apples}`, "42", true},
		{"42 apples", "42", true},
		{"The answer is 42.", "42", true},
		{"3 and 4", "4", true},
		{"The answer is $42$.", "42", true},
		{"4 and 3", "4", false},
		{"42 or 43", "42", false},
		{"x = 41", "42", false},
		{"43", "42", false},
	} {
		if got := Verify(tc.pred, tc.ref, fallback); got != tc.want {
			t.Errorf("Verify(%q, %q, fallback) = %v; want %v", tc.pred, tc.ref, got, tc.want)
		}
	}
}

func TestObserve(t *testing.T) {
	for _, tc := range []struct {
		r      sandbox.Result
		format string
		max    int
		want   string
	}{
		{sandbox.Result{Status: sandbox.StatusOK, Output: "42\n"}, FormatInterpreter, 0, "<interpreter>\n42\n</interpreter>"},
		{sandbox.Result{Status: sandbox.StatusOK, Output: ""}, FormatToolResponse, 0, "[no output: use print() to see values]"},
		{sandbox.Result{Status: sandbox.StatusTimeout, Detail: "stopped after 5s"}, FormatToolResponse, 0, "[timeout: stopped after 5s]"},
		{sandbox.Result{Status: sandbox.StatusKilled, Output: "partial\n", Detail: "killed by SIGKILL"}, FormatToolResponse, 0, "partial\n[stopped: killed by SIGKILL]"},
		{sandbox.Result{Status: sandbox.StatusError, Output: "NameError: x"}, FormatToolResponse, 0, "NameError: x"},
		{sandbox.Result{Status: sandbox.StatusOK, Output: strings.Repeat("a", 20)}, FormatToolResponse, 10, "aaaaaaaaaa\n[… truncated]"},
		{sandbox.Result{Status: sandbox.StatusOK, Output: "ééééé"}, FormatToolResponse, 3, "é\n[… truncated]"},
		{sandbox.Result{Status: sandbox.StatusOK, Output: "7\n"}, "tag:output", 0, "<output>\n7\n</output>"},
		{sandbox.Result{Status: sandbox.StatusError, Output: "Traceback\nNameError: x\n"}, "tag:output", 0, "<output>\nTraceback\nNameError: x\n</output>"},
	} {
		if got := Observe(tc.r, tc.format, tc.max); got != tc.want {
			t.Errorf("Observe(%+v) = %q; want %q", tc.r, got, tc.want)
		}
	}
}

func TestObservationFormats(t *testing.T) {
	for _, tc := range []struct {
		format string
		ok     bool
		system string
	}{
		{FormatInterpreter, true, "<interpreter></interpreter>"},
		{FormatToolResponse, true, "the tool's response"},
		{"tag:output", true, "<output></output>"},
		{"tag:", false, ""},
		{"tag:a b", false, ""},
		{"xml", false, ""},
	} {
		err := CheckFormat(tc.format)
		if (err == nil) != tc.ok {
			t.Errorf("CheckFormat(%q) = %v; want ok=%v", tc.format, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "tag:NAME") {
			t.Errorf("error %q does not name the choices", err)
		}
		if tc.ok && !strings.Contains(SystemFor(tc.format), tc.system) {
			t.Errorf("SystemFor(%q) = %q; want it to mention %q", tc.format, SystemFor(tc.format), tc.system)
		}
	}
	if _, err := New(Config{Executor: &sandbox.Starlark{}, Format: "xml"}); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("New with a bad format: %v", err)
	}
}

func TestToolShaping(t *testing.T) {
	for _, tc := range []struct {
		s    envs.Summary
		want float64
	}{
		{envs.Summary{}, 0},
		{envs.Summary{ToolCalls: 1}, 1},
		{envs.Summary{ToolCalls: 2, ToolErrors: 1, Recovered: true}, 1},
		{envs.Summary{ToolCalls: 1, Timeouts: 1}, 0.5},
		{envs.Summary{ToolCalls: 3, ToolErrors: 1, Killed: 1}, 0.5},
	} {
		if got := ToolShaping(tc.s); got != tc.want {
			t.Errorf("ToolShaping(%+v) = %v; want %v", tc.s, got, tc.want)
		}
	}
}

func TestEnvEpisode(t *testing.T) {
	e, err := New(Config{Executor: &sandbox.Starlark{}, MaxTurns: 3, Weights: Weights{Outcome: 1, FormatPenalty: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	msgs, err := e.Reset(ctx, envs.Task{ID: "t", Prompt: "What is 6 * 7?", Answer: "42"})
	if err != nil || len(msgs) != 2 || msgs[1].Content != "What is 6 * 7?" {
		t.Fatalf("reset: %v %v", msgs, err)
	}
	st, _ := e.Step(ctx, "<code>print(6 * y)</code>")
	if st.Done || st.ToolCalls[0].Status != "error" || !strings.Contains(st.Observation, "undefined") {
		t.Fatalf("turn 1: %+v", st)
	}
	st, _ = e.Step(ctx, "<code>print(6 * 7)</code>")
	if st.Done || st.Observation != "<interpreter>\n42\n</interpreter>" {
		t.Fatalf("turn 2: %+v", st)
	}
	st, _ = e.Step(ctx, `The answer is \boxed{42}.`)
	if !st.Done || st.Reward.Outcome != 1 || st.Reward.Total != 1 || st.Reward.Shaping != 1 {
		t.Fatalf("turn 3: %+v", st)
	}
	sum := e.Summary()
	if sum.ToolCalls != 2 || sum.ToolErrors != 1 || !sum.Recovered || !sum.Correct {
		t.Errorf("summary %+v", sum)
	}
	if _, err := e.Step(ctx, "more"); err == nil {
		t.Error("Step after the end accepted")
	}

	// Format errors are penalised, and running out of turns ends the trajectory.
	e.Reset(ctx, envs.Task{ID: "t2", Prompt: "p", Answer: "1"})
	st, _ = e.Step(ctx, "hmm")
	if st.Done || !strings.Contains(st.Observation, "Format error") {
		t.Fatalf("format turn: %+v", st)
	}
	e.Step(ctx, "<code>print(1)</code>")
	st, _ = e.Step(ctx, "still thinking")
	if !st.Done || st.Reward.Total != -0.5 || st.Reward.FormatPenalty != 1 {
		t.Fatalf("out of turns: %+v", st)
	}

	// A turn with one good block and one unclosed one runs the good one and says what was wrong.
	e.Reset(ctx, envs.Task{ID: "t4", Prompt: "p", Answer: "1"})
	st, _ = e.Step(ctx, "<code>print(5)</code> and <code>print(6)")
	if st.Done || len(st.ToolCalls) != 1 || st.Observation != "<interpreter>\n5\n</interpreter>\nFormat error: <code> is not closed by </code>." {
		t.Errorf("partly malformed turn: %+v", st)
	}

	// A failure after a recovery is unrecovered again; the weights combine every part.
	e2, _ := New(Config{Executor: &sandbox.Starlark{}, MaxTurns: 4, Weights: Weights{Outcome: 1, Process: 0, Shaping: 0.2, FormatPenalty: 0.5}})
	e2.Reset(ctx, envs.Task{ID: "t3", Prompt: "p", Answer: "3"})
	e2.Step(ctx, "<code>print(q)</code>")
	e2.Step(ctx, "<code>print(3)</code>")
	if !e2.Summary().Recovered {
		t.Errorf("not recovered after a successful call: %+v", e2.Summary())
	}
	e2.Step(ctx, "<code>print(1/0)</code>")
	st, _ = e2.Step(ctx, `\boxed{3}`)
	if sum := e2.Summary(); sum.Recovered || sum.ToolErrors != 2 || !sum.Correct {
		t.Errorf("summary %+v", sum)
	}
	if st.Reward.Shaping != 0.5 || math.Abs(st.Reward.Total-1.1) > 1e-12 {
		t.Errorf("reward %+v; want shaping 0.5 and total 1 + 0.2·0.5", st.Reward)
	}
}

// The retool layout: one response in stretches, each ending at </code> running its block with
// the output appended in the turn; the response's end scores it. The tool_call layout runs only
// tool calls and observes the raw output. max_tool_calls ends a trajectory that asks for more.
func TestEnvLayouts(t *testing.T) {
	ctx := context.Background()
	task := envs.Task{ID: "t", Prompt: "What is 6 * 7?", Answer: "42"}
	w := Weights{Outcome: 1, FormatPenalty: 0.5}
	e, err := New(Config{Executor: &sandbox.Starlark{}, MaxTurns: 4, Layout: LayoutReTool, Weights: w})
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := e.Reset(ctx, task)
	if msgs[0].Content != DefaultSystem {
		t.Errorf("retool system prompt %q", msgs[0].Content)
	}
	st, _ := e.Step(ctx, "Let me compute.\n<code>\n```python\nprint(6 * 7)\n```\n</code>")
	if st.Done || st.Observation != "\n<interpreter>\n42\n</interpreter>\n" {
		t.Fatalf("retool stretch 1: %+v", st)
	}
	st, _ = e.Step(ctx, "\nSo Answer: \\boxed{42}")
	if !st.Done || st.Reward.Total != 1 {
		t.Fatalf("retool end: %+v", st)
	}
	e.Reset(ctx, task)
	st, _ = e.Step(ctx, "<code>print(1)</code> and then I stopped")
	if !st.Done || st.Reward.FormatPenalty != 1 || len(st.ToolCalls) != 0 {
		t.Errorf("retool response ending without an answer: %+v", st)
	}

	e, _ = New(Config{Executor: &sandbox.Starlark{}, MaxTurns: 4, Layout: LayoutToolCall, Format: FormatInterpreter, Weights: w})
	msgs, _ = e.Reset(ctx, task)
	if !strings.Contains(msgs[0].Content, "python tool") {
		t.Errorf("tool_call system prompt %q", msgs[0].Content)
	}
	st, _ = e.Step(ctx, "<code>print(1)</code>")
	if st.Done || len(st.ToolCalls) != 0 || !strings.Contains(st.Observation, "Call the python tool") {
		t.Errorf("tool_call layout ran a <code> block: %+v", st)
	}
	st, _ = e.Step(ctx, `<tool_call>{"name": "python", "arguments": {"code": "print(6 * 7)"}}</tool_call>`)
	if st.Done || st.Observation != "42" {
		t.Errorf("tool_call observation %+v; want the raw output", st)
	}

	e, _ = New(Config{Executor: &sandbox.Starlark{}, MaxTurns: 8, Layout: LayoutReTool, MaxToolCalls: 1, Weights: w})
	e.Reset(ctx, task)
	if st, _ = e.Step(ctx, "<code>print(1)</code>"); st.Done {
		t.Fatalf("first call ended it: %+v", st)
	}
	st, _ = e.Step(ctx, "<code>print(2)</code>")
	if !st.Done || len(st.ToolCalls) != 0 || st.Reward.FormatPenalty != 1 || e.Summary().ToolCalls != 1 {
		t.Errorf("a call past max_tool_calls: %+v %+v", st, e.Summary())
	}
}

func TestRunTurn(t *testing.T) {
	turn := "<code>\n```python\nx = 6 * 7\nprint(x)\n```\n</code>\n<interpreter>\n42\n</interpreter>\n\n<code>print(x + 1)</code>\nAnswer: \\boxed{43}"
	got, err := RunTurn(context.Background(), "starlark", time.Second, LayoutReTool, turn)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Code, []string{"x = 6 * 7\nprint(x)", "print(x + 1)"}) || got.Answer != "43" || !got.HasAnswer {
		t.Errorf("parsed %+v", got)
	}
	if len(got.Runs) != 2 || got.Runs[0].Observation != "\n<interpreter>\n42\n</interpreter>\n" || got.Runs[1].Observation != "\n<interpreter>\n43\n</interpreter>\n" {
		t.Errorf("runs %+v; want the in-turn observations, one session", got.Runs)
	}
	if _, err := RunTurn(context.Background(), "starlark", time.Second, "xml", turn); err == nil {
		t.Error("a bad format ran")
	}
}

// TestLongTask: a long task (MinTurns 3) meets an early answer with Recheck and goes on, and
// the answer of its last turn counts; LongTrajectory picks a share of the trajectories, the same
// every time.
func TestLongTask(t *testing.T) {
	e, err := New(Config{Executor: &sandbox.Starlark{}, MaxTurns: 4, MinTurns: 3, Weights: Weights{Outcome: 1, FormatPenalty: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Reset(ctx, envs.Task{ID: "t", Prompt: "What is 6 * 7?", Answer: "42"}); err != nil {
		t.Fatal(err)
	}
	st, _ := e.Step(ctx, `The answer is \boxed{42}.`)
	if st.Done || st.Observation != Recheck || len(st.ToolCalls) != 0 {
		t.Fatalf("turn 1, an early answer: %+v; want the trajectory to go on with %q", st, Recheck)
	}
	st, _ = e.Step(ctx, "<code>print(6 * 7)</code>")
	if st.Done || st.Observation != "<interpreter>\n42\n</interpreter>" {
		t.Fatalf("turn 2: %+v", st)
	}
	st, _ = e.Step(ctx, `So it is \boxed{41}.`)
	if !st.Done || st.Reward.Outcome != 0 || e.Summary().Answer != "41" {
		t.Fatalf("turn 3: %+v, summary %+v; want done, and the last answer (wrong) to count", st, e.Summary())
	}
	long := 0
	for i := range 2000 {
		id, sample := fmt.Sprintf("train-%04d", i/16), i%16
		if LongTrajectory(id, sample, 0.25) {
			long++
		}
		if LongTrajectory(id, sample, 0.25) != LongTrajectory(id, sample, 0.25) || LongTrajectory(id, sample, 0) || !LongTrajectory(id, sample, 1) {
			t.Fatalf("LongTrajectory(%q, %d) is not a function of the id, the sample and the share", id, sample)
		}
	}
	if long < 400 || long > 600 {
		t.Errorf("share 0.25 made %d of 2000 trajectories long; want about 500", long)
	}
}

// run executes code once in a new session of ex.
func run(t *testing.T, ex sandbox.Executor, code string) sandbox.Result {
	t.Helper()
	s, err := ex.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return s.Run(context.Background(), code)
}

func TestDemonstrations(t *testing.T) {
	train, _, err := synthetic.Tasks{Levels: []int{2, 3}, Seed: 1}.Split(6, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := (&sandbox.Starlark{}).NewSession()
	for i, tk := range train {
		kind := []string{DemoTool, DemoRecover, DemoDirect}[i%3]
		msgs, err := Demonstration(context.Background(), tk, kind, s, FormatInterpreter)
		if err != nil {
			t.Fatal(err)
		}
		last := msgs[len(msgs)-1]
		if last.Role != "assistant" || last.Content != `\boxed{`+tk.Answer+`}` {
			t.Errorf("%s demo ends with %+v", kind, last)
		}
		if kind == DemoRecover && (len(msgs) != 5 || !strings.Contains(msgs[1].Content, "undefined")) {
			t.Errorf("recover demo: %+v", msgs)
		}
	}
}

func TestRunTool(t *testing.T) {
	r, err := RunTool(context.Background(), "starlark", time.Second, "print(1 + 1)")
	if err != nil || r.Status != "ok" || r.Observation != "<interpreter>\n2\n</interpreter>" {
		t.Errorf("starlark: %+v %v", r, err)
	}
	if _, err := RunTool(context.Background(), "ruby", time.Second, "1"); err == nil || !strings.Contains(err.Error(), `"ruby"`) {
		t.Errorf("unknown executor: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"<code>print(1)</code>", "```python\nx\n```", `<tool_call>{"name":"python","arguments":{"code":"1"}}</tool_call>`,
		`\boxed{\frac{1}{2}}`, "<code>", `\boxed{{}`, "<code>a</code><code>\\boxed{1}</code> \\boxed{2}", "```\n<code>x</code>\n```", "<tool_call>{"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a := Parse(s)
		if a.HasAnswer && !strings.Contains(s, a.Answer) {
			t.Fatalf("answer %q is not in the text", a.Answer)
		}
		if a.HasAnswer && !strings.Contains(s, `\boxed{`) {
			t.Fatalf("answer %q from text without \\boxed", a.Answer)
		}
		for _, c := range a.Code {
			if len(c) > len(s) {
				t.Fatalf("code block longer than the text")
			}
		}
		if len(a.Code) == 0 && !a.HasAnswer && a.FormatError == "" && (strings.Contains(s, "<code>") || strings.Contains(s, "<tool_call>")) {
			t.Fatalf("an opening tag gave neither code nor a format error")
		}
	})
}

func FuzzVerify(f *testing.F) {
	for _, s := range [][2]string{{"42", "42"}, {`\frac{1}{2}`, "0.5"}, {"1,234", "1234"}, {"x = 3", "3"}, {"1/0", "0"}} {
		f.Add(s[0], s[1], false)
	}
	f.Fuzz(func(t *testing.T, a, b string, fallback bool) {
		opts := mathverify.Options{LastNumberFallback: fallback}
		if mathverify.Normalize(a) != "" && !Verify(a, a, opts) {
			t.Fatalf("Verify(%q, %q) is false", a, a)
		}
		if !fallback && Verify(a, b, opts) != Verify(b, a, opts) {
			t.Fatalf("Verify(%q, %q) is not symmetric", a, b)
		}
	})
}

func TestRulesHintAndProcessScore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       envs.Summary
		hint    string // substring; "" means no hint
		process float64
	}{
		{"clean and correct", envs.Summary{ToolCalls: 1, Answered: true, Correct: true}, "", 1},
		{"recovered and correct", envs.Summary{ToolCalls: 2, ToolErrors: 1, Recovered: true, Answered: true, Correct: true}, "", 1},
		{"name error", envs.Summary{ToolCalls: 1, ToolErrors: 1, LastError: "Traceback\nNameError: name 'x' is not defined", Answered: true}, "define every name", 0.7},
		{"starlark undefined", envs.Summary{ToolCalls: 1, ToolErrors: 1, LastError: "code.py:1:7: undefined: x", Answered: true}, "fix it and run it again", 0.7},
		{"zero division", envs.Summary{ToolCalls: 1, ToolErrors: 1, LastError: "ZeroDivisionError: division by zero"}, `"ZeroDivisionError: division by zero"`, 0.5},
		{"timeout", envs.Summary{ToolCalls: 1, Timeouts: 1, LastError: "timeout"}, "ran too long", 0.5},
		{"killed", envs.Summary{ToolCalls: 1, Killed: 1}, "resource limit", 0.5},
		{"format", envs.Summary{FormatErrors: 2}, "<code>", 0.3},
		{"no answer", envs.Summary{ToolCalls: 1}, `\boxed{answer}`, 0.8},
		{"guessed wrong", envs.Summary{Answered: true}, "compute the answer with code", 0.6},
		{"wrong after clean run", envs.Summary{ToolCalls: 1, Answered: true, Answer: "22671080", LastOutput: "22671880"}, "copy the printed number, 22671880, into", 1},
		{"copied a wrong computation", envs.Summary{ToolCalls: 1, Answered: true, Answer: "9802", LastOutput: "9802"}, "exactly its numbers and operation", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := RulesHint(tc.s)
			if (tc.hint == "") != (h == "") || !strings.Contains(h, tc.hint) {
				t.Errorf("hint %q; want one containing %q", h, tc.hint)
			}
			if p := RulesProcessScore(tc.s); math.Abs(p-tc.process) > 1e-9 {
				t.Errorf("process score %v; want %v", p, tc.process)
			}
		})
	}
}

// TestRulesHintFor: with a task whose reference program is one short line, the hints for a guess
// and for code that computed something else name that program; every other hint, and every hint
// of a task without such a program (several lines, too long, none), is RulesHint's.
func TestRulesHintFor(t *testing.T) {
	task := func(code string) envs.Task {
		return envs.Task{ID: "t", Prompt: "What is 5047 * 4336?", Answer: "21883792", Meta: map[string]string{"code": code}}
	}
	oneLine := task("print(5047 * 4336)")
	loop := task("s = 0\nfor i in range(3):\n    s += i\nprint(s)")
	long := task("print(" + strings.Repeat("1 + ", 20) + "1)")
	guessed := envs.Summary{Answered: true, Answer: "2188"}
	computedElse := envs.Summary{ToolCalls: 1, Answered: true, Answer: "9802", LastOutput: "9802"}
	wrongCopy := envs.Summary{ToolCalls: 1, Answered: true, Answer: "21883799", LastOutput: "21883792"}
	for _, tc := range []struct {
		name string
		s    envs.Summary
		t    envs.Task
		want string
	}{
		{"guessed", guessed, oneLine, "Do not guess: run print(5047 * 4336) first, then give the printed result."},
		{"computed else", computedElse, oneLine, "The code computed something else than the question asks: run print(5047 * 4336), then copy the printed result."},
		{"wrong copy keeps its numbers", wrongCopy, oneLine, RulesHint(wrongCopy)},
		{"wrong copy of a wrong result", envs.Summary{ToolCalls: 1, Answered: true, Answer: "6107020", LastOutput: "6120000"}, oneLine,
			"The code computed something else than the question asks: run print(5047 * 4336), then copy the printed result."},
		{"wrong copy of a wrong result, no program", envs.Summary{ToolCalls: 1, Answered: true, Answer: "6107020", LastOutput: "6120000"},
			envs.Task{Prompt: "?", Answer: "21883792"}, hintComputedElse},
		{"wrong copy, no answer known", wrongCopy, envs.Task{Prompt: "?"}, RulesHint(wrongCopy)},
		{"correct needs none", envs.Summary{ToolCalls: 1, Answered: true, Correct: true}, oneLine, ""},
		{"guessed, program of several lines", guessed, loop, RulesHint(guessed)},
		{"computed else, program too long", computedElse, long, RulesHint(computedElse)},
		{"computed else, no program", computedElse, envs.Task{Prompt: "?"}, RulesHint(computedElse)},
	} {
		if got := RulesHintFor(tc.s, tc.t); got != tc.want {
			t.Errorf("%s: %q; want %q", tc.name, got, tc.want)
		}
	}
	if got, _ := (Rules{}).Hint(context.Background(), HintRequest{Task: oneLine, Summary: guessed}); !strings.Contains(got, "print(5047 * 4336)") {
		t.Errorf("the rules hinter does not use the task: %q", got)
	}
}
