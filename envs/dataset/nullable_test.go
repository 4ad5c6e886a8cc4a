package dataset

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// Nullable columns, as pandas and pyarrow write every column: a present value reads as a
// required one would, and a null answer counts as absent, so the next default is read.
func TestParquetNullable(t *testing.T) {
	type message struct {
		Content *string `parquet:"content,optional"`
		Role    *string `parquet:"role,optional"`
	}
	type rewardModel struct {
		GroundTruth *string `parquet:"ground_truth,optional"`
	}
	type nullableRow struct {
		Prompt      []message    `parquet:"prompt,optional,list"`
		RewardModel *rewardModel `parquet:"reward_model,optional"`
		Answer      *int64       `parquet:"answer,optional"`
	}
	s := func(x string) *string { return &x }
	seven := int64(7)
	rows := []nullableRow{
		{Prompt: []message{{s("Compute $3+4$."), s("user")}}, RewardModel: &rewardModel{s("72")}, Answer: &seven},
		{Prompt: []message{{s("Compute $5+3$."), s("user")}}, RewardModel: &rewardModel{s("8")}},
	}
	var b bytes.Buffer
	if err := parquet.Write(&b, rows); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "nullable.parquet")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := Read(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{set.Tasks[0].Answer, set.Tasks[1].Answer, set.Tasks[1].Prompt}; got[0] != "7" || got[1] != "8" || got[2] != "Compute $5+3$." {
		t.Errorf("answers and second prompt %q; want 7, 8 (the null answer falls to reward_model.ground_truth) and the user message", got)
	}
}
