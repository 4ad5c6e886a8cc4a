package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
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
	for _, tc := range []struct {
		name, stdin string
		args        []string
		want        string // the output line, or a part of the error
		fails       bool
	}{
		{"boxed", `so $\boxed{\frac12}$`, []string{"verify", "--truth", "0.5"}, `{"correct":true,"extracted":"\\frac12","normalized":"(1/2)"}` + "\n", false},
		{"wrong", "Answer: 34", []string{"verify", "--truth", "033"}, `{"correct":false,"extracted":"34","normalized":"34"}` + "\n", false},
		{"nothing extracts", "the answer is 7", []string{"verify", "--truth", "7"}, `{"correct":false,"extracted":"","normalized":""}` + "\n", false},
		{"fallback", "the answer is 7", []string{"verify", "--truth", "7", "--last-number-fallback"}, `{"correct":true,"extracted":"7","normalized":"7"}` + "\n", false},
		{"no truth", "x", []string{"verify"}, "--truth is missing", true},
		{"empty truth", "x", []string{"verify", "--truth", " "}, "--truth is missing or empty", true},
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
