package dataset

import (
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/parquet-go/parquet-go"
)

// VerlMessage is one chat message of a verl prompt.
type VerlMessage struct {
	Content string `parquet:"content"`
	Role    string `parquet:"role"`
}

// VerlRow is one row of verl's RL Parquet layout, as its DAPO-Math-17k file has it: the prompt
// a list of {role, content}, the answer reward_model.ground_truth, the id extra_info.index.
type VerlRow struct {
	DataSource  string        `parquet:"data_source"`
	Prompt      []VerlMessage `parquet:"prompt,list"`
	Ability     string        `parquet:"ability"`
	RewardModel struct {
		GroundTruth string `parquet:"ground_truth"`
		Style       string `parquet:"style"`
	} `parquet:"reward_model"`
	ExtraInfo struct {
		Index string `parquet:"index"`
	} `parquet:"extra_info"`
}

// The DAPO-Math-17k prompt around each problem (slime's JSONL and verl's Parquet alike).
const (
	DAPOBefore = "Solve the following math problem step by step. The last line of your response should be of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
	DAPOAfter  = "\n\nRemember to put your answer on its own line after \"Answer:\"."
)

// DAPORow is the verl row of a DAPO-Math-17k problem with its answer and index.
func DAPORow(problem, answer, index string) VerlRow {
	var r VerlRow
	r.DataSource, r.Ability = "math_dapo", "MATH"
	r.Prompt = []VerlMessage{{Content: DAPOBefore + problem + DAPOAfter, Role: "user"}}
	r.RewardModel.GroundTruth, r.RewardModel.Style = answer, "rule-lighteval/MATH_v2"
	r.ExtraInfo.Index = index
	return r
}

// DAPOIndex is a DAPO-style uuid for problem i.
func DAPOIndex(i int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", 0x5a3e0000+i*7919, 0x1000+i*31, i*17%4096, i*13%4096, 0x2b7c0000+i*104729)
}

// syntheticStories pad the synthetic problems to DAPO's lengths (a few hundred characters).
var syntheticStories = []string{
	"A teacher writes a sequence of numbers on the board and asks the class a question about them. ",
	"In a small town, the annual fair sells tickets in bundles, and the organisers keep careful records. ",
	"A robot moves on a grid of unit squares, one step at a time, following a fixed rule. ",
	"Two friends play a game with a pile of stones, taking turns and never passing. ",
	"",
}

// SyntheticDAPO is problem i of a synthetic DAPO-Math-17k: a distinct problem (its numbers
// come from i and seed) with its integer answer.
func SyntheticDAPO(i int, seed uint64) (problem, answer string) {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	story := syntheticStories[rng.IntN(len(syntheticStories))]
	a, b, c := 10+rng.IntN(90), 2+rng.IntN(40), i+1
	switch i % 4 {
	case 0:
		return fmt.Sprintf("%sLet $x$ and $y$ be positive integers with $x+y=%d$. Find the largest possible value of $xy + %d$.", story, 2*a, c), fmt.Sprint(a*a + c)
	case 1:
		return fmt.Sprintf("%sFind the remainder when $%d \\cdot %d + %d$ is divided by $%d$.", story, a, b, c, b+1), fmt.Sprint((a*b + c) % (b + 1))
	case 2:
		return fmt.Sprintf("%sThe sum of %d consecutive integers starting at $%d$ is $S$. Find $S$.", story, b, c), fmt.Sprint(b*c + b*(b-1)/2)
	}
	return fmt.Sprintf("%sCompute $\\sum_{k=1}^{%d} (k + %d)$.", story, a, c), fmt.Sprint(a*(a+1)/2 + a*c)
}

// WriteSyntheticDAPO writes a synthetic DAPO-Math-17k in verl's layout: problems distinct
// problems (SyntheticDAPO), the whole list repeated times over as verl's file repeats its
// 17,917 problems about a hundred times (each copy with its problem's index), Snappy-compressed
// in row groups of rowGroup rows. progress, when not nil, is called after each row group with
// the rows written.
func WriteSyntheticDAPO(w io.Writer, problems, repeats, rowGroup int, seed uint64, progress func(written int64)) error {
	if problems <= 0 || repeats <= 0 || rowGroup <= 0 {
		return fmt.Errorf("a synthetic DAPO file needs problems, repeats and rows per row group above 0 (got %d, %d, %d)", problems, repeats, rowGroup)
	}
	rows := make([]VerlRow, problems)
	for i := range rows {
		p, a := SyntheticDAPO(i, seed)
		rows[i] = DAPORow(p, a, DAPOIndex(i))
	}
	// The root named "schema", as pyarrow (which wrote verl's files) names it.
	pw := parquet.NewGenericWriter[VerlRow](w, parquet.NewSchema("schema", parquet.SchemaOf(VerlRow{})), parquet.Compression(&parquet.Snappy))
	var written int64
	batch := make([]VerlRow, 0, rowGroup)
	flush := func() error {
		if _, err := pw.Write(batch); err != nil {
			return err
		}
		if err := pw.Flush(); err != nil {
			return err
		}
		written += int64(len(batch))
		batch = batch[:0]
		if progress != nil {
			progress(written)
		}
		return nil
	}
	for range repeats {
		for _, r := range rows {
			if batch = append(batch, r); len(batch) == rowGroup {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return err
		}
	}
	return pw.Close()
}
