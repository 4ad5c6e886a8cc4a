package envs

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPassAtK(t *testing.T) {
	for _, tc := range []struct {
		n, c, k int
		want    float64
	}{
		{10, 0, 1, 0},
		{10, 10, 1, 1},
		{10, 3, 1, 0.3},
		{4, 1, 2, 0.5},           // 1 − C(3,2)/C(4,2) = 1 − 3/6
		{8, 2, 4, 1 - 15.0/70.0}, // C(6,4)=15, C(8,4)=70
		{8, 5, 4, 1},             // n − c < k
		{100, 1, 100, 1},
		{5, 2, 3, 1 - 1.0/10.0}, // C(3,3)=1, C(5,3)=10
	} {
		got, err := PassAtK(tc.n, tc.c, tc.k)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("PassAtK(%d, %d, %d) = %v; want %v", tc.n, tc.c, tc.k, got, tc.want)
		}
	}
	for _, bad := range [][3]int{{0, 0, 1}, {4, 1, 5}, {4, 5, 1}, {4, -1, 1}, {4, 1, 0}} {
		if _, err := PassAtK(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("PassAtK%v accepted", bad)
		}
	}
	m, err := MeanPassAtK([][2]int{{4, 1}, {4, 4}}, 2)
	if err != nil || math.Abs(m-0.75) > 1e-12 {
		t.Errorf("MeanPassAtK = %v, %v; want 0.75", m, err)
	}
}

func TestPassAtKChange(t *testing.T) {
	// pass@2 of n = 4: c = 0 → 0, 1 → 1/2, 2 → 5/6, 3 and 4 → 1. Changes 1/2, 0, 1/6: mean 2/9,
	// sample sd √(0.1296296/2) = 0.254588, over √3: 0.146986.
	before := [][2]int{{4, 1}, {4, 0}, {4, 2}}
	after := [][2]int{{4, 3}, {4, 0}, {4, 4}}
	d, se, err := PassAtKChange(before, after, 2)
	if err != nil || math.Abs(d-2.0/9) > 1e-12 || math.Abs(se-0.146986) > 1e-6 {
		t.Errorf("PassAtKChange = %v ± %v, %v; want 0.222222 ± 0.146986", d, se, err)
	}
	if d, se, err := PassAtKChange(after, before, 2); err != nil || math.Abs(d+2.0/9) > 1e-12 || math.Abs(se-0.146986) > 1e-6 {
		t.Errorf("reversed: %v ± %v, %v; want the negated change, same error", d, se, err)
	}
	if d, se, err := PassAtKChange(before[:1], after[:1], 2); err != nil || d != 0.5 || !math.IsNaN(se) {
		t.Errorf("one task: %v ± %v, %v; want 0.5 ± NaN", d, se, err)
	}
	for _, bad := range []struct {
		before, after [][2]int
		k             int
	}{{before, after[:2], 2}, {nil, nil, 1}, {before, after, 5}} {
		if _, _, err := PassAtKChange(bad.before, bad.after, bad.k); err == nil {
			t.Errorf("PassAtKChange(%v, %v, %d) accepted", bad.before, bad.after, bad.k)
		}
	}
}

func TestFingerprint(t *testing.T) {
	a := []Task{{ID: "1", Prompt: "What is 2 + 2?", Answer: "4"}, {ID: "2", Prompt: "What is 3 * 3?", Answer: "9"}}
	same := []Task{{ID: "x", Prompt: "What is 2 + 2?", Answer: "4"}, {ID: "y", Prompt: "What is 3 * 3?", Answer: "9"}}
	if Fingerprint(a) != Fingerprint(same) || len(Fingerprint(a)) != 16 {
		t.Errorf("the same tasks under other ids: %s vs %s", Fingerprint(a), Fingerprint(same))
	}
	for name, other := range map[string][]Task{
		"order":    {a[1], a[0]},
		"answer":   {a[0], {Prompt: a[1].Prompt, Answer: "10"}},
		"fewer":    a[:1],
		"boundary": {{Prompt: "What is 2 + 2?4", Answer: ""}, a[1]},
	} {
		if Fingerprint(other) == Fingerprint(a) {
			t.Errorf("%s: another task list has the same fingerprint", name)
		}
	}
}

func TestLoadJSONL(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	good := write("good.jsonl", `{"id":"a","problem":"1+1?","answer":"2"}
{"question":"2+2?","solution":4}

{"id":"c","prompt":"3+3?","answer":"6"}
`)
	tasks, err := LoadJSONL(good, Fields{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 3 || tasks[0].ID != "a" || tasks[1].ID != "line-2" || tasks[1].Answer != "4" || tasks[2].Prompt != "3+3?" {
		t.Errorf("got %+v", tasks)
	}
	named := write("named.jsonl", `{"q":"x?","a":"y"}`)
	if ts, err := LoadJSONL(named, Fields{Prompt: "q", Answer: "a"}); err != nil || ts[0].Answer != "y" {
		t.Errorf("named fields: %v %v", ts, err)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"bad json", `{"problem":`, "bad.jsonl:1: not a JSON object"},
		{"no prompt", `{"answer":"1"}`, `bad.jsonl:1: no text in field "problem"`},
		{"no answer", "{\"problem\":\"p\",\"answer\":\"1\"}\n{\"problem\":\"p\"}", `bad.jsonl:2: no answer in field "answer"`},
		{"dup id", "{\"id\":\"x\",\"problem\":\"p\",\"answer\":\"1\"}\n{\"id\":\"x\",\"problem\":\"q\",\"answer\":\"1\"}", `bad.jsonl:2: task id "x" repeats line 1`},
		{"empty", "", "bad.jsonl: no tasks"},
	} {
		p := write("bad.jsonl", tc.body)
		if _, err := LoadJSONL(p, Fields{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v; want %q", tc.name, err, tc.want)
		}
	}
	if _, err := LoadJSONL(filepath.Join(dir, "missing.jsonl"), Fields{}); err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Errorf("missing file: %v", err)
	}
}

// TestMessageJSON: a message with only a role and content encodes as {"role", "content"}; the
// optional fields follow in their order; a tool call reads both its own form and OpenAI's, and
// arguments given as text come back as that text.
func TestMessageJSON(t *testing.T) {
	b, err := json.Marshal(Message{Role: "user", Content: "hi <b>"})
	if err != nil || string(b) != `{"role":"user","content":"hi \u003cb\u003e"}` {
		t.Errorf("plain message: %s (%v)", b, err)
	}
	r := "hmm"
	m := Message{Role: "assistant", Content: "", Name: "n", ToolCallID: "c", ReasoningContent: &r,
		ToolCalls: []ToolCall{{ID: "call_0", Name: "python", Arguments: TextArguments(`{"code":"1"}`)}, {Name: "f", Arguments: json.RawMessage(`{"b": 1, "a": 2}`)}}}
	b, err = json.Marshal(m)
	const want = `{"role":"assistant","content":"","name":"n","tool_call_id":"c","tool_calls":[{"id":"call_0","name":"python","arguments":"{\"code\":\"1\"}"},` +
		`{"name":"f","arguments":{"b":1,"a":2}}],"reasoning_content":"hmm"}`
	if err != nil || string(b) != want {
		t.Fatalf("full message: %s (%v)\nwant %s", b, err, want)
	}
	var back Message
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if again, _ := json.Marshal(back); string(again) != want {
		t.Errorf("read back and re-encoded: %s", again)
	}
	if got := back.ToolCalls[0].Text(); got != `{"code":"1"}` {
		t.Errorf("text arguments read back as %q", got)
	}
	if got := back.ToolCalls[1].Text(); got != `{"b":1,"a":2}` {
		t.Errorf("object arguments read back as %q", got)
	}
	var c ToolCall
	if err := json.Unmarshal([]byte(`{"id":"x","type":"function","function":{"name":"g","arguments":{"k": [1, 2]}}}`), &c); err != nil ||
		c.ID != "x" || c.Name != "g" || string(c.Arguments) != `{"k": [1, 2]}` {
		t.Errorf("OpenAI form read as %+v (%v)", c, err)
	}
	for _, s := range []string{"", "not JSON", `{"code": "print(\"<b>\")"}`, "caf\u00e9"} {
		if got := (ToolCall{Arguments: TextArguments(s)}).Text(); got != s {
			t.Errorf("TextArguments(%q).Text() = %q", s, got)
		}
	}
	if got := (ToolCall{}).Text(); got != "" {
		t.Errorf("no arguments: Text() = %q", got)
	}
}
