package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/model"
	"agentrl/engine/rollout"
)

// Parity tolerances on the log-probability of each next token against HuggingFace's float32
// values: float32 meets the fixtures' own 1e-4; bfloat16 keeps 8 bits of mantissa, so a
// log-probability of about −6 (a 512-token vocabulary) moves by a few hundredths.
const (
	TolF32  = 1e-4
	TolBF16 = 0.05
)

// ParityRow is one fixture in one compute dtype against its HF golden values: the largest
// log-prob error, the share of positions whose argmax agrees, and how many of the cases' greedy
// continuations equal HF's, through Model.Greedy (what `score --greedy` prints) and through the
// rollout engine (what `generate` prints). OK holds when the error is within Tolerance and, in
// float32, every argmax and continuation agrees.
type ParityRow struct {
	Fixture       string  `json:"fixture"`
	DType         string  `json:"dtype"`
	Cases         int     `json:"cases"`
	MaxLogProbErr float64 `json:"max_logprob_err"`
	ArgmaxAgree   float64 `json:"argmax_agree"`
	ScoreGreedy   int     `json:"score_greedy_equal"`
	Generate      int     `json:"generate_greedy_equal"`
	Tolerance     float64 `json:"tolerance"`
	OK            bool    `json:"ok"`
	Seconds       float64 `json:"seconds"`
	Error         string  `json:"error,omitempty"`
}

type golden struct {
	Cases []struct {
		InputIDs []int32   `json:"input_ids"`
		LogProbs []float64 `json:"next_token_logprobs"`
		Argmax   []int32   `json:"argmax_per_pos"`
		Greedy   []int32   `json:"greedy_continuation"`
	} `json:"cases"`
}

// Fixtures lists the model fixtures below root: folders with config.json and golden.json.
func Fixtures(root string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(root, "*", "golden.json"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, g := range m {
		dir := filepath.Dir(g)
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
			out = append(out, dir)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("no model fixtures (config.json + golden.json) below %s", root)
	}
	return out, nil
}

// Parity checks every fixture folder in every dtype on backend b; a fixture that fails to load or
// run gives a row with its error.
func Parity(ctx context.Context, b compute.Backend, dirs []string, dts []dtypes.DType) []ParityRow {
	var rows []ParityRow
	for _, dir := range dirs {
		for _, dt := range dts {
			t0 := time.Now()
			row := parityOne(ctx, b, dir, dt)
			row.Seconds = time.Since(t0).Seconds()
			rows = append(rows, row)
		}
	}
	return rows
}

func parityOne(ctx context.Context, b compute.Backend, dir string, dt dtypes.DType) ParityRow {
	row := ParityRow{Fixture: filepath.Base(dir), DType: strings.ToLower(dt.String()), Tolerance: TolF32}
	if dt != dtypes.Float32 {
		row.Tolerance = TolBF16
	}
	fail := func(err error) ParityRow { row.Error = err.Error(); return row }
	data, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		return fail(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		return fail(fmt.Errorf("%s/golden.json: %w", dir, err))
	}
	m, err := model.Load(b, dir, model.Options{Compute: dt})
	if err != nil {
		return fail(err)
	}
	defer m.Close()
	seqs := make([][]int32, len(g.Cases))
	for i, c := range g.Cases {
		seqs[i] = c.InputIDs
	}
	s, err := m.Score(seqs)
	if err != nil {
		return fail(err)
	}
	row.Cases = len(g.Cases)
	agree, positions := 0, 0
	for i, c := range g.Cases {
		for t, want := range c.LogProbs {
			row.MaxLogProbErr = math.Max(row.MaxLogProbErr, math.Abs(float64(s.NextLogProbs[i][t])-want))
		}
		for t, want := range c.Argmax {
			positions++
			if t < len(s.Argmax[i]) && s.Argmax[i][t] == want {
				agree++
			}
		}
		greedy, err := m.Greedy(c.InputIDs, len(c.Greedy))
		if err != nil {
			return fail(err)
		}
		if slices.Equal(greedy, c.Greedy) {
			row.ScoreGreedy++
		}
		res, err := rollout.GenerateOnce(ctx, m, nil, c.InputIDs, len(c.Greedy), rollout.Sampling{Temperature: 0, TopP: 1, Seed: 1})
		if err != nil {
			return fail(err)
		}
		if slices.Equal(res.IDs, c.Greedy) {
			row.Generate++
		}
	}
	if positions > 0 {
		row.ArgmaxAgree = float64(agree) / float64(positions)
	}
	row.OK = row.MaxLogProbErr <= row.Tolerance
	if dt == dtypes.Float32 {
		row.OK = row.OK && agree == positions && row.ScoreGreedy == row.Cases && row.Generate == row.Cases
	}
	return row
}
