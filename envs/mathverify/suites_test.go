package mathverify

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
)

// suitesFile holds the cases of the public grader test suites (Math-Verify, NeMo-Skills, the
// deepscaler/PRIME graders, verl's MATH and DAPO normalisation), one JSON object a line.
const suitesFile = "testdata/suites.jsonl"

// suiteRow is one row of testdata/suites.jsonl: a case of another grader's tests, turned into a
// response and a reference answer with the suite's expected verdict.
type suiteRow struct {
	Suite    string `json:"suite"`  // math-verify, nemo-skills, deepscaler or verl-math
	Source   string `json:"source"` // "owner/repo path/to/file.py:LINE test name": unique, the key of knownDisagreements
	Response string `json:"response"`
	Truth    string `json:"truth"`
	Correct  bool   `json:"correct"` // the suite's expected verdict
	Scope    string `json:"scope"`   // in: a math-answer verifier's job; out: not (see Note)
	Note     string `json:"note"`
}

// suiteNames are the suites the file may name.
var suiteNames = map[string]bool{"math-verify": true, "nemo-skills": true, "deepscaler": true, "verl-math": true}

// knownDisagreements lists every in-scope row (by source) where Check rejects an answer the suite
// accepts, with the reason this verifier answers differently by design. A row missing from it, a
// row in it that now agrees, and any wrong answer Check passes fail the test: the list is the
// exact set of disagreements.
var knownDisagreements = map[string]string{
	"huggingface/Math-Verify tests/test_numina_cases.py:9 test_numina_cases": "the response lists (3,17,3,7) twice; a list of answers keeps " +
		"its multiplicity ('1, 1, 2' is not '1, 2, 2': roots counted with multiplicity), only a set \\{…\\} names each element once",
	"huggingface/Math-Verify tests/test_numina_cases.py:96 test_numina_cases": "as :9, the same response against the same truth",
	"huggingface/Math-Verify tests/test_numina_cases.py:54 test_numina_cases": "the truth p=5,q=2;p=7,q=2 gives solutions as loose equations; " +
		"reading them as the tuples (p, q) needs an order of the variables that neither side states",
	"huggingface/Math-Verify tests/test_numina_cases.py:121 test_numina_cases": "the labels name different functions' arguments (W(x) against " +
		"W(n)); a label is compared as written, so that a wrong label is not waved through",
	"huggingface/Math-Verify tests/test_open_thoughts.py:134 test_open_thoughts": "each box stands inside its own equation (y_1 = \\boxed{…} and " +
		"y_2 = \\boxed{…}); text other than and/or/commas between boxes does not join them, and labels outside boxes are not read",
	"NVIDIA/NeMo-Skills tests/test_math_equal.py:38 test_correct_examples (gt=first)": "17 followed by arbitrary text is not 17: only known " +
		"unit words are dropped ('42 apples' against 42 is a rejected row of pairs.jsonl), so that words appended to a number are not the number",
	"NVIDIA/NeMo-Skills tests/test_math_equal.py:38 test_correct_examples (gt=second)": "as (gt=first), the other way round",
}

// suitesMinAgreement is the share of in-scope rows of each suite the verifier must agree with.
const suitesMinAgreement = 0.95

// readSuites reads testdata/suites.jsonl.
func readSuites(t *testing.T) []suiteRow {
	t.Helper()
	f, err := os.Open(suitesFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []suiteRow
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	for line := 1; sc.Scan(); line++ {
		var r suiteRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s:%d: %v", suitesFile, line, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestSuites runs Check on every row of the ported grader suites and reports, per suite, how many
// in-scope rows it agrees with, and every disagreement. It fails on the file's own promises, on an
// in-scope wrong answer that Check passes, on a disagreement knownDisagreements does not explain,
// and on a suite below 95 % agreement. SUITES_VERBOSE logs every in-scope row.
func TestSuites(t *testing.T) {
	rows := readSuites(t)
	if len(rows) == 0 {
		t.Fatalf("%s has no rows", suitesFile)
	}
	type tally struct{ in, agree, out int }
	tallies := map[string]*tally{}
	seen := map[string]int{}
	verbose := os.Getenv("SUITES_VERBOSE") != "" // log every in-scope row, not only disagreements
	for i, r := range rows {
		line := i + 1
		switch {
		case !suiteNames[r.Suite]:
			t.Errorf("%s:%d: suite %q is not one of math-verify, nemo-skills, deepscaler, verl-math", suitesFile, line, r.Suite)
		case r.Source == "":
			t.Errorf("%s:%d: no source", suitesFile, line)
		case r.Truth == "":
			t.Errorf("%s:%d (%s): no truth", suitesFile, line, r.Source)
		case r.Scope != "in" && r.Scope != "out":
			t.Errorf("%s:%d (%s): scope %q is not in or out", suitesFile, line, r.Source, r.Scope)
		}
		if prev, ok := seen[r.Source]; ok && r.Source != "" {
			t.Errorf("%s:%d: source %q repeats line %d", suitesFile, line, r.Source, prev)
		}
		seen[r.Source] = line
		tl := tallies[r.Suite]
		if tl == nil {
			tl = &tally{}
			tallies[r.Suite] = tl
		}
		if r.Scope != "in" {
			tl.out++
			continue
		}
		tl.in++
		got := Check(r.Response, r.Truth, Options{})
		if verbose {
			t.Logf("row %s | %s | want %v got %v | extracted %q | normalized %q / %q",
				r.Suite, r.Source, r.Correct, got.Correct, got.Extracted, got.Normalized, Normalize(r.Truth))
		}
		reason, listed := knownDisagreements[r.Source]
		if got.Correct == r.Correct {
			tl.agree++
			if listed {
				t.Errorf("%s (%s): listed in knownDisagreements but Check agrees now; remove it", r.Source, r.Suite)
			}
			continue
		}
		t.Logf("disagree %s | %s | response %q | truth %q | want %v got %v | extracted %q | normalized %q / %q",
			r.Suite, r.Source, r.Response, r.Truth, r.Correct, got.Correct, got.Extracted, got.Normalized, Normalize(r.Truth))
		switch {
		case got.Correct && !r.Correct:
			t.Errorf("%s (%s): wrong answer passed: Check(%q, %q) = correct (extracted %q)", r.Source, r.Suite, r.Response, r.Truth, got.Extracted)
		case listed:
			t.Logf("  by design: %s", reason)
		default:
			t.Errorf("%s (%s): Check(%q, %q) = %v (extracted %q, normalized %q); the suite says %v, and knownDisagreements gives no reason",
				r.Source, r.Suite, r.Response, r.Truth, got.Correct, got.Extracted, got.Normalized, r.Correct)
		}
	}
	for src := range knownDisagreements {
		if _, ok := seen[src]; !ok {
			t.Errorf("knownDisagreements names %q, which is no row's source", src)
		}
	}
	names := make([]string, 0, len(tallies))
	for name := range tallies {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		tl := tallies[name]
		share := 1.0
		if tl.in > 0 {
			share = float64(tl.agree) / float64(tl.in)
		}
		msg := fmt.Sprintf("%s: %d in scope, %d agree (%.1f %%); %d out of scope", name, tl.in, tl.agree, 100*share, tl.out)
		t.Log(msg)
		if share < suitesMinAgreement {
			t.Errorf("%s: below %.0f %% agreement", msg, 100*suitesMinAgreement)
		}
	}
}
