package export

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"agentrl/store"
)

// MetricsSchema names the metrics table's layout in its Parquet file's metadata (key
// SchemaKey): docs/export.md describes it.
const MetricsSchema = "agentrl.metrics/1"

// SchemaKey is the Parquet key-value metadata key that names a table's schema.
const SchemaKey = "agentrl.schema"

// MetricsTable is a stored run's metrics, one row per step: the step, then each step metric by
// its name, each phase's seconds (time_PHASE_s), and each evaluation's pass@k over all its sets
// (pass_at_K), per set (set_NAME_pass_at_K), per task level (level_L_pass_at_K) and on the
// validation tasks (validation_pass_at_K). A step without a value has an empty cell.
type MetricsTable struct {
	Columns []string // "step" first
	Rows    []MetricsRow
}

// MetricsRow is one step's values by column; a column it lacks is empty.
type MetricsRow struct {
	Step   int
	Values map[string]float64
}

// Metrics reads a stored run's metrics table: every step with metrics, phase times or an
// evaluation, in step order.
func Metrics(st *store.Store, runID string) (MetricsTable, error) {
	if _, err := st.GetRun(runID); err != nil {
		return MetricsTable{}, err
	}
	metrics, err := st.Metrics(runID)
	if err != nil {
		return MetricsTable{}, err
	}
	phases, err := st.Phases(runID)
	if err != nil {
		return MetricsTable{}, err
	}
	evals, err := st.Evals(runID)
	if err != nil {
		return MetricsTable{}, err
	}
	rows := map[int]map[string]float64{}
	row := func(step int) map[string]float64 {
		if rows[step] == nil {
			rows[step] = map[string]float64{}
		}
		return rows[step]
	}
	var metricCols, evalCols []string
	seen := map[string]bool{}
	set := func(cols *[]string, step int, name string, v float64) {
		if !seen[name] {
			seen[name] = true
			*cols = append(*cols, name)
		}
		row(step)[name] = v
	}
	for step, m := range metrics {
		for name, v := range m {
			set(&metricCols, step, column(name), v)
		}
	}
	phaseNames := map[string]float64{}
	for step, p := range phases {
		for name, v := range p {
			phaseNames[name] = 0
			row(step)["time_"+column(name)+"_s"] = v
		}
	}
	for _, e := range evals {
		for _, v := range evalColumns(e) {
			set(&evalCols, e.Step, v.name, v.value)
		}
	}
	sort.Strings(metricCols)
	// Phases in the order a step runs them; evaluations' columns over all sets, then per set,
	// per level, validation, each by k.
	var phaseCols []string
	for _, name := range phaseOrder(phaseNames) {
		phaseCols = append(phaseCols, "time_"+column(name)+"_s")
	}
	sort.SliceStable(evalCols, func(i, j int) bool { return evalKey(evalCols[i]) < evalKey(evalCols[j]) })
	t := MetricsTable{Columns: append(append(append([]string{"step"}, metricCols...), phaseCols...), evalCols...)}
	if dup := duplicate(t.Columns); dup != "" {
		return t, fmt.Errorf("run %s: two of its values make the column %q; rename one of them", runID, dup)
	}
	steps := make([]int, 0, len(rows))
	for s := range rows {
		steps = append(steps, s)
	}
	sort.Ints(steps)
	for _, s := range steps {
		t.Rows = append(t.Rows, MetricsRow{Step: s, Values: rows[s]})
	}
	return t, nil
}

type namedValue struct {
	name  string
	value float64
}

// evalColumns are an evaluation's pass@k columns.
func evalColumns(e store.Eval) []namedValue {
	var out []namedValue
	add := func(prefix string, p map[int]float64) {
		for _, k := range sortedKs(p) {
			out = append(out, namedValue{fmt.Sprintf("%spass_at_%d", prefix, k), p[k]})
		}
	}
	add("", e.PassAtK)
	for name, p := range e.BySet {
		add("set_"+column(name)+"_", p)
	}
	for l, p := range e.ByLevel {
		add("level_"+column(l)+"_", p)
	}
	add("validation_", e.Validation)
	return out
}

// evalKey orders the evaluation columns: over all sets first, then sets, levels, validation; by
// name within each, k numerically.
func evalKey(col string) string {
	group := "0"
	switch {
	case strings.HasPrefix(col, "set_"):
		group = "1"
	case strings.HasPrefix(col, "level_"):
		group = "2"
	case strings.HasPrefix(col, "validation_"):
		group = "3"
	}
	i := strings.LastIndex(col, "pass_at_")
	k, _ := strconv.Atoi(col[i+len("pass_at_"):])
	l, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(col[:i], "level_"), "_"))
	return fmt.Sprintf("%s %08d %s %08d", group, l, col[:i], k)
}

// column is name as a column name: letters, digits and underscores (anything else an underscore).
func column(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

func duplicate(cols []string) string {
	seen := map[string]bool{}
	for _, c := range cols {
		if seen[c] {
			return c
		}
		seen[c] = true
	}
	return ""
}

// WriteCSV writes the table as CSV: a header row of the column names, then one row per step,
// numbers in the shortest form that reads back to the same float64, an empty cell where a step
// has no value.
func (t MetricsTable) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.Columns); err != nil {
		return err
	}
	rec := make([]string, len(t.Columns))
	for _, r := range t.Rows {
		rec[0] = strconv.Itoa(r.Step)
		for i, c := range t.Columns[1:] {
			rec[i+1] = ""
			if v, ok := r.Values[c]; ok {
				rec[i+1] = formatFloat(v)
			}
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func formatFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// WriteParquet writes the table as Parquet: step an int64 column, every other column an
// optional double (null where a step has no value), in the table's column order.
func (t MetricsTable) WriteParquet(w io.Writer) error {
	// A struct type made for the table's columns gives the schema its column order.
	fields := []reflect.StructField{{Name: "Step", Type: reflect.TypeFor[int64](), Tag: `parquet:"step"`}}
	for i, c := range t.Columns[1:] {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("C%d", i), Type: reflect.TypeFor[*float64](),
			Tag: reflect.StructTag(fmt.Sprintf(`parquet:"%s,optional"`, c))})
	}
	typ := reflect.StructOf(fields)
	pw := parquet.NewWriter(w, parquet.SchemaOf(reflect.New(typ).Interface()), parquet.Compression(&parquet.Zstd),
		parquet.KeyValueMetadata(SchemaKey, MetricsSchema))
	for _, r := range t.Rows {
		row := reflect.New(typ).Elem()
		row.Field(0).SetInt(int64(r.Step))
		for i, c := range t.Columns[1:] {
			if v, ok := r.Values[c]; ok {
				row.Field(i + 1).Set(reflect.ValueOf(&v))
			}
		}
		if err := pw.Write(row.Interface()); err != nil {
			return err
		}
	}
	return pw.Close()
}
