package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"agentrl/envs/mathverify"
)

// TestVerifyTable runs the real verify command over every row of the verifier's answer table
// (envs/mathverify/testdata/pairs.jsonl) and gets the table's verdicts.
func TestVerifyTable(t *testing.T) {
	f, err := os.Open("../envs/mathverify/testdata/pairs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row struct {
			Response           string `json:"response"`
			Truth              string `json:"truth"`
			Correct            bool   `json:"correct"`
			LastNumberFallback bool   `json:"last_number_fallback"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("row %d: %v", rows+1, err)
		}
		rows++
		args := []string{"verify", "--truth", row.Truth}
		if row.LastNumberFallback {
			args = append(args, "--last-number-fallback")
		}
		var out, errb bytes.Buffer
		if err := Run(args, Env{Stdin: strings.NewReader(row.Response), Stdout: &out, Stderr: &errb}); err != nil {
			t.Fatalf("row %d: %v: %v\n%s", rows, args, err, errb.String())
		}
		if strings.Count(out.String(), "\n") != 1 {
			t.Errorf("row %d printed %q; want one JSON line", rows, out.String())
		}
		var got mathverify.Result
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("row %d: output %q: %v", rows, out.String(), err)
		}
		if got.Correct != row.Correct {
			t.Errorf("row %d: verify --truth %q on %q: correct %v (extracted %q); want %v", rows, row.Truth, row.Response, got.Correct, got.Extracted, row.Correct)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows < 200 {
		t.Errorf("read %d rows; want the whole table (200 or more)", rows)
	}
}

func TestVerifyCommand(t *testing.T) {
	const v = `,"grader":"verifier@agentrl mathverify"}` + "\n"
	const d = `,"grader":"math_dapo@verl@ea56e9ac47c3 verl/utils/reward_score/math_dapo.py + recipe/retool/retool.py"}` + "\n"
	for _, tc := range []struct {
		name, stdin string
		args        []string
		want        string // the output line, or a part of the error
		fails       bool
	}{
		{"boxed", `so $\boxed{\frac12}$`, []string{"verify", "--truth", "0.5"}, `{"correct":true,"score":1,"extracted":"\\frac12","normalized":"(1/2)"` + v, false},
		{"wrong", "Answer: 34", []string{"verify", "--truth", "033"}, `{"correct":false,"score":0,"extracted":"34","normalized":"34"` + v, false},
		{"nothing extracts", "the answer is 7", []string{"verify", "--truth", "7"}, `{"correct":false,"score":0,"extracted":"","normalized":""` + v, false},
		{"fallback", "the answer is 7", []string{"verify", "--truth", "7", "--last-number-fallback"}, `{"correct":true,"score":1,"extracted":"7","normalized":"7"` + v, false},
		{"grader verifier by name", `\boxed{7}`, []string{"verify", "--grader", "verifier", "--truth", "7"}, `{"correct":true,"score":1,"extracted":"7","normalized":"7"` + v, false},
		{"math_dapo right", `so $\boxed{\frac{1}{2}}$`, []string{"verify", "--grader", "math_dapo", "--truth", `\frac{1}{2}`}, `{"correct":true,"score":1,"extracted":"\\frac{1}{2}","normalized":"\\frac{1}{2}"` + d, false},
		{"math_dapo strict: 0.5 is not \\frac{1}{2}", `so $\boxed{0.5}$`, []string{"verify", "--grader", "math_dapo", "--truth", `\frac{1}{2}`}, `{"correct":false,"score":-1,"extracted":"0.5","normalized":"0.5"` + d, false},
		{"math_dapo shaping", `\boxed{41}`, []string{"verify", "--grader", "math_dapo", "--tool-calls", "2", "--truth", "42"}, `{"correct":false,"score":-0.8,"extracted":"41","normalized":"41"` + d, false},
		{"math_dapo no box", "Answer: 42", []string{"verify", "--grader", "math_dapo", "--tool-calls", "9", "--truth", "42"}, `{"correct":false,"score":-0.6,"extracted":"","normalized":""` + d, false},
		{"math_dapo_slime", `\boxed{41}`, []string{"verify", "--grader", "math_dapo_slime", "--truth", "42"}, `{"correct":false,"score":-1.1,"extracted":"41","normalized":"41","grader":"math_dapo_slime@slime@624b824a898a examples/retool/generate_with_retool.py + slime/rollout/rm_hub/math_dapo_utils.py"}` + "\n", false},
		{"no truth", "x", []string{"verify"}, "--truth is missing", true},
		{"empty truth", "x", []string{"verify", "--truth", " "}, "--truth is missing or empty", true},
		{"unknown grader", "x", []string{"verify", "--grader", "mathverify", "--truth", "1"}, `unknown grader "mathverify"; the graders are math_dapo, math_dapo_slime, verifier`, true},
		{"fallback is the verifier's", "x", []string{"verify", "--grader", "math_dapo", "--last-number-fallback", "--truth", "1"}, "--last-number-fallback is an option of the verifier", true},
		{"negative tool calls", "x", []string{"verify", "--tool-calls", "-1", "--truth", "1"}, "--tool-calls -1 is negative", true},
		{"truth with jsonl", "", []string{"verify", "--jsonl", "--truth", "1"}, "with --jsonl every line carries its own truth", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := Run(tc.args, Env{Stdin: strings.NewReader(tc.stdin), Stdout: &out, Stderr: &errb})
			if tc.fails {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%v: error %v; want one containing %q", tc.args, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %v", tc.args, err)
			}
			if out.String() != tc.want {
				t.Errorf("%v printed %q; want %q", tc.args, out.String(), tc.want)
			}
		})
	}
}

// TestVerifyJSONL judges a table in one process: a verdict line per input line, numbered, blank
// lines skipped, malformed lines reported in place with the exit status 1 at the end.
func TestVerifyJSONL(t *testing.T) {
	stdin := strings.Join([]string{
		`{"response": "so \\boxed{42}", "truth": "42"}`,
		`{"response": "\\boxed{41}", "truth": "42", "tool_calls": 3, "note": "ignored"}`,
		``,
		`not json`,
		`{"truth": "42"}`,
		`{"response": "\\boxed{42}", "truth": " "}`,
		`{"response": "\\boxed{42}", "truth": 42}`,
		`{"response": "\\boxed{42}", "truth": "42", "tool_calls": -1}`,
		`{"response": "\\boxed{0.5}", "truth": "\\frac{1}{2}", "tool_calls": 1}`,
	}, "\n") // no final newline: the last line still counts
	for _, tc := range []struct {
		grader string
		want   []string // each output line's start (the line number) and a part of it
	}{
		{"verifier", []string{
			`{"line":1,"correct":true,"score":1,"extracted":"42"`,
			`{"line":2,"correct":false,"score":0,"extracted":"41"`,
			`{"line":4,"error":"not a JSON object`,
			`{"line":5,"error":"\"response\" is missing"}`,
			`{"line":6,"error":"\"truth\" is missing or empty"}`,
			`{"line":7,"error":"not a JSON object`,
			`{"line":8,"error":"\"tool_calls\" -1 is negative"}`,
			`{"line":9,"correct":true,"score":1,"extracted":"0.5"`,
		}},
		{"math_dapo", []string{
			`{"line":1,"correct":true,"score":1,"extracted":"42"`,
			`{"line":2,"correct":false,"score":-0.7,"extracted":"41"`,
			`{"line":4,"error"`,
			`{"line":5,"error"`,
			`{"line":6,"error"`,
			`{"line":7,"error"`,
			`{"line":8,"error"`,
			`{"line":9,"correct":false,"score":-0.9,"extracted":"0.5","normalized":"0.5","grader":"math_dapo@verl@`,
		}},
	} {
		var out, errb bytes.Buffer
		err := Run([]string{"verify", "--jsonl", "--grader", tc.grader}, Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb})
		var code exitStatus
		if !errors.As(err, &code) || code != 1 {
			t.Errorf("%s: error %v; want exit status 1 after the malformed lines", tc.grader, err)
		}
		if !strings.Contains(errb.String(), "5 malformed line(s), the first line 4") {
			t.Errorf("%s: stderr %q; want the count of malformed lines", tc.grader, errb.String())
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != len(tc.want) {
			t.Fatalf("%s: %d lines %q; want %d", tc.grader, len(lines), out.String(), len(tc.want))
		}
		for i, line := range lines {
			if !strings.HasPrefix(line, tc.want[i]) {
				t.Errorf("%s: line %d %q; want it to start %q", tc.grader, i+1, line, tc.want[i])
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Errorf("%s: line %d %q is not JSON: %v", tc.grader, i+1, line, err)
			}
		}
	}

	// All well-formed: exit 0, nothing on stderr; an empty stdin writes nothing.
	for _, in := range []string{`{"response": "\\boxed{1}", "truth": "1"}` + "\n", ""} {
		var out, errb bytes.Buffer
		if err := Run([]string{"verify", "--jsonl"}, Env{Stdin: strings.NewReader(in), Stdout: &out, Stderr: &errb}); err != nil || errb.Len() != 0 {
			t.Errorf("verify --jsonl on %q: %v, stderr %q", in, err, errb.String())
		}
		if want := strings.Count(in, "\n"); strings.Count(out.String(), "\n") != want {
			t.Errorf("verify --jsonl on %q printed %q; want %d line(s)", in, out.String(), want)
		}
	}
}

// TestVerifyJSONLTable runs the verifier's answer table through one verify --jsonl process and
// gets the same verdicts as the table (the rows without last_number_fallback).
func TestVerifyJSONLTable(t *testing.T) {
	data, err := os.ReadFile("../envs/mathverify/testdata/pairs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var want []bool
	var in strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var row struct {
			Correct            bool `json:"correct"`
			LastNumberFallback bool `json:"last_number_fallback"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		if row.LastNumberFallback {
			continue
		}
		want = append(want, row.Correct)
		in.WriteString(line + "\n")
	}
	var out, errb bytes.Buffer
	if err := Run([]string{"verify", "--jsonl"}, Env{Stdin: strings.NewReader(in.String()), Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatalf("verify --jsonl: %v\n%s", err, errb.String())
	}
	sc := bufio.NewScanner(&out)
	n := 0
	for sc.Scan() {
		var got lineVerdict
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got.Line != n+1 || n >= len(want) {
			t.Fatalf("output line %d is for input line %d", n+1, got.Line)
		}
		if got.Correct != want[n] {
			t.Errorf("row %d: correct %v (extracted %q); want %v", n+1, got.Correct, got.Extracted, want[n])
		}
		n++
	}
	if n != len(want) || n < 200 {
		t.Errorf("%d verdicts for %d rows; want one each (200 or more)", n, len(want))
	}
}
