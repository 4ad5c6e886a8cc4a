package dataset

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
)

// Records calls fn with each record of path, a .jsonl or .parquet file or a folder of them
// (sorted, hidden folders left out), as JSON, with where it stands ("f.jsonl:3", "f.parquet:
// row 3"): the reading under Read, without the task fields, for files of other records (the
// conversations SFT trains on). A JSON Lines record is its line as written (key order and
// spacing kept: a tool call's arguments render as given); a Parquet row is its columns as JSON.
// Errors name the file and the row.
func Records(path string, fn func(where string, rec json.RawMessage) error) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	files := []string{path}
	if st.IsDir() {
		if files, err = folderFiles(path); err != nil {
			return err
		}
	}
	for _, file := range files {
		err := readRows(file, reading{}, func(r row) error {
			rec := r.raw
			if rec == nil {
				b, err := json.Marshal(r.data)
				if err != nil {
					return fmt.Errorf("%s: %v", r.where(), err)
				}
				rec = b
			}
			return fn(r.where(), rec)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// reading says how readRows reads a file.
type reading struct {
	// fields, when not nil, are the task's fields: a Parquet file is first checked for the
	// columns they name, and a row whose cells in the columns a task may be read from (see
	// keyColumns; split: the split's too) equal an earlier row's comes as a repeat of it
	// (row.same, no data), without being turned into maps.
	fields *Fields
	split  bool
	// progress, when not nil, hears how far a long read has come (see Options.Progress).
	progress func(Progress)
	// rowWise reads a Parquet file one row at a time into maps, every column and every row (the
	// reader before columnar reads; tests compare the two).
	rowWise bool
}

// readRows calls fn with each row of file, by its extension: .parquet, else JSON Lines.
func readRows(file string, rd reading, fn func(row) error) error {
	if strings.HasSuffix(strings.ToLower(file), ".parquet") {
		return readParquet(file, rd, fn)
	}
	return readJSONL(file, rd.progress, fn)
}

// ticker calls a progress function about once a second while a file is read, and once more at
// its end when it did before.
type ticker struct {
	fn          func(Progress)
	file        string
	total       int64
	now         func() time.Time // the clock (time.Now; tests set their own)
	start, last time.Time
	said        bool
}

func newTicker(fn func(Progress), file string, total int64) *ticker {
	return startTicker(fn, file, total, time.Now)
}

func startTicker(fn func(Progress), file string, total int64, now func() time.Time) *ticker {
	t := now()
	return &ticker{fn: fn, file: file, total: total, now: now, start: t, last: t}
}

// at notes that rows rows have been read; the clock is read every 1024 rows.
func (t *ticker) at(rows int64) {
	if t.fn == nil || rows%1024 != 0 {
		return
	}
	if now := t.now(); now.Sub(t.last) >= time.Second {
		t.last, t.said = now, true
		t.fn(Progress{File: t.file, Rows: rows, Total: t.total, Elapsed: now.Sub(t.start)})
	}
}

// done notes the end of the file.
func (t *ticker) done(rows int64) {
	if t.fn != nil && t.said {
		t.fn(Progress{File: t.file, Rows: rows, Total: t.total, Elapsed: t.now().Sub(t.start), Done: true})
	}
}

// readJSONL reads one JSON object a line; blank lines are skipped. Numbers keep their text.
func readJSONL(file string, progress func(Progress), fn func(row) error) error {
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	rows := 0
	tick := newTicker(progress, file, 0)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil || obj == nil {
			if err == nil {
				err = fmt.Errorf("null")
			}
			return fmt.Errorf("%s:%d: not a JSON object (%v); a JSON Lines file holds one object a line", file, line, err)
		}
		rows++
		if err := fn(row{file: file, n: line, lines: true, data: obj, raw: bytes.Clone(b)}); err != nil {
			return err
		}
		tick.at(int64(rows))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if rows == 0 {
		return fmt.Errorf("%s: an empty file: no JSON object in it", file)
	}
	tick.done(int64(rows))
	return nil
}

// readParquet reads the rows of a Parquet file as nested maps and lists, after checking that
// the columns rd.fields names are there. The rows are decoded a batch at a time as flat lists of
// column values (parquet.Row, what the reader assembles from the column chunks); with
// rd.fields, a row whose values in the key columns equal an earlier row's is passed on as a
// repeat of it (verl's DAPO-Math-17k holds each row about a hundred times over), and only the
// others are built into maps, as Reader.Read would build them.
func readParquet(file string, rd reading, fn func(row) error) (err error) {
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(fh, st.Size())
	if err != nil {
		return fmt.Errorf("%s: not a readable Parquet file: %v (is it whole? a file fetched with git-lfs or a partial download is not)", file, err)
	}
	if rd.fields != nil {
		if err := checkColumns(file, pf.Schema(), *rd.fields); err != nil {
			return err
		}
	}
	if pf.NumRows() == 0 {
		return fmt.Errorf("%s: an empty file: the Parquet file has no rows", file)
	}
	defer func() { // a malformed file can make the reader panic: report it as unreadable
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: not a readable Parquet file: %v", file, p)
		}
	}()
	r := parquet.NewReader(pf)
	defer r.Close()
	total := pf.NumRows()
	tick := newTicker(rd.progress, file, total)
	if rd.rowWise {
		for n := 1; int64(n) <= total; n++ {
			m := map[string]any{}
			if err := r.Read(&m); err != nil {
				return fmt.Errorf("%s: row %d: not readable: %v", file, n, err)
			}
			if err := fn(row{file: file, n: n, data: plain(m).(map[string]any)}); err != nil {
				return err
			}
			tick.at(int64(n))
		}
		tick.done(total)
		return nil
	}
	var keyed []bool
	// The key columns' values of each row, hashed (128 bits, two random seeds: a false match
	// among a few million rows is some 10⁻²⁶ likely, and none can be crafted without the seeds)
	// → the first row that had them.
	seen := map[[2]uint64]int{}
	seeds := [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
	if rd.fields != nil {
		keyed = keyColumns(pf.Schema(), *rd.fields, rd.split)
	}
	schema := pf.Schema()
	rows := make([]parquet.Row, 256)
	var key []byte
	for n := 1; int64(n) <= total; {
		k, err := r.ReadRows(rows)
		if k == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%s: row %d: not readable: %v", file, n, err)
		}
		for _, values := range rows[:k] {
			if keyed != nil {
				key = rowKey(key[:0], values, keyed)
				h := [2]uint64{maphash.Bytes(seeds[0], key), maphash.Bytes(seeds[1], key)}
				if first, ok := seen[h]; ok {
					if err := fn(row{file: file, n: n, same: first}); err != nil {
						return err
					}
					tick.at(int64(n))
					n++
					continue
				}
				seen[h] = n
			}
			m := map[string]any{}
			if err := schema.Reconstruct(&m, values); err != nil {
				return fmt.Errorf("%s: row %d: not readable: %v", file, n, err)
			}
			if err := fn(row{file: file, n: n, data: plain(m).(map[string]any)}); err != nil {
				return err
			}
			tick.at(int64(n))
			n++
		}
	}
	tick.done(total)
	return nil
}

// keyColumns marks the leaf columns (in the schema's order) under the top-level fields a task's
// parts may be read from: for each part, its named path or else every default (the split's
// only when split), a field matching the path or its first name but for case, as lookup finds
// it. Two rows equal in these columns read to the same task; more columns than needed only
// find fewer repeats.
func keyColumns(s *parquet.Schema, f Fields, split bool) []bool {
	var paths []string
	for _, p := range []struct {
		named    string
		defaults []string
		use      bool
	}{{f.Prompt, defaultPrompt, true}, {f.Answer, defaultAnswer, true}, {f.ID, defaultID, true}, {f.Split, defaultSplit, split}} {
		switch {
		case !p.use:
		case p.named != "":
			paths = append(paths, p.named)
		default:
			paths = append(paths, p.defaults...)
		}
	}
	cols := s.Columns()
	keyed := make([]bool, len(cols))
	for i, c := range cols {
		for _, p := range paths {
			head, _, _ := strings.Cut(p, ".")
			if strings.EqualFold(c[0], p) || strings.EqualFold(c[0], head) {
				keyed[i] = true
			}
		}
	}
	return keyed
}

// rowKey appends to key the values of a row in the keyed columns: each value's column, levels,
// kind, null-ness and bytes, so that two rows have the same key only when they hold the same
// values there.
func rowKey(key []byte, values parquet.Row, keyed []bool) []byte {
	for _, v := range values {
		c := v.Column()
		if c < 0 || c >= len(keyed) || !keyed[c] {
			continue
		}
		key = binary.AppendUvarint(key, uint64(c))
		key = binary.AppendUvarint(key, uint64(v.RepetitionLevel()))
		key = binary.AppendUvarint(key, uint64(v.DefinitionLevel()))
		null := byte(0)
		if v.IsNull() {
			null = 1
		}
		key = append(key, byte(v.Kind()), null)
		b := v.Bytes()
		key = binary.AppendUvarint(key, uint64(len(b)))
		key = append(key, b...)
	}
	return key
}

// plain turns what the Parquet reader gives into JSON's kinds: binary columns become text.
func plain(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case map[string]any:
		for k, e := range x {
			x[k] = plain(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = plain(e)
		}
		return x
	}
	return v
}

// checkColumns reports a named field, or all of a part's defaults, missing from the schema's
// top-level columns.
func checkColumns(file string, s *parquet.Schema, f Fields) error {
	var cols []string
	for _, c := range s.Fields() {
		cols = append(cols, c.Name())
	}
	has := func(path string) bool {
		for _, c := range cols {
			if strings.EqualFold(c, path) {
				return true
			}
		}
		head, _, _ := strings.Cut(path, ".")
		for _, c := range cols {
			if strings.EqualFold(c, head) {
				return true
			}
		}
		return false
	}
	for _, p := range []struct {
		part, named string
		defaults    []string
	}{{"prompt", f.Prompt, defaultPrompt}, {"answer", f.Answer, defaultAnswer}} {
		if p.named != "" {
			if !has(p.named) {
				return fmt.Errorf("%s: no column %q for the %s (data.fields.%s names it; the columns are %s)", file, p.named, p.part, p.part, strings.Join(cols, ", "))
			}
			continue
		}
		found := false
		for _, d := range p.defaults {
			found = found || has(d)
		}
		if !found {
			return fmt.Errorf("%s: no %s column: none of %s (the columns are %s); name it in data.fields.%s", file, p.part, strings.Join(p.defaults, ", "), strings.Join(cols, ", "), p.part)
		}
	}
	if f.ID != "" && !has(f.ID) {
		return fmt.Errorf("%s: no column %q for the id (data.fields.id names it; the columns are %s)", file, f.ID, strings.Join(cols, ", "))
	}
	return nil
}
