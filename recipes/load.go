package recipes

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// Options adjust how a recipe is loaded.
type Options struct {
	// Overrides set dotted keys after the file and the environment, typically from command-line
	// flags: {"run.max_steps": "5", "model.path": "/models/qwen3-0.6b"}. Values are written as in
	// an environment variable ("auto", "1e-5", "true", "5s", lists comma-separated: "1,2,4,8").
	Overrides map[string]string
	// IgnoreEnv disables the AGENTRL_* environment overrides.
	IgnoreEnv bool
	// NoDataFiles skips checking that data.train and data.eval's files exist: for commands that
	// read no task (plan, doctor's fit check), so that a recipe can be planned before its datasets
	// are downloaded. A run reads them and names a missing one then.
	NoDataFiles bool
}

// Load reads, merges and validates the recipe at path. Precedence, lowest first: defaults
// (Default), the file, AGENTRL_* environment variables (AGENTRL_TRAIN_LR=1e-5 sets train.lr),
// then opts.Overrides. Every problem found is reported in one *Error; an empty path loads the
// defaults alone.
func Load(path string, opts Options) (*Recipe, error) {
	if path == "" {
		return Parse("recipe", nil, opts)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("recipe %s not found: give the path of a recipe YAML file such as recipes/retool.yaml", path)
		}
		return nil, fmt.Errorf("reading recipe: %w", err)
	}
	return Parse(path, data, opts)
}

// Parse is Load for YAML already in memory; name is used in error messages in place of a path.
func Parse(name string, data []byte, opts Options) (*Recipe, error) {
	l := &loader{
		sch:  newSchema(),
		loc:  locator{file: name, lines: map[string]int{}, sources: map[string]string{}},
		bad:  map[string]bool{},
		maps: map[string]map[string]string{},
	}
	config, err := l.readYAML(data)
	if err != nil {
		return nil, err
	}
	var badEnv []string
	if !opts.IgnoreEnv {
		badEnv = l.checkEnv(os.Environ())
	}
	overrides := l.checkOverrides(opts.Overrides)

	v := viper.New()
	for _, f := range l.sch.leaves {
		if f.kind != kStringMap { // viper lower-cases map keys: l.maps holds them instead
			v.SetDefault(f.key, f.value(Default()).Interface())
		}
	}
	if err := v.MergeConfigMap(config); err != nil {
		return nil, fmt.Errorf("%s: merging recipe: %w", name, err)
	}
	if !opts.IgnoreEnv {
		// A malformed environment value was reported; keep the file's or the default value so
		// that the rest of the recipe can still be decoded and checked.
		keep := map[string]any{}
		for _, key := range badEnv {
			keep[key] = v.Get(key)
		}
		v.SetEnvPrefix(envPrefix)
		v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
		v.AutomaticEnv()
		for key, val := range keep {
			v.Set(key, val)
		}
	}
	for key, val := range overrides {
		v.Set(key, val)
	}
	r := &Recipe{}
	if err := v.Unmarshal(r, viper.DecodeHook(decodeHook)); err != nil {
		return nil, fmt.Errorf("%s: decoding recipe: %w", name, err)
	}
	for _, f := range l.sch.leaves {
		if f.kind == kStringMap {
			m, ok := l.maps[f.key]
			if !ok {
				m = f.value(Default()).Interface().(map[string]string)
			}
			f.value(r).Set(reflect.ValueOf(m))
		}
	}
	for _, p := range append(r.Env.ResolveFiles(filepath.Dir(name)), r.PRM.ResolveFiles(filepath.Dir(name))...) {
		line, _ := l.loc.at(p.Field)
		l.add(p.Field, line, strings.TrimPrefix(p.Message, p.Field+" "))
	}
	l.problems = append(l.problems, validateWith(r, &l.loc, l.bad, opts.NoDataFiles)...)
	if len(l.problems) > 0 {
		sortProblems(l.problems)
		return nil, &Error{Problems: l.problems}
	}
	return r, nil
}

// loader carries the state of one Parse.
type loader struct {
	sch      *schema
	loc      locator
	bad      map[string]bool // keys already reported: no further checks on them
	problems []Problem
	// maps holds the mapping fields (kStringMap) from the file, the environment and overrides,
	// the later winning; they bypass viper, which would lower-case their names.
	maps map[string]map[string]string
}

func (l *loader) add(key string, line int, msg string) {
	l.bad[key] = true
	l.problems = append(l.problems, Problem{File: l.loc.file, Line: line, Field: key, Source: l.loc.sources[key], Message: msg})
}

// readYAML parses the file into nodes, records the line of every key, reports unknown keys and
// wrongly typed values, and returns the well-formed remainder as a map for viper.
func (l *loader) readYAML(data []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: invalid YAML: %w", l.loc.file, err)
	}
	if len(doc.Content) == 0 {
		return map[string]any{}, nil
	}
	root := doc.Content[0]
	if root.ShortTag() == "!!null" {
		return map[string]any{}, nil
	}
	if root.Kind != yaml.MappingNode {
		l.problems = append(l.problems, Problem{File: l.loc.file, Line: root.Line,
			Message: "a recipe is a mapping of sections (" + strings.Join(l.sch.sections[""], ", ") + ")"})
		return map[string]any{}, nil
	}
	l.walk(root, "")
	config := map[string]any{}
	if err := root.Decode(&config); err != nil {
		return nil, fmt.Errorf("%s: invalid YAML: %w", l.loc.file, err)
	}
	return config, nil
}

// walk checks one mapping node in place, dropping the entries it reported.
func (l *loader) walk(node *yaml.Node, section string) {
	seen := map[string]int{}
	kept := node.Content[:0]
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		key := join(section, k.Value)
		if k.Kind != yaml.ScalarNode {
			l.add(section, k.Line, "keys must be plain names")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			l.add(key, k.Line, fmt.Sprintf("defined twice (lines %d and %d); keep one", first, k.Line))
			continue
		}
		seen[k.Value] = k.Line
		switch f, leaf := l.sch.byKey[key]; {
		case l.sch.isSection(key):
			l.loc.lines[key] = k.Line
			switch {
			case v.Kind == yaml.MappingNode:
				l.walk(v, key)
				kept = append(kept, k, v)
			case v.ShortTag() == "!!null": // an empty section: all defaults
			default:
				l.add(key, k.Line, describe(v)+"; want a mapping of "+key+" settings ("+strings.Join(l.sch.sections[key], ", ")+")")
			}
		case leaf:
			l.loc.lines[key] = k.Line
			if msg := checkNode(f.kind, v, key, l); msg != "" {
				l.add(key, k.Line, msg)
				continue
			}
			if f.kind == kStringMap {
				if !l.bad[key] {
					l.maps[key] = mapOf(v)
				}
				continue
			}
			if !l.bad[key] { // a list whose elements were reported is dropped too
				kept = append(kept, k, v)
			}
		default:
			l.add(key, k.Line, "unknown field"+l.sch.suggest(section, k.Value))
		}
	}
	node.Content = kept
}

// checkNode returns "" when the YAML value v suits a field of kind k, or what is wrong. List
// elements are reported directly (as key[i]) and mark key as bad.
func checkNode(k kind, v *yaml.Node, key string, l *loader) string {
	tag := v.ShortTag()
	if tag == "!!null" && k != kString {
		return "has no value; want " + k.want() + " (or delete the line to use the default)"
	}
	switch k {
	case kString:
		if v.Kind != yaml.ScalarNode {
			return describe(v) + "; want " + k.want()
		}
	case kInt:
		var n int64
		switch {
		case tag == "!!int" && v.Decode(&n) == nil:
		case tag == "!!float":
			return v.Value + " is not an integer"
		default:
			return describe(v) + "; want " + k.want()
		}
	case kFloat:
		var x float64
		if (tag != "!!int" && tag != "!!float") || v.Decode(&x) != nil {
			return describe(v) + "; want " + k.want()
		}
	case kBool:
		if tag != "!!bool" {
			return describe(v) + "; want " + k.want()
		}
	case kDuration:
		if tag != "!!str" {
			return describe(v) + "; want " + k.want()
		}
		if _, err := time.ParseDuration(v.Value); err != nil {
			return strconv.Quote(v.Value) + " is not a duration; want one such as 500ms, 5s or 2m"
		}
	case kAuto:
		var n int64
		switch {
		case tag == "!!str" && v.Value == "auto":
		case tag == "!!int" && v.Decode(&n) == nil:
			if n < 1 {
				return v.Value + " is out of range; want auto or at least 1"
			}
		default:
			return describe(v) + "; want " + k.want()
		}
	case kStringMap:
		return checkMapNode(v, key, l)
	case kEvalSets:
		return checkSetsNode(v, key, l)
	case kInts, kStrings:
		if v.Kind != yaml.SequenceNode {
			return describe(v) + "; want " + k.want()
		}
		elem := kInt
		if k == kStrings {
			elem = kString
		}
		failed := false
		for i, e := range v.Content {
			if e.Kind == yaml.AliasNode && e.Alias != nil {
				e = e.Alias
			}
			msg := checkNode(elem, e, key, l)
			if msg == "" && elem == kString && e.ShortTag() == "!!null" {
				msg = "has no value; want a string"
			}
			if msg != "" {
				l.add(fmt.Sprintf("%s[%d]", key, i), e.Line, msg)
				failed = true
			}
		}
		if failed {
			l.bad[key] = true
			return ""
		}
	}
	return ""
}

// describe says what a YAML value is, for "X; want Y" messages.
func describe(v *yaml.Node) string {
	switch v.Kind {
	case yaml.SequenceNode:
		return "is a list"
	case yaml.MappingNode:
		return "is a mapping"
	}
	switch v.ShortTag() {
	case "!!null":
		return "has no value"
	case "!!str":
		return strconv.Quote(v.Value) + " is a string"
	case "!!bool":
		return v.Value + " is a boolean"
	case "!!int", "!!float":
		return v.Value + " is a number"
	default:
		return strconv.Quote(v.Value) + " is a " + strings.TrimPrefix(v.ShortTag(), "!!")
	}
}

// checkEnv reports malformed AGENTRL_* values and unknown variables that look like recipe keys
// (AGENTRL_<SECTION>_…: that namespace belongs to the recipe). Empty variables are ignored, as
// viper does. It returns the keys whose environment value was malformed.
func (l *loader) checkEnv(environ []string) []string {
	known := map[string]string{}
	for _, f := range l.sch.leaves {
		known[EnvVar(f.key)] = f.key
	}
	var names []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	sort.Strings(names)
	var bad []string
	for _, name := range names {
		val := os.Getenv(name)
		if val == "" {
			continue // viper ignores empty variables too
		}
		key, ok := known[name]
		if !ok {
			l.checkUnknownEnv(name, known)
			continue
		}
		l.loc.sources[key] = "$" + name
		k := l.sch.byKey[key].kind
		parsed, err := parseText(k, val)
		switch {
		case err != nil && k == kStringMap:
			l.add(key, 0, err.Error())
		case err != nil:
			l.add(key, 0, err.Error())
			bad = append(bad, key)
		case k == kStringMap:
			l.maps[key] = parsed.(map[string]string)
		}
	}
	return bad
}

// checkUnknownEnv reports AGENTRL_SECTION_* variables that match no key, with a suggestion.
// Other AGENTRL_* variables (not under a recipe section) are left to their owners.
func (l *loader) checkUnknownEnv(name string, known map[string]string) {
	rest, ok := strings.CutPrefix(name, envPrefix+"_")
	if !ok {
		return
	}
	inSection := false
	for _, sec := range l.sch.sections[""] {
		if strings.HasPrefix(rest, strings.ToUpper(sec)+"_") {
			inSection = true
		}
	}
	if !inSection {
		return
	}
	best, bestD := "", 1<<30
	for env := range known {
		if d := editDistance(name, env); d < bestD || d == bestD && env < best {
			best, bestD = env, d
		}
	}
	msg := "$" + name + " matches no recipe field"
	if bestD <= maxTypos(rest) {
		msg += "; did you mean $" + best + " (" + known[best] + ")?"
	}
	l.problems = append(l.problems, Problem{File: l.loc.file, Message: msg})
}

// checkOverrides parses the caller's overrides into typed values.
func (l *loader) checkOverrides(overrides map[string]string) map[string]any {
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string]any{}
	for _, key := range keys {
		f, ok := l.sch.byKey[key]
		if !ok && l.setMapEntry(key, overrides[key]) {
			continue
		}
		if !ok {
			section, name := "", key
			if i := strings.LastIndex(key, "."); i >= 0 {
				section, name = key[:i], key[i+1:]
			}
			if !l.sch.isSection(section) {
				section, name = "", key
			}
			l.problems = append(l.problems, Problem{File: l.loc.file, Field: key, Source: "override",
				Message: "unknown field" + l.sch.suggest(section, name)})
			continue
		}
		l.loc.sources[key] = "override"
		val, err := parseText(f.kind, overrides[key])
		switch {
		case err != nil:
			l.add(key, 0, err.Error())
		case f.kind == kStringMap:
			l.maps[key] = val.(map[string]string)
		default:
			out[key] = val
		}
	}
	return out
}

// setMapEntry applies an override of one entry of a mapping field (data.fields.answer=solution:
// the entry answer of data.fields), kept beside the recipe's other entries; false when key's
// parent is not a mapping field.
func (l *loader) setMapEntry(key, value string) bool {
	i := strings.LastIndex(key, ".")
	if i <= 0 {
		return false
	}
	parent, entry := key[:i], key[i+1:]
	f, ok := l.sch.byKey[parent]
	if !ok || f.kind != kStringMap || entry == "" {
		return false
	}
	src, ok := l.maps[parent]
	if !ok {
		src = f.value(Default()).Interface().(map[string]string)
	}
	m := maps.Clone(src)
	if m == nil {
		m = map[string]string{}
	}
	m[entry] = value
	l.maps[parent] = m
	l.loc.sources[parent] = "override"
	return true
}

// parseText parses an environment or override value for a field of kind k.
func parseText(k kind, s string) (any, error) {
	switch k {
	case kInt:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", s)
		}
		return n, nil
	case kFloat:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		return x, nil
	case kBool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", s)
		}
		return b, nil
	case kDuration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration; want one such as 500ms, 5s or 2m", s)
		}
		return d, nil
	case kAuto:
		if s == "auto" {
			return AutoInt(0), nil
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not auto or an integer", s)
		}
		if n < 1 {
			return nil, fmt.Errorf("%d is out of range; want auto or at least 1", n)
		}
		return AutoInt(n), nil
	case kInts:
		if s == "" {
			return []int{}, nil
		}
		parts := strings.Split(s, ",")
		out := make([]int, len(parts))
		for i, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, fmt.Errorf("%q is not a comma-separated list of integers such as 1,2,4,8 (no spaces)", s)
			}
			out[i] = n
		}
		return out, nil
	case kStrings:
		if s == "" {
			return []string{}, nil
		}
		return strings.Split(s, ","), nil
	case kStringMap:
		return parseMap(s)
	case kEvalSets:
		return parseSets(s)
	default:
		return s, nil
	}
}

// decodeHook converts the string forms viper may hold (from the environment) into durations,
// lists and AutoInt values when decoding into the Recipe.
func decodeHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if !ok || from.Kind() != reflect.String {
		return data, nil
	}
	switch {
	case to == reflect.TypeOf(time.Duration(0)):
		return time.ParseDuration(s)
	case to == reflect.TypeOf(AutoInt(0)):
		return parseText(kAuto, s)
	case to == reflect.TypeOf([]EvalSet{}):
		return parseSets(s)
	case to.Kind() == reflect.Slice && to.Elem().Kind() == reflect.Int:
		return parseText(kInts, s)
	case to.Kind() == reflect.Slice && to.Elem().Kind() == reflect.String:
		return parseText(kStrings, s)
	}
	return data, nil
}

// sortProblems orders problems by line (problems without a line last), then field.
func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		li, lj := ps[i].Line, ps[j].Line
		if (li == 0) != (lj == 0) {
			return li != 0
		}
		if li != lj {
			return li < lj
		}
		return ps[i].Field < ps[j].Field
	})
}

// WithLine prefixes err with the recipe file and the line of its field key ("PATH:LINE: "), as
// the loader's own problems are, for an error found after loading (a prm.model folder that is
// not there); the file alone where the file does not set key to value (a default, an override,
// the environment).
func WithLine(path, key, value string, err error) error {
	if err == nil || path == "" {
		return err
	}
	if line, v := fieldLine(path, key); line > 0 && v == value {
		return fmt.Errorf("%s:%d: %w", path, line, err)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// fieldLine is the line and value of the dotted key in the YAML file at path (0 where it is not
// there).
func fieldLine(path, key string) (int, string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, ""
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return 0, ""
	}
	n := doc.Content[0]
	for _, part := range strings.Split(key, ".") {
		if n.Kind != yaml.MappingNode {
			return 0, ""
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return 0, ""
		}
		n = next
	}
	return n.Line, n.Value
}
