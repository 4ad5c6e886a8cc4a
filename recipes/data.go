package recipes

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkSetsNode checks data.eval's YAML: a list of mappings with name, path and size. Each bad
// element is reported as key[i].field and marks key as bad.
func checkSetsNode(v *yaml.Node, key string, l *loader) string {
	if v.Kind != yaml.SequenceNode {
		return describe(v) + "; want " + kEvalSets.want()
	}
	for i, e := range v.Content {
		if e.Kind == yaml.AliasNode && e.Alias != nil {
			e = e.Alias
		}
		at := fmt.Sprintf("%s[%d]", key, i)
		if e.Kind != yaml.MappingNode {
			l.add(at, e.Line, describe(e)+"; want a mapping {name, path, size} such as {name: aime24, path: data/aime24}")
			continue
		}
		for j := 0; j+1 < len(e.Content); j += 2 {
			k, val := e.Content[j], e.Content[j+1]
			msg := ""
			switch k.Value {
			case "name", "path":
				if val.Kind != yaml.ScalarNode || val.ShortTag() == "!!null" {
					msg = describe(val) + "; want a string"
				}
			case "size":
				msg = checkNode(kInt, val, at+".size", l)
			default:
				msg = "unknown field; a set has name, path and size"
			}
			if msg != "" {
				l.add(at+"."+k.Value, k.Line, msg)
			}
		}
	}
	for i := range v.Content {
		for _, f := range []string{"", ".name", ".path", ".size"} {
			if l.bad[fmt.Sprintf("%s[%d]%s", key, i, f)] {
				l.bad[key] = true
			}
		}
	}
	return ""
}

// parseSets reads data.eval from the environment or an override: NAME=PATH or NAME=PATH@SIZE,
// comma-separated.
func parseSets(s string) ([]EvalSet, error) {
	out := []EvalSet{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, path, ok := strings.Cut(part, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("%q is not a list of sets such as aime24=data/aime24,math500=data/math500@100 (NAME=PATH[@SIZE], comma-separated)", s)
		}
		set := EvalSet{Name: name, Path: path}
		if i := strings.LastIndex(path, "@"); i >= 0 {
			n, err := strconv.Atoi(path[i+1:])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%q: the size after @ in %q is not a count", s, part)
			}
			set.Path, set.Size = path[:i], n
		}
		out = append(out, set)
	}
	return out, nil
}

var setName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// data checks the data section: paths that exist, set names, the fields mapping and the
// template, and that it is the only source of tasks.
func (c *checker) data() {
	d := c.r.Data
	c.atLeast("data.train_size", d.TrainSize, 0)
	for k := range d.Fields {
		switch strings.ToLower(k) {
		case "id", "prompt", "answer", "split":
		default:
			c.failf("data.fields", "%q is not a part of a task; name the field of id, prompt, answer or split", k)
		}
	}
	if d.PromptTemplate != "" && !strings.Contains(d.PromptTemplate, "{problem}") {
		c.failf("data.prompt_template", "%q has no {problem}; the template must say where the problem goes", d.PromptTemplate)
	}
	if d.Train == "" {
		if len(d.Eval) > 0 {
			c.fail([]string{"data.eval", "data.train"}, "data.eval is set but data.train is empty; give the training data in data.train (evaluation sets go with it)")
		}
		return
	}
	if c.r.Env.Tasks.Source != "synthetic" {
		c.fail([]string{"data.train", "env.tasks.source"}, fmt.Sprintf("data.train %q and env.tasks.source %s both give the tasks; keep one (data.train reads JSONL too)", d.Train, c.r.Env.Tasks.Source))
	}
	c.dataPath("data.train", d.Train)
	seen := map[string]bool{}
	for i, s := range d.Eval {
		at := fmt.Sprintf("data.eval[%d]", i)
		switch {
		case !setName.MatchString(s.Name):
			c.failf("data.eval", "%s: name %q: want letters, digits, '.', '_' and '-' (such as aime24)", at, s.Name)
		case seen[s.Name]:
			c.failf("data.eval", "%s: name %q is used twice; give each set its own name", at, s.Name)
		}
		seen[s.Name] = true
		if s.Size < 0 {
			c.failf("data.eval", "%s: size %d is out of range; want 0 (all) or more", at, s.Size)
		}
		if s.Path == "" {
			c.failf("data.eval", "%s: path is empty; give the set's file or folder", at)
		} else {
			c.dataPath("data.eval", s.Path)
		}
	}
}

// dataPath reports a data path (":SPLIT" allowed) that does not exist.
func (c *checker) dataPath(key, spec string) {
	if c.noDataFiles {
		return
	}
	path := spec
	if _, err := os.Stat(spec); err != nil {
		if i := strings.LastIndex(spec, ":"); i > 0 && !strings.ContainsAny(spec[i+1:], `/\`) {
			path = spec[:i]
		}
	}
	switch _, err := os.Stat(path); {
	case errors.Is(err, os.ErrNotExist):
		c.failf(key, "%q does not exist (relative paths are relative to the current directory)", path)
	case err != nil:
		c.failf(key, "%q cannot be read: %v", path, err)
	}
}
