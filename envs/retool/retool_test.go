package retool

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"agentrl/envs"
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
		{"fence inside code tag runs once", "<code>\n```python\nprint(1)\n```\n</code>", []string{"```python\nprint(1)\n```"}, "", false, ""},
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
		{`42 \text{ apples}`, "42", true},
		{"42 apples", "42", true},
		{"x = 42", "42", true},
		{"The answer is 42.", "42", true},
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
		{"3 and 4", "4", true}, // free text reduces to its last number
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
		{"The answer is $42$.", "42", true},
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
		if got := Verify(tc.pred, tc.ref); got != tc.want {
			t.Errorf("Verify(%q, %q) = %v; want %v", tc.pred, tc.ref, got, tc.want)
		}
	}
}

func run(t *testing.T, ex Executor, code string) Result {
	t.Helper()
	s, err := ex.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return s.Run(context.Background(), code)
}

func TestStarlark(t *testing.T) {
	ex := &Starlark{Limits: Limits{Timeout: time.Second, MaxSteps: 1_000_000, MaxOutputBytes: 64}}
	for _, tc := range []struct {
		name, code string
		status     Status
		output     string
	}{
		{"print", "print(6 * 7)", StatusOK, "42\n"},
		{"big int pow mod", "print(pow(3, 1000, 7))", StatusOK, "4\n"},
		{"loop digit sum", "t = str(pow(2, 57))\ns = 0\nfor i in range(len(t)):\n    s += int(t[i])\nprint(s)", StatusOK, "80\n"},
		{"error", "print(undefined_name)", StatusError, "undefined"},
		{"syntax", "print(", StatusError, "code.py:1"},
		{"infinite loop hits steps", "while True:\n    pass", StatusKilled, ""},
		{"output truncated", "for i in range(1000):\n    print(i)", StatusOK, "output truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, ex, tc.code)
			if r.Status != tc.status || !strings.Contains(r.Output, tc.output) {
				t.Errorf("got %s %q (%s); want %s containing %q", r.Status, r.Output, r.Detail, tc.status, tc.output)
			}
		})
	}
	// Wall-clock limit with a generous step budget.
	slow := &Starlark{Limits: Limits{Timeout: 200 * time.Millisecond, MaxSteps: 1 << 62}}
	if r := run(t, slow, "while True:\n    pass"); r.Status != StatusTimeout {
		t.Errorf("infinite loop: %s; want timeout", r.Status)
	}
	// Sessions keep globals.
	s, _ := ex.NewSession()
	s.Run(context.Background(), "x = 5")
	if r := s.Run(context.Background(), "print(x * 2)"); r.Output != "10\n" {
		t.Errorf("globals not kept: %q", r.Output)
	}
}

// The tests' time limits for one execution. Code that must be stopped (an infinite loop, a fork
// bomb) gets hostileTimeout, so the test ends soon; code that must finish, or be stopped by
// another limit, gets finishTimeout, which only a hung sandbox reaches: on a loaded machine an
// interpreter that printed its result can take seconds to exit, and a 3-second limit then turned
// a finished execution into a timeout (seen at a load average of 25).
const (
	hostileTimeout = 3 * time.Second
	finishTimeout  = 2 * time.Minute
)

// timeoutFor is the limit for code expected to end with one of statuses.
func timeoutFor(statuses []Status) time.Duration {
	if slices.Contains(statuses, StatusTimeout) {
		return hostileTimeout
	}
	return finishTimeout
}

func needPython(t *testing.T, timeout time.Duration) *Python {
	t.Helper()
	p, err := NewPython(Limits{Timeout: timeout, MaxMemoryMB: 256, MaxProcs: 32, MaxFileMB: 8, MaxOutputBytes: 2048}, false)
	if err != nil {
		t.Skipf("python3 is absent (CI installs it): %v", err)
	}
	return p
}

// TestPythonHostileCode runs each kind of hostile code for real under small limits: each must end
// with a clear result, the run goes on, and no process is left behind.
func TestPythonHostileCode(t *testing.T) {
	p := needPython(t, finishTimeout)
	quick := needPython(t, hostileTimeout)
	t.Logf("isolation: %s", p.Isolation())
	t.Setenv("AGENTRL_TEST_SECRET", "hunter2")
	marker := fmt.Sprintf("agentrl-orphan-%d", time.Now().UnixNano())
	for _, tc := range []struct {
		name     string
		code     string
		statuses []Status
		output   string
	}{
		{"ok", "print(sum(i*i for i in range(10)))", []Status{StatusOK}, "285"},
		{"exception", "x = 1/0", []Status{StatusError}, "ZeroDivisionError"},
		{"output then exception", "print('before')\nx = 1/0", []Status{StatusError}, "before\nTraceback (most recent call last):\n  File \"<code>\", line 2, in <module>\nZeroDivisionError: division by zero"},
		{"infinite loop", "while True: pass", []Status{StatusTimeout, StatusKilled}, ""},
		{"fork bomb", "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass", []Status{StatusTimeout, StatusKilled, StatusError}, ""},
		{"allocate 10 GiB", "x = bytearray(10 * 1024**3)", []Status{StatusError}, "MemoryError"},
		{"print 100 MB", "import sys\nsys.stdout.write('x' * (100 * 1024 * 1024))", []Status{StatusOK, StatusError}, "output truncated"},
		{"write 10 GiB file", "f = open('big', 'wb')\nfor i in range(10 * 1024):\n    f.write(b'0' * (1024 * 1024))", []Status{StatusKilled, StatusError}, ""},
		{"orphan process", "import subprocess\nsubprocess.Popen(['sleep', '300', '" + marker + "'], start_new_session=True)\nprint('spawned')", []Status{StatusOK}, "spawned"},
		{"environment secrets", "import os\nprint(os.environ.get('AGENTRL_TEST_SECRET'), sorted(os.environ))", []Status{StatusOK}, "None"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := p
			if timeoutFor(tc.statuses) == hostileTimeout {
				ex = quick
			}
			r := run(t, ex, tc.code)
			if !slices.Contains(tc.statuses, r.Status) || !strings.Contains(r.Output, tc.output) {
				t.Errorf("got %s %q (%s); want one of %v with %q", r.Status, trunc(r.Output), r.Detail, tc.statuses, tc.output)
			}
			if strings.Contains(r.Output, "hunter2") {
				t.Error("the child saw the parent's environment")
			}
			if strings.Contains(r.Output, "in _run") {
				t.Errorf("the sandbox's own frame is in the traceback: %q", r.Output)
			}
			if out, _ := exec.Command("pgrep", "-f", marker).Output(); len(out) > 0 {
				t.Errorf("a process outlived the call: pid %s", out)
			}
			if ex.root && uidsBusy(ex) {
				t.Error("a sandbox uid still has processes")
			}
		})
	}
	t.Run("network", func(t *testing.T) {
		r := run(t, p, "import socket\ns = socket.create_connection(('1.1.1.1', 53), timeout=1)\nprint('connected')")
		if p.netns && (r.Status != StatusError || strings.Contains(r.Output, "connected")) {
			t.Errorf("network reachable inside the sandbox: %s %q", r.Status, r.Output)
		}
		t.Logf("network attempt: %s %q", r.Status, trunc(r.Output))
	})
	if r := run(t, p, "print('still fine')"); r.Status != StatusOK {
		t.Errorf("after hostile code the executor no longer works: %+v", r)
	}
}

func uidsBusy(p *Python) bool {
	return len(scanProcs(func(_ string, uid int) bool { return uid >= p.uidBase && uid < p.uidBase+uidBlock })) > 0
}

// trunc keeps the end of s, where a traceback says what went wrong.
func trunc(s string) string {
	if len(s) > 300 {
		return "…" + s[len(s)-300:]
	}
	return s
}

func TestPythonPersistent(t *testing.T) {
	needPython(t, finishTimeout)
	p, err := NewPython(Limits{Timeout: 2 * time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.NewSession()
	defer s.Close()
	ctx := context.Background()
	if r := s.Run(ctx, "x = 21"); r.Status != StatusOK {
		t.Fatalf("%+v", r)
	}
	if r := s.Run(ctx, "print(x * 2)"); r.Status != StatusOK || r.Output != "42\n" {
		t.Fatalf("variables not kept: %+v", r)
	}
	if r := s.Run(ctx, "import os\nos.system('echo from-child')"); !strings.Contains(r.Output, "from-child") {
		t.Errorf("child output not captured: %+v", r)
	}
	if r := s.Run(ctx, "print('first')\nprint(y)"); r.Status != StatusError || !strings.HasPrefix(r.Output, "first\nTraceback") || !strings.Contains(r.Output, "NameError") || strings.Contains(r.Output, "_run") {
		t.Errorf("error: %+v", r)
	}
	if r := s.Run(ctx, "while True: pass"); r.Status != StatusTimeout {
		t.Errorf("timeout: %+v", r)
	}
	if r := s.Run(ctx, "print(x)"); r.Status != StatusError || !strings.Contains(r.Output, "restarted") {
		t.Errorf("after a timeout the session should restart fresh with a notice: %+v", r)
	}
}

// TestPythonPersistentHostile: in a persistent session a process the call started does not
// outlive the call, and a fork bomb ends in a restart with nothing left behind.
func TestPythonPersistentHostile(t *testing.T) {
	needPython(t, finishTimeout)
	p, err := NewPython(Limits{Timeout: 2 * time.Second, MaxMemoryMB: 256, MaxProcs: 32}, true)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := p.NewSession()
	defer s.Close()
	ctx := context.Background()
	marker := fmt.Sprintf("agentrl-persistent-orphan-%d", time.Now().UnixNano())
	if r := s.Run(ctx, "import subprocess\nkeep = 7\nsubprocess.Popen(['sleep', '300', '"+marker+"'], start_new_session=True)\nprint('spawned')"); r.Status != StatusOK {
		t.Fatalf("%+v", r)
	}
	if out, _ := exec.Command("pgrep", "-f", marker).Output(); len(out) > 0 {
		t.Errorf("a process outlived the call in a persistent session: pid %s", out)
	}
	if r := s.Run(ctx, "print(keep)"); r.Output != "7\n" {
		t.Errorf("the interpreter did not survive the cleanup: %+v", r)
	}
	r := s.Run(ctx, "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass")
	if r.Status != StatusTimeout && r.Status != StatusKilled {
		t.Errorf("fork bomb: %+v", r)
	}
	if p.root && uidsBusy(p) {
		t.Error("a sandbox uid still has processes after the fork bomb")
	}
	if r := s.Run(ctx, "print('after')"); r.Status != StatusOK || !strings.Contains(r.Output, "after") {
		t.Errorf("the session did not restart: %+v", r)
	}
}

// TestPythonSandboxesBusy: as root, a call that finds every sandbox uid taken waits for its
// context and says so.
func TestPythonSandboxesBusy(t *testing.T) {
	p := needPython(t, finishTimeout)
	if !p.root {
		t.Skip("sandbox uids exist only as root")
	}
	var held []int
	for len(p.uids) > 0 {
		held = append(held, <-p.uids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s, _ := p.NewSession()
	if r := s.Run(ctx, "print(1)"); r.Status != StatusError || !strings.Contains(r.Output, "sandboxes are busy") {
		t.Errorf("got %+v", r)
	}
	for _, u := range held {
		p.uids <- u
	}
	if r := s.Run(context.Background(), "print(1)"); r.Status != StatusOK {
		t.Errorf("after the uids came back: %+v", r)
	}
}

func TestPoolClose(t *testing.T) {
	pool := NewPool(1)
	s, _ := (&Starlark{}).NewSession()
	block := make(chan struct{})
	started := make(chan struct{})
	slow := sessionFunc(func(ctx context.Context, code string) Result {
		close(started)
		<-block
		return Result{Status: StatusOK}
	})
	done := make(chan Result)
	go func() { done <- pool.Run(context.Background(), slow, "") }()
	<-started
	waiting := make(chan Result)
	go func() { waiting <- pool.Run(context.Background(), s, "print(1)") }()
	pool.Close()
	if r := <-waiting; r.Status != StatusKilled || !strings.Contains(r.Detail, "closed") {
		t.Errorf("a call waiting on a closed pool: %+v", r)
	}
	close(block)
	if r := <-done; r.Status != StatusOK {
		t.Errorf("the running call: %+v", r)
	}
	if r := pool.Run(context.Background(), s, "print(1)"); r.Status != StatusKilled {
		t.Errorf("a call after Close ran: %+v", r)
	}
	pool.Close() // idempotent
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := NewPool(1).Run(ctx, s, "print(1)"); r.Status != StatusKilled || !strings.Contains(r.Detail, "cancelled") {
		t.Errorf("cancelled context: %+v", r)
	}
}

func TestObserve(t *testing.T) {
	for _, tc := range []struct {
		r      Result
		format string
		max    int
		want   string
	}{
		{Result{Status: StatusOK, Output: "42\n"}, FormatInterpreter, 0, "<interpreter>\n42\n</interpreter>"},
		{Result{Status: StatusOK, Output: ""}, FormatToolResponse, 0, "[no output: use print() to see values]"},
		{Result{Status: StatusTimeout, Detail: "stopped after 5s"}, FormatToolResponse, 0, "[timeout: stopped after 5s]"},
		{Result{Status: StatusKilled, Output: "partial\n", Detail: "killed by SIGKILL"}, FormatToolResponse, 0, "partial\n[stopped: killed by SIGKILL]"},
		{Result{Status: StatusError, Output: "NameError: x"}, FormatToolResponse, 0, "NameError: x"},
		{Result{Status: StatusOK, Output: strings.Repeat("a", 20)}, FormatToolResponse, 10, "aaaaaaaaaa\n[… truncated]"},
		{Result{Status: StatusOK, Output: "ééééé"}, FormatToolResponse, 3, "é\n[… truncated]"},
		{Result{Status: StatusOK, Output: "7\n"}, "tag:output", 0, "<output>\n7\n</output>"},
		{Result{Status: StatusError, Output: "Traceback\nNameError: x\n"}, "tag:output", 0, "<output>\nTraceback\nNameError: x\n</output>"},
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
	if _, err := New(Config{Executor: &Starlark{}, Format: "xml"}); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("New with a bad format: %v", err)
	}
}

func TestToolShaping(t *testing.T) {
	for _, tc := range []struct {
		s    Summary
		want float64
	}{
		{Summary{}, 0},
		{Summary{ToolCalls: 1}, 1},
		{Summary{ToolCalls: 2, ToolErrors: 1, Recovered: true}, 1},
		{Summary{ToolCalls: 1, Timeouts: 1}, 0.5},
		{Summary{ToolCalls: 3, ToolErrors: 1, Killed: 1}, 0.5},
	} {
		if got := ToolShaping(tc.s); got != tc.want {
			t.Errorf("ToolShaping(%+v) = %v; want %v", tc.s, got, tc.want)
		}
	}
}

func TestEnvEpisode(t *testing.T) {
	e, err := New(Config{Executor: &Starlark{}, MaxTurns: 3, Weights: Weights{Outcome: 1, FormatPenalty: 0.5}})
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
	e2, _ := New(Config{Executor: &Starlark{}, MaxTurns: 4, Weights: Weights{Outcome: 1, Process: 0, Shaping: 0.2, FormatPenalty: 0.5}})
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

// TestLongTask: a long task (MinTurns 3) meets an early answer with Recheck and goes on, and
// the answer of its last turn counts; LongTrajectory picks a share of the trajectories, the same
// every time.
func TestLongTask(t *testing.T) {
	e, err := New(Config{Executor: &Starlark{}, MaxTurns: 4, MinTurns: 3, Weights: Weights{Outcome: 1, FormatPenalty: 0.5}})
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

func TestSyntheticTasks(t *testing.T) {
	s := Synthetic{Levels: []int{1, 2, 3, 4, 5, NamedOpLevel}, Seed: 7}
	train, held, err := s.Split(200, 40)
	if err != nil {
		t.Fatal(err)
	}
	train2, held2, _ := s.Split(200, 40)
	prompts := map[string]bool{}
	for i, tk := range train {
		if tk.Prompt != train2[i].Prompt {
			t.Fatal("not deterministic for a seed")
		}
		prompts[tk.Prompt] = true
	}
	for i, tk := range held {
		if held2[i].Prompt != tk.Prompt {
			t.Fatal("held-out not deterministic")
		}
		if prompts[tk.Prompt] {
			t.Fatalf("held-out task %q is also in train", tk.Prompt)
		}
	}
	// Every reference solution runs in both executors and prints the answer.
	st := &Starlark{}
	py, perr := NewPython(Limits{Timeout: 5 * time.Second}, false)
	for _, tk := range append(train[:30], held[:10]...) {
		if r := run(t, st, tk.Meta["code"]); r.Status != StatusOK || !Verify(r.Output, tk.Answer) {
			t.Errorf("starlark: %q printed %q (%s); answer %s", tk.Prompt, r.Output, r.Status, tk.Answer)
		}
		if perr == nil {
			if r := run(t, py, tk.Meta["code"]); r.Status != StatusOK || !Verify(r.Output, tk.Answer) {
				t.Errorf("python: %q printed %q (%s); answer %s", tk.Prompt, r.Output, r.Status, tk.Answer)
			}
		}
	}
	if _, _, err := (Synthetic{Levels: []int{9}}).Split(1, 1); err == nil || !strings.Contains(err.Error(), "level 9") {
		t.Errorf("bad level: %v", err)
	}
}

func TestDemonstrations(t *testing.T) {
	train, _, err := Synthetic{Levels: []int{2, 3}, Seed: 1}.Split(6, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := (&Starlark{}).NewSession()
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

// TestPoolBoundsConcurrency runs 64 executions through a pool of 2 and checks that at most 2 ran
// at once (counted, not timed).
func TestPoolBoundsConcurrency(t *testing.T) {
	pool := NewPool(2)
	var mu sync.Mutex
	cur, peak := 0, 0
	counting := sessionFunc(func(ctx context.Context, code string) Result {
		mu.Lock()
		cur++
		peak = max(peak, cur)
		mu.Unlock()
		s, _ := (&Starlark{}).NewSession()
		r := s.Run(ctx, code)
		mu.Lock()
		cur--
		mu.Unlock()
		return r
	})
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := pool.Run(context.Background(), counting, "s = 0\nfor i in range(20000):\n    s += i\nprint(s)"); r.Status != StatusOK {
				t.Errorf("%+v", r)
			}
		}()
	}
	wg.Wait()
	if peak > 2 {
		t.Errorf("%d executions ran at once through a pool of 2", peak)
	}
}

type sessionFunc func(ctx context.Context, code string) Result

func (f sessionFunc) Run(ctx context.Context, code string) Result { return f(ctx, code) }
func (f sessionFunc) Close() error                                { return nil }

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

// FuzzStarlark runs arbitrary text through the parser, the guard's rewrite and the interpreter
// with small limits: whatever the code, the call ends with a status and no panic.
func FuzzStarlark(f *testing.F) {
	for _, s := range []string{"print(1 + 2)", "l = [0] * 10\nl += l\nprint(l[1:3])", "s = 'a'.join(['b', 'c'])\nprint(s.replace('a', 'x'), '%s' % s)",
		"def f(x, y=2 * 3, *a, **k):\n    return x + y\nprint(f(1))", "d = {k: v for k, v in zip([1], [2])}\nd['x'] = d.get(1) * 2", "x = pow(3, 5, 7)\nx %= 5\nprint(str(x) * 3)",
		"a = [[1]]\na[0][0] += 1\nprint(getattr(a, 'append'))", "while True:\n    pass"} {
		f.Add(s)
	}
	ex := &Starlark{Limits: Limits{Timeout: time.Second, MaxSteps: 20000, MaxMemoryMB: 16}}
	f.Fuzz(func(t *testing.T, code string) {
		s, _ := ex.NewSession()
		r := s.Run(context.Background(), code)
		switch r.Status {
		case StatusOK, StatusError, StatusTimeout, StatusKilled:
		default:
			t.Fatalf("status %q", r.Status)
		}
		if strings.Contains(r.Output, "Error in $") {
			t.Fatalf("a guard's name leaked into the output: %q", r.Output)
		}
	})
}

func FuzzVerify(f *testing.F) {
	for _, s := range [][2]string{{"42", "42"}, {`\frac{1}{2}`, "0.5"}, {"1,234", "1234"}, {"x = 3", "3"}, {"1/0", "0"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if Verify(a, b) && normalize(a) != "" && !Verify(a, a) {
			t.Fatalf("Verify(%q, %q) but not reflexive on %q", a, b, a)
		}
		if _, ok := number(normalize(a)); ok && !Verify(a, a) {
			t.Fatalf("number %q does not verify against itself", a)
		}
	})
}

// BenchmarkExecutors runs 64 concurrent trajectories' executions through a pool of 2 (the CPU
// count) for each executor and reports executions per second. starlark-unguarded runs the same
// code through plain go.starlark.net (no rewrite, no budget) as the reference for the guard's
// cost; python-persistent makes 4 calls per session (one interpreter start per 4 calls).
func BenchmarkExecutors(b *testing.B) {
	code := "s = 0\nfor i in range(1000):\n    s += i * i\nprint(s % 97)"
	for _, tc := range []struct {
		name, executor, session string
		calls                   int
	}{
		{"starlark", "starlark", "fresh", 1},
		{"starlark-unguarded", "", "", 1},
		{"python-fresh", "python", "fresh", 1},
		{"python-persistent", "python", "persistent", 4},
	} {
		b.Run(tc.name, func(b *testing.B) {
			newSession := func() (Session, error) { return unguardedSession{}, nil }
			if tc.executor != "" {
				ex, err := NewExecutor(tc.executor, Limits{Timeout: 10 * time.Second}, tc.session)
				if err != nil {
					b.Skip(err)
				}
				newSession = ex.NewSession
			}
			pool := NewPool(2)
			defer pool.Close()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for j := 0; j < 64; j++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						s, err := newSession()
						if err != nil {
							b.Error(err)
							return
						}
						defer s.Close()
						for k := 0; k < tc.calls; k++ {
							if r := pool.Run(context.Background(), s, code); r.Status != StatusOK || r.Output != "19\n" {
								b.Errorf("%+v", r)
							}
						}
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(64*tc.calls*b.N)/time.Since(start).Seconds(), "executions/s")
		})
	}
}

// unguardedSession runs code with plain go.starlark.net: the benchmark's reference.
type unguardedSession struct{}

func (unguardedSession) Run(ctx context.Context, code string) Result {
	var out strings.Builder
	th := &starlark.Thread{Print: func(_ *starlark.Thread, msg string) { out.WriteString(msg + "\n") }}
	th.SetMaxExecutionSteps(10_000_000)
	if _, err := starlark.ExecFileOptions(starlarkOptions, th, "code.py", code, nil); err != nil {
		return Result{Status: StatusError, Output: err.Error()}
	}
	return Result{Status: StatusOK, Output: out.String()}
}

func (unguardedSession) Close() error { return nil }

func TestRulesHintAndProcessScore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       Summary
		hint    string // substring; "" means no hint
		process float64
	}{
		{"clean and correct", Summary{ToolCalls: 1, Answered: true, Correct: true}, "", 1},
		{"recovered and correct", Summary{ToolCalls: 2, ToolErrors: 1, Recovered: true, Answered: true, Correct: true}, "", 1},
		{"name error", Summary{ToolCalls: 1, ToolErrors: 1, LastError: "Traceback\nNameError: name 'x' is not defined", Answered: true}, "define every name", 0.7},
		{"starlark undefined", Summary{ToolCalls: 1, ToolErrors: 1, LastError: "code.py:1:7: undefined: x", Answered: true}, "fix it and run it again", 0.7},
		{"zero division", Summary{ToolCalls: 1, ToolErrors: 1, LastError: "ZeroDivisionError: division by zero"}, `"ZeroDivisionError: division by zero"`, 0.5},
		{"timeout", Summary{ToolCalls: 1, Timeouts: 1, LastError: "timeout"}, "ran too long", 0.5},
		{"killed", Summary{ToolCalls: 1, Killed: 1}, "resource limit", 0.5},
		{"format", Summary{FormatErrors: 2}, "<code>", 0.3},
		{"no answer", Summary{ToolCalls: 1}, `\boxed{answer}`, 0.8},
		{"guessed wrong", Summary{Answered: true}, "compute the answer with code", 0.6},
		{"wrong after clean run", Summary{ToolCalls: 1, Answered: true, Answer: "22671080", LastOutput: "22671880"}, "copy the printed number, 22671880, into", 1},
		{"copied a wrong computation", Summary{ToolCalls: 1, Answered: true, Answer: "9802", LastOutput: "9802"}, "exactly its numbers and operation", 1},
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
	guessed := Summary{Answered: true, Answer: "2188"}
	computedElse := Summary{ToolCalls: 1, Answered: true, Answer: "9802", LastOutput: "9802"}
	wrongCopy := Summary{ToolCalls: 1, Answered: true, Answer: "21883799", LastOutput: "21883792"}
	for _, tc := range []struct {
		name string
		s    Summary
		t    envs.Task
		want string
	}{
		{"guessed", guessed, oneLine, "Do not guess: run print(5047 * 4336) first, then give the printed result."},
		{"computed else", computedElse, oneLine, "The code computed something else than the question asks: run print(5047 * 4336), then copy the printed result."},
		{"wrong copy keeps its numbers", wrongCopy, oneLine, RulesHint(wrongCopy)},
		{"wrong copy of a wrong result", Summary{ToolCalls: 1, Answered: true, Answer: "6107020", LastOutput: "6120000"}, oneLine,
			"The code computed something else than the question asks: run print(5047 * 4336), then copy the printed result."},
		{"wrong copy of a wrong result, no program", Summary{ToolCalls: 1, Answered: true, Answer: "6107020", LastOutput: "6120000"},
			envs.Task{Prompt: "?", Answer: "21883792"}, hintComputedElse},
		{"wrong copy, no answer known", wrongCopy, envs.Task{Prompt: "?"}, RulesHint(wrongCopy)},
		{"correct needs none", Summary{ToolCalls: 1, Answered: true, Correct: true}, oneLine, ""},
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
