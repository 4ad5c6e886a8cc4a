// Package dataset reads task sets from the files RL math datasets ship as: JSON Lines (one
// object a line; the prompt as text or as chat messages), Parquet (verl's layout: prompt a list
// of {role, content}, reward_model.ground_truth, extra_info.index) and HuggingFace dataset
// folders (data/train-00000-of-00001.parquet, test.jsonl, …, a split chosen by name).
//
// With no mapping the common layouts read as they are. The problem is the first present of
// problem, question and prompt; the answer of answer, label, reward_model.ground_truth,
// ground_truth and final_answer; the id of id and extra_info.index, else the row's number.
// Names match case-insensitively (ID, Problem, Answer read too) and a dotted path reaches into
// nested objects and Parquet groups. A prompt given as chat messages reads as its last user
// message's content: a system message is left out (counted in Set.SystemDropped), since the
// environment opens every trajectory with its own system turn, the tool instructions. Numeric
// answers and ids are written exactly as stored (int64 42 → "42", 0.5 → "0.5").
//
// Every error names the file, the row (a JSONL line number, a Parquet row counted from 1) and
// the field, and says what would fix it.
package dataset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"agentrl/envs"
)

// Fields are dotted paths to a task's parts in a row ("reward_model.ground_truth",
// "prompt.-1.content"); an empty path takes the defaults. Split names the field that says a
// row's split, for files that hold several splits.
type Fields struct {
	ID, Prompt, Answer, Split string
}

// The default paths of each part, tried in order.
var (
	defaultPrompt = []string{"problem", "question", "prompt"}
	defaultAnswer = []string{"answer", "label", "reward_model.ground_truth", "ground_truth", "final_answer"}
	defaultID     = []string{"id", "extra_info.index"}
	defaultSplit  = []string{"split", "extra_info.split"}
)

// FieldNames are the keys data.fields accepts.
var FieldNames = []string{"id", "prompt", "answer", "split"}

// FieldsFrom reads a name → path mapping (the recipe's data.fields): keys id, prompt, answer and
// split.
func FieldsFrom(m map[string]string) (Fields, error) {
	var f Fields
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch strings.ToLower(k) {
		case "id":
			f.ID = m[k]
		case "prompt", "problem":
			f.Prompt = m[k]
		case "answer":
			f.Answer = m[k]
		case "split":
			f.Split = m[k]
		default:
			return f, fmt.Errorf("data.fields: %q is not a part of a task; name the field of id, prompt, answer or split", k)
		}
	}
	return f, nil
}

// Options shape how rows become tasks.
type Options struct {
	Fields Fields
	// Template turns a row's problem into the user turn: every {problem} in it is replaced by
	// the problem text. Empty uses the problem as it is.
	Template string
	// Progress, when not nil, is called about once a second while a file is read (verl's
	// DAPO-Math-17k is 1.79M rows), and once more when a file it was called for is done.
	Progress func(Progress)
	// rowWise reads Parquet files one whole row at a time (tests compare the two readers).
	rowWise bool
}

// Progress is how far the read of one file has come.
type Progress struct {
	File string
	// Rows are the rows (JSON Lines: objects) read so far, of Total (0 when not known ahead: a
	// JSON Lines file).
	Rows, Total int64
	Elapsed     time.Duration
	// Done says the file has been read.
	Done bool
}

// String is the line a command prints for p: "reading F: 524288 of 1791700 rows (29%), 3s".
func (p Progress) String() string {
	secs := p.Elapsed.Round(100 * time.Millisecond).Seconds()
	switch {
	case p.Done:
		return fmt.Sprintf("read %s: %d rows in %.1fs", p.File, p.Rows, secs)
	case p.Total > 0:
		return fmt.Sprintf("reading %s: %d of %d rows (%d%%), %.0fs", p.File, p.Rows, p.Total, p.Rows*100/p.Total, secs)
	}
	return fmt.Sprintf("reading %s: %d rows, %.0fs", p.File, p.Rows, secs)
}

// Placeholder is where a prompt template puts the problem.
const Placeholder = "{problem}"

// Set is what one path read to.
type Set struct {
	// Path is the path as given, Split the split chosen ("" when the whole path was read).
	Path, Split string
	// Files are the files read, in order.
	Files []string
	// Tasks are the rows as tasks, in file order: the prompt after the template, the answer as
	// text. Problems are the rows' problems before the template, for finding overlaps.
	Tasks    []envs.Task
	Problems []string
	// Used are the fields the first row's parts came from ("" for an id numbered by row).
	Used Fields
	// Repeats counts rows left out as repeats of an earlier row: the same prompt and answer,
	// whatever their ids (DAPO-Math-17k's parquet holds each of its 17,917 problems about a
	// hundred times). An id used again for another problem or answer is an error.
	Repeats int
	// SystemDropped counts rows whose chat prompt had a system message, left out.
	SystemDropped int
	// Chat says the first row's prompt was chat messages (its last user message was read).
	Chat bool
}

// splitNames are the words a file's name says its split with.
var splitNames = []string{"train", "test", "validation", "valid", "val", "dev", "eval"}

// Read reads the tasks at spec: a JSONL or Parquet file, or a folder of them (a HuggingFace
// dataset folder), optionally followed by ":SPLIT" to take one split. A folder's files are those
// under it ending in .parquet or .jsonl (hidden folders skipped); a file's split is the split
// word in its path (data/train-00000-of-00001.parquet is train). Without ":SPLIT", a folder
// whose files hold more than one split is an error naming them. With it, the files of that
// split are read, or, when no file's name has a split, the rows whose split field (fields.split,
// else split or extra_info.split) says it.
func Read(spec string, o Options) (*Set, error) {
	path, split := SplitSpec(spec)
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file or folder (relative paths are relative to the current directory)", path)
		}
		return nil, err
	}
	set := &Set{Path: spec, Split: split}
	files := []string{path}
	if st.IsDir() {
		if files, err = folderFiles(path); err != nil {
			return nil, err
		}
	}
	filterRows := false
	if split != "" || st.IsDir() {
		byName := map[string][]string{}
		var named []string
		for _, f := range files {
			if s := fileSplit(path, f); s != "" {
				if _, ok := byName[s]; !ok {
					named = append(named, s)
				}
				byName[s] = append(byName[s], f)
			}
		}
		switch {
		case split != "" && len(named) > 0:
			if files = byName[strings.ToLower(split)]; len(files) == 0 {
				return nil, fmt.Errorf("%s: no file of split %q; its files hold the splits %s (choose one with %s:SPLIT)", path, split, strings.Join(named, ", "), path)
			}
		case split != "":
			filterRows = true
		case len(named) > 1:
			return nil, fmt.Errorf("%s holds the splits %s; choose one with %s:%s", path, strings.Join(named, ", "), path, named[0])
		}
	}
	set.Files = files
	seen := map[string]string{} // id → "file row" of its first row
	same := map[string]bool{}   // prompt and answer of the rows kept
	multi := len(files) > 1
	for _, file := range files {
		// counted[n] is row n's outcome, for its repeats: 1 it made a task or repeated one, 2
		// its chat prompt's system message was left out too (0: filtered out by its split).
		var counted []uint8
		rd := reading{fields: &o.Fields, split: filterRows, progress: o.Progress, rowWise: o.rowWise}
		err := readRows(file, rd, func(r row) error {
			if r.same > 0 {
				switch counted[r.same] {
				case 2:
					set.SystemDropped++
					fallthrough
				case 1:
					set.Repeats++
				}
				return nil
			}
			for len(counted) <= r.n {
				counted = append(counted, 0)
			}
			if filterRows {
				s, ok, err := r.pick(o.Fields.Split, defaultSplit, "split")
				if err != nil {
					return err
				}
				if !ok {
					return r.errf(o.Fields.Split, defaultSplit, "has no split field to choose split %q by; name it in data.fields.split, or read the file without :%s", split, split)
				}
				if text, err := scalarText(s.raw, false); err != nil {
					return fmt.Errorf("%s: field %s: %v; name the split's field in data.fields.split", r.where(), s.from, err)
				} else if !strings.EqualFold(text, split) {
					return nil
				}
			}
			t, used, err := r.task(o, multi)
			if err != nil {
				return err
			}
			if len(set.Tasks) == 0 {
				set.Used, set.Chat = used.Fields, used.chat
			}
			counted[r.n] = 1
			if used.system {
				set.SystemDropped++
				counted[r.n] = 2
			}
			if same[t.Prompt+"\x00"+t.Answer] {
				set.Repeats++
				return nil
			}
			if first, dup := seen[t.ID]; dup {
				return fmt.Errorf("%s: task id %q repeats %s with another problem or answer; give each task its own id (data.fields.id)", r.where(), t.ID, first)
			}
			seen[t.ID], same[t.Prompt+"\x00"+t.Answer] = r.where(), true
			set.Tasks = append(set.Tasks, t)
			set.Problems = append(set.Problems, used.problem)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(set.Tasks) == 0 {
		if filterRows {
			return nil, fmt.Errorf("%s: no row of split %q", path, split)
		}
		return nil, fmt.Errorf("%s: no tasks", path)
	}
	return set, nil
}

// SplitSpec separates "PATH:SPLIT" into its path and split. A path that exists as given, colon
// and all, is a path.
func SplitSpec(spec string) (path, split string) {
	if _, err := os.Stat(spec); err == nil {
		return spec, ""
	}
	if i := strings.LastIndex(spec, ":"); i > 0 && !strings.ContainsAny(spec[i+1:], `/\`) {
		return spec[:i], spec[i+1:]
	}
	return spec, ""
}

// folderFiles lists the .parquet and .jsonl files under dir, sorted, hidden folders left out.
func folderFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".parquet") || strings.HasSuffix(p, ".jsonl")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: a folder with no .parquet or .jsonl file (a HuggingFace dataset folder keeps them in data/)", dir)
	}
	slices.Sort(files)
	return files, nil
}

// fileSplit is the split word in file's path below root ("" when none): the first word of the
// path, split at / . _ and -, that is a split name.
func fileSplit(root, file string) string {
	rel, err := filepath.Rel(root, file)
	if err != nil || rel == "." {
		rel = filepath.Base(file)
	}
	words := strings.FieldsFunc(strings.ToLower(rel), func(r rune) bool { return strings.ContainsRune(`/\._-`, r) })
	for _, w := range words {
		if slices.Contains(splitNames, w) {
			return w
		}
	}
	return ""
}
