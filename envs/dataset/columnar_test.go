package dataset

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// splitMessage and splitRow make a file that has what the DAPO files lack: a split column, a
// system message in the chat prompt, ids that differ between copies of a problem, and a copy
// whose id is null.
type splitMessage struct {
	Role    string `parquet:"role"`
	Content string `parquet:"content"`
}

type splitRow struct {
	Prompt []splitMessage `parquet:"prompt,list"`
	Label  string         `parquet:"label"`
	ID     *string        `parquet:"id,optional"`
	Split  string         `parquet:"split"`
	Note   string         `parquet:"note"`
}

// writeSplitFile writes rows of problems p0..p3: every row twice over (the same cells), p1 once
// more under another id, and, when badCopy, p2 once more with a null id.
func writeSplitFile(t *testing.T, path string, badCopy bool) {
	t.Helper()
	id := func(s string) *string { return &s }
	row := func(i int, ident *string, split string) splitRow {
		return splitRow{Prompt: []splitMessage{{"system", "Be careful."}, {"user", "Compute " + string(rune('a'+i)) + "."}},
			Label: string(rune('0' + i)), ID: ident, Split: split, Note: "note " + string(rune('a'+i))}
	}
	var rows []splitRow
	for i, split := range []string{"train", "test", "train", "test"} {
		r := row(i, id("p"+string(rune('0'+i))), split)
		rows = append(rows, r, r)
	}
	rows = append(rows, row(1, id("other"), "test"))
	if badCopy {
		rows = append(rows, row(2, nil, "train"))
	}
	var b bytes.Buffer
	if err := parquet.Write(&b, rows); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestColumnarMatchesRowWise reads each Parquet file both ways, the reader that decodes rows
// as column values and builds maps only for rows unlike every earlier one, and the one that
// builds every row into maps: the same tasks, problems, fields, repeats and dropped system
// messages, or the same error.
func TestColumnarMatchesRowWise(t *testing.T) {
	dir := t.TempDir()
	var synth bytes.Buffer
	if err := WriteSyntheticDAPO(&synth, 40, 3, 50, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "synth.parquet"), synth.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	writeSplitFile(t, filepath.Join(dir, "split.parquet"), false)
	writeSplitFile(t, filepath.Join(dir, "badcopy.parquet"), true)
	named := Fields{ID: "extra_info.index", Prompt: "prompt.-1.content", Answer: "reward_model.ground_truth"}
	for _, tc := range []struct {
		name, spec string
		o          Options
		repeats    int // the columnar read's, checked too (-1: an error)
	}{
		{name: "verl sample", spec: sampleDir + "/dapo-verl.parquet", repeats: 2},
		{name: "verl sample, named fields and a template", spec: sampleDir + "/dapo-verl.parquet", o: Options{Fields: named, Template: "Q: {problem}"}, repeats: 2},
		{name: "a named id column that is not there", spec: sampleDir + "/dapo-verl.parquet", o: Options{Fields: Fields{ID: "nope"}}, repeats: -1},
		{name: "AIME folder", spec: sampleDir + "/aime2024", repeats: 0},
		{name: "AIME split by file name", spec: sampleDir + "/aime2024:train", repeats: 0},
		{name: "empty", spec: sampleDir + "/bad/empty.parquet", repeats: -1},
		{name: "no answer column", spec: sampleDir + "/bad/no-answer-column.parquet", repeats: -1},
		{name: "not parquet", spec: sampleDir + "/bad/not-parquet.parquet", repeats: -1},
		{name: "synthetic DAPO, 40 problems × 3", spec: filepath.Join(dir, "synth.parquet"), repeats: 80},
		{name: "split column, train", spec: filepath.Join(dir, "split.parquet") + ":train", repeats: 2},
		{name: "split column, test", spec: filepath.Join(dir, "split.parquet") + ":test", repeats: 3},
		{name: "no split", spec: filepath.Join(dir, "split.parquet"), repeats: 5},
		{name: "a copy with a null id, named", spec: filepath.Join(dir, "badcopy.parquet"), o: Options{Fields: Fields{ID: "id"}}, repeats: -1},
		{name: "a copy with a null id, defaults", spec: filepath.Join(dir, "badcopy.parquet"), repeats: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rowWise := tc.o
			rowWise.rowWise = true
			want, wantErr := Read(tc.spec, rowWise)
			got, err := Read(tc.spec, tc.o)
			switch {
			case (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error():
				t.Fatalf("columnar: %v; row-wise: %v", err, wantErr)
			case err != nil:
				if tc.repeats != -1 {
					t.Fatalf("both: %v; want %d repeats", err, tc.repeats)
				}
				return
			case tc.repeats == -1:
				t.Fatalf("both read %d tasks; want an error", len(got.Tasks))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("columnar %+v\nrow-wise %+v", got, want)
			}
			if got.Repeats != tc.repeats {
				t.Errorf("%d repeats; want %d", got.Repeats, tc.repeats)
			}
		})
	}
}

// TestProgress: a read reports once a second of its clock (read every 1024 rows) and once at
// its end, and not at all when it ends within the first second; the lines say rows of total.
func TestProgress(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rows  int64
		step  time.Duration // the clock's advance at each reading
		total int64
		want  []string
	}{
		{name: "long", rows: 7000, step: 400 * time.Millisecond, total: 7000, want: []string{
			"reading f.parquet: 3072 of 7000 rows (43%), 1s", "reading f.parquet: 6144 of 7000 rows (87%), 2s", "read f.parquet: 7000 rows in 2.8s"}},
		{name: "short", rows: 3000, step: 300 * time.Millisecond, total: 3000},
		{name: "lines, total unknown", rows: 2100, step: time.Second, want: []string{
			"reading f.parquet: 1024 rows, 1s", "reading f.parquet: 2048 rows, 2s", "read f.parquet: 2100 rows in 3.0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Unix(0, 0)
			var got []string
			tick := startTicker(func(p Progress) { got = append(got, p.String()) }, "f.parquet", tc.total, func() time.Time {
				now := clock
				clock = clock.Add(tc.step)
				return now
			})
			for n := int64(1); n <= tc.rows; n++ {
				tick.at(n)
			}
			tick.done(tc.rows)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q; want %q", got, tc.want)
			}
		})
	}
}
