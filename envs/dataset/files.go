package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

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
		err := readRows(file, nil, func(r row) error {
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

// readRows calls fn with each row of file, by its extension: .parquet, else JSON Lines. A
// Parquet file is first checked for the columns f names (nil: no check).
func readRows(file string, f *Fields, fn func(row) error) error {
	if strings.HasSuffix(strings.ToLower(file), ".parquet") {
		return readParquet(file, f, fn)
	}
	return readJSONL(file, fn)
}

// readJSONL reads one JSON object a line; blank lines are skipped. Numbers keep their text.
func readJSONL(file string, fn func(row) error) error {
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	rows := 0
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
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if rows == 0 {
		return fmt.Errorf("%s: an empty file: no JSON object in it", file)
	}
	return nil
}

// readParquet reads every row of a Parquet file as nested maps and lists, after checking that
// the columns f names are there (f nil: no check).
func readParquet(file string, f *Fields, fn func(row) error) (err error) {
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
	if f != nil {
		if err := checkColumns(file, pf.Schema(), *f); err != nil {
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
	for n := 1; int64(n) <= pf.NumRows(); n++ {
		m := map[string]any{}
		if err := r.Read(&m); err != nil {
			return fmt.Errorf("%s: row %d: not readable: %v", file, n, err)
		}
		if err := fn(row{file: file, n: n, data: plain(m).(map[string]any)}); err != nil {
			return err
		}
	}
	return nil
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
