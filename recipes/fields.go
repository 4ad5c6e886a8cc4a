package recipes

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// kind is the YAML-level type of a recipe field.
type kind int

const (
	kString kind = iota
	kInt
	kFloat
	kBool
	kDuration
	kAuto // AutoInt: "auto" or an integer
	kInts
	kStrings
	kStringMap // map[string]string: names (case kept) to values
	kEvalSets  // []EvalSet: a list of {name, path, size}
)

// want describes what a field of this kind accepts, for error messages.
func (k kind) want() string {
	switch k {
	case kInt:
		return "an integer"
	case kFloat:
		return "a number"
	case kBool:
		return "true or false"
	case kDuration:
		return "a duration such as 500ms, 5s or 2m"
	case kAuto:
		return "auto or an integer"
	case kInts:
		return "a list of integers such as [1, 2, 4, 8]"
	case kStrings:
		return `a list of strings such as ["</code>"]`
	case kStringMap:
		return "a mapping of names to values such as {NODE_ENV: production}"
	case kEvalSets:
		return "a list of sets such as [{name: aime24, path: data/aime24, size: 0}]"
	default:
		return "a string"
	}
}

// field is one leaf of the schema.
type field struct {
	key   string // dotted, e.g. "train.lr"
	kind  kind
	index []int // reflect index path from Recipe
}

// schema is the set of recipe keys, derived from the Recipe type's mapstructure tags.
type schema struct {
	leaves   []field
	byKey    map[string]*field
	sections map[string][]string // "" for the top level; child names in declaration order
}

// newSchema walks the Recipe type. It is cheap and has no side effects, so it is built per use
// rather than kept in a global.
func newSchema() *schema {
	s := &schema{byKey: map[string]*field{}, sections: map[string][]string{}}
	s.walk(reflect.TypeOf(Recipe{}), "", nil)
	for i := range s.leaves {
		s.byKey[s.leaves[i].key] = &s.leaves[i]
	}
	return s
}

func (s *schema) walk(t reflect.Type, prefix string, index []int) {
	s.sections[prefix] = []string{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("mapstructure")
		if name == "" || name == "-" {
			continue
		}
		key := join(prefix, name)
		idx := append(append([]int{}, index...), i)
		s.sections[prefix] = append(s.sections[prefix], name)
		ft := f.Type
		switch {
		case ft == reflect.TypeOf(time.Duration(0)):
			s.leaves = append(s.leaves, field{key, kDuration, idx})
		case ft == reflect.TypeOf(AutoInt(0)):
			s.leaves = append(s.leaves, field{key, kAuto, idx})
		case ft == reflect.TypeOf([]EvalSet{}):
			s.leaves = append(s.leaves, field{key, kEvalSets, idx})
		case ft.Kind() == reflect.Struct:
			s.walk(ft, key, idx)
		case ft.Kind() == reflect.String:
			s.leaves = append(s.leaves, field{key, kString, idx})
		case ft.Kind() == reflect.Int || ft.Kind() == reflect.Int64:
			s.leaves = append(s.leaves, field{key, kInt, idx})
		case ft.Kind() == reflect.Float64:
			s.leaves = append(s.leaves, field{key, kFloat, idx})
		case ft.Kind() == reflect.Bool:
			s.leaves = append(s.leaves, field{key, kBool, idx})
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Int:
			s.leaves = append(s.leaves, field{key, kInts, idx})
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String:
			s.leaves = append(s.leaves, field{key, kStrings, idx})
		case ft.Kind() == reflect.Map && ft.Key().Kind() == reflect.String && ft.Elem().Kind() == reflect.String:
			s.leaves = append(s.leaves, field{key, kStringMap, idx})
		default:
			// A new field type must be taught to the loader; fail loudly in tests.
			panic("recipes: unsupported field type " + ft.String() + " for " + key)
		}
	}
}

// isSection reports whether key names a mapping of settings.
func (s *schema) isSection(key string) bool {
	_, ok := s.sections[key]
	return ok
}

// value returns the field's value in r.
func (f *field) value(r *Recipe) reflect.Value {
	return reflect.ValueOf(r).Elem().FieldByIndex(f.index)
}

// Keys returns every dotted leaf key of the schema in declaration order, e.g. "train.lr".
func Keys() []string {
	s := newSchema()
	keys := make([]string, len(s.leaves))
	for i, f := range s.leaves {
		keys[i] = f.key
	}
	return keys
}

// EnvVar returns the environment variable that overrides a dotted key: "train.lr" →
// "AGENTRL_TRAIN_LR".
func EnvVar(key string) string {
	return envPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

const envPrefix = "AGENTRL"

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// suggest returns a "; did you mean X?" or "; SECTION accepts: a, b, c" tail for an unknown key
// name found in section. It first looks for a near spelling among the section's own keys, then for
// the same name in another section (a field put in the wrong place).
func (s *schema) suggest(section, name string) string {
	siblings := s.sections[section]
	best, bestD := "", 1<<30
	for _, c := range siblings {
		if d := editDistance(strings.ToLower(name), c); d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" && bestD <= maxTypos(name) {
		return "; did you mean " + join(section, best) + "?"
	}
	var elsewhere []string
	for sec, names := range s.sections {
		if sec == section {
			continue
		}
		for _, c := range names {
			if c == strings.ToLower(name) {
				elsewhere = append(elsewhere, join(sec, c))
			}
		}
	}
	if len(elsewhere) > 0 {
		sort.Strings(elsewhere)
		return "; did you mean " + strings.Join(elsewhere, " or ") + "?"
	}
	where := section
	if where == "" {
		where = "the top level"
	}
	return "; " + where + " accepts: " + strings.Join(siblings, ", ")
}

// maxTypos is how many edits still count as a misspelling of a name of this length.
func maxTypos(name string) int {
	switch n := len(name); {
	case n <= 3:
		return 1
	case n <= 8:
		return 2
	default:
		return 3
	}
}

// editDistance is the Levenshtein distance between a and b, with an adjacent transposition
// counting as one edit (optimal string alignment).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

func itoa(i int) string { return strconv.Itoa(i) }
