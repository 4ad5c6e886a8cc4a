package mathverify

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// Pair is one row of testdata/pairs.jsonl: a response (a whole model reply, or one line of it),
// the reference answer, whether the response is correct, and the answer style it was written from.
type Pair struct {
	Response           string `json:"response"`
	Truth              string `json:"truth"`
	Correct            bool   `json:"correct"`
	Style              string `json:"style"` // aime, math or dapo
	LastNumberFallback bool   `json:"last_number_fallback"`
	Note               string `json:"note"`
}

// readPairs reads testdata/pairs.jsonl.
func readPairs(t *testing.T) []Pair {
	t.Helper()
	f, err := os.Open("testdata/pairs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pairs []Pair
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		var p Pair
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("testdata/pairs.jsonl:%d: %v", line, err)
		}
		pairs = append(pairs, p)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return pairs
}

// TestPairs checks every row of the answer table with Check, and the table's own promises: at
// least 200 rows, 60 of them incorrect, every style present.
func TestPairs(t *testing.T) {
	pairs := readPairs(t)
	wrong, styles := 0, map[string]int{}
	for i, p := range pairs {
		if !p.Correct {
			wrong++
		}
		styles[p.Style]++
		got := Check(p.Response, p.Truth, Options{LastNumberFallback: p.LastNumberFallback})
		if got.Correct != p.Correct {
			t.Errorf("row %d (%s): Check(%q, %q, fallback %v) = %v (extracted %q, normalized %q / %q); want %v",
				i+1, p.Style, p.Response, p.Truth, p.LastNumberFallback, got.Correct, got.Extracted, got.Normalized, Normalize(p.Truth), p.Correct)
		}
	}
	if len(pairs) < 200 || wrong < 60 {
		t.Errorf("the table has %d rows, %d incorrect; want at least 200 and 60", len(pairs), wrong)
	}
	for _, s := range []string{"aime", "math", "dapo"} {
		if styles[s] == 0 {
			t.Errorf("no %s rows", s)
		}
	}
}
