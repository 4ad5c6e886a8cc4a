// Package synthetic generates the built-in math tasks whose answers need computation, each with
// its reference program: levels 0 to 5 by difficulty and the named-operation problems, split into
// training, held-out and validation tasks, and the kinds of task a comparison can be cut to
// (TaskGroup).
package synthetic

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"agentrl/envs"
)

// MaxLevel is the highest synthetic level: 0 to 5 rise in difficulty, NamedOpLevel stands apart.
const MaxLevel = NamedOpLevel

// NamedOpLevel is the level of named-operation problems, "What is the remainder of 47 and 13?":
// two-digit operands, easy to copy, and an operation named by a word (NamedOps). Some of the
// words are taught by the built-in model's SFT and some are not, so for those what the word means
// is knowledge the problem does not carry and a bridge thought that names the program does: the
// hindsight a hint gives on the seed's competition problems (a method), in the smallest form.
const NamedOpLevel = 6

// NamedOp is an operation a level-NamedOpLevel problem names by a word.
type NamedOp struct {
	Word, Op string
	// Taught: the built-in model's SFT demonstrates it; the others are left for RL to learn.
	Taught bool
}

// NamedOps are the operations of level NamedOpLevel, in the order the generator draws from.
var NamedOps = []NamedOp{
	{"sum", "+", true}, {"product", "*", true}, {"difference", "-", true},
	{"remainder", "%", false}, {"quotient", "//", false},
}

// namedOpPrompt is the one wording of every named-operation problem, so that only the word tells
// the operations apart.
const namedOpPrompt = "What is the %s of %d and %d?"

// Tasks generates math problems whose answers need computation, with a reference solution in
// code that runs in both executors (Starlark and Python: loops, %, pow(a, b, m), str/int,
// indexing — Starlark strings are not iterable, so digits are read by index).
// Train and held-out splits are disjoint by construction: a problem is held out exactly when the
// hash of its text says so, whatever the seed.
type Tasks struct {
	Levels []int
	Seed   uint64
}

// heldOut decides the split from the problem text alone.
func heldOut(prompt string) bool {
	h := fnv.New64a()
	h.Write([]byte(prompt))
	return h.Sum64()%8 == 0
}

// Split returns nTrain training and nHeld held-out tasks, deterministic for the seed.
func (s Tasks) Split(nTrain, nHeld int) (train, held []envs.Task, err error) {
	if len(s.Levels) == 0 {
		s.Levels = []int{1, 2, 3}
	}
	for _, l := range s.Levels {
		if l < 0 || l > MaxLevel {
			return nil, nil, fmt.Errorf("task level %d is not in 0..%d", l, MaxLevel)
		}
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x2545f4914f6cdd1d))
	seen := map[string]bool{}
	for tries := 0; (len(train) < nTrain || len(held) < nHeld) && tries < 200*(nTrain+nHeld)+1000; tries++ {
		level := s.Levels[rng.IntN(len(s.Levels))]
		t := generate(rng, level)
		if seen[t.Prompt] {
			continue
		}
		seen[t.Prompt] = true
		if heldOut(t.Prompt) {
			if len(held) < nHeld {
				t.ID = fmt.Sprintf("heldout-%04d", len(held))
				held = append(held, t)
			}
		} else if len(train) < nTrain {
			t.ID = fmt.Sprintf("train-%04d", len(train))
			train = append(train, t)
		}
	}
	if len(train) < nTrain || len(held) < nHeld {
		return nil, nil, fmt.Errorf("levels %v give only %d train and %d held-out distinct problems; ask for fewer", s.Levels, len(train), len(held))
	}
	return train, held, nil
}

// Validation returns n validation tasks, disjoint from both splits: drawn from a stream of their
// own for the seed, from the training side of the hash split (never a held-out problem), skipping
// every problem in train. Split's lists do not depend on n.
func (s Tasks) Validation(n int, train []envs.Task) ([]envs.Task, error) {
	if len(s.Levels) == 0 {
		s.Levels = []int{1, 2, 3}
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x9e3779b97f4a7c15))
	seen := map[string]bool{}
	for _, t := range train {
		seen[t.Prompt] = true
	}
	var val []envs.Task
	for misses := 0; len(val) < n && misses < 20000; { // 20,000 draws in a row with nothing new: the levels are used up
		t := generate(rng, s.Levels[rng.IntN(len(s.Levels))])
		if seen[t.Prompt] || heldOut(t.Prompt) {
			misses++
			continue
		}
		misses = 0
		seen[t.Prompt] = true
		t.ID = fmt.Sprintf("val-%04d", len(val))
		val = append(val, t)
	}
	if len(val) < n {
		return nil, fmt.Errorf("levels %v give only %d validation problems apart from the training and held-out ones; lower eval.validation_tasks", s.Levels, len(val))
	}
	return val, nil
}

// generate makes one problem of a level: prompt, answer and the reference code (Meta["code"]).
func generate(rng *rand.Rand, level int) envs.Task {
	r := func(lo, hi int64) int64 { return lo + rng.Int64N(hi-lo+1) }
	var prompt, code string
	var ans *big.Int
	switch level {
	case 0: // two-digit operands: what a small model can copy into code and back
		a, b := r(10, 99), r(10, 99)
		if rng.IntN(2) == 0 {
			prompt, code, ans = fmt.Sprintf("What is %d + %d?", a, b), fmt.Sprintf("print(%d + %d)", a, b), big.NewInt(a+b)
		} else {
			prompt, code, ans = fmt.Sprintf("What is %d * %d?", a, b), fmt.Sprintf("print(%d * %d)", a, b), big.NewInt(a*b)
		}
	case 1:
		a, b := r(100, 9999), r(100, 9999)
		if rng.IntN(2) == 0 {
			prompt, code, ans = fmt.Sprintf("What is %d + %d?", a, b), fmt.Sprintf("print(%d + %d)", a, b), big.NewInt(a+b)
		} else {
			prompt, code, ans = fmt.Sprintf("What is %d * %d?", a, b), fmt.Sprintf("print(%d * %d)", a, b), big.NewInt(a*b)
		}
	case 2:
		if rng.IntN(2) == 0 {
			a, b, m := r(1000, 99999), r(100, 9999), r(7, 997)
			prompt, code = fmt.Sprintf("What is %d * %d mod %d?", a, b, m), fmt.Sprintf("print((%d * %d) %% %d)", a, b, m)
			ans = big.NewInt(a * b % m)
		} else {
			n := r(1_000_000, 999_999_999)
			prompt = fmt.Sprintf("What is the sum of the digits of %d?", n)
			code = fmt.Sprintf("t = str(%d)\ns = 0\nfor i in range(len(t)):\n    s += int(t[i])\nprint(s)", n)
			ans = big.NewInt(digitSum(big.NewInt(n)))
		}
	case 3:
		if rng.IntN(2) == 0 {
			b, e := r(2, 9), r(20, 90)
			prompt = fmt.Sprintf("What is the sum of the digits of %d^%d?", b, e)
			code = fmt.Sprintf("t = str(pow(%d, %d))\ns = 0\nfor i in range(len(t)):\n    s += int(t[i])\nprint(s)", b, e)
			ans = big.NewInt(digitSum(new(big.Int).Exp(big.NewInt(b), big.NewInt(e), nil)))
		} else {
			n, a, b := r(1000, 9999), r(3, 13), r(14, 29)
			prompt = fmt.Sprintf("How many integers between 1 and %d are divisible by %d or %d?", n, a, b)
			code = fmt.Sprintf("c = 0\nfor i in range(1, %d):\n    if i %% %d == 0 or i %% %d == 0:\n        c += 1\nprint(c)", n+1, a, b)
			ans = big.NewInt(n/a + n/b - n/lcm(a, b))
		}
	case 4:
		if rng.IntN(2) == 0 {
			b, e, m := r(2, 999), r(100, 99999), r(11, 9973)
			prompt, code = fmt.Sprintf("What is %d^%d mod %d?", b, e, m), fmt.Sprintf("print(pow(%d, %d, %d))", b, e, m)
			ans = new(big.Int).Exp(big.NewInt(b), big.NewInt(e), big.NewInt(m))
		} else {
			n, m := r(100, 2000), r(97, 9973)
			prompt = fmt.Sprintf("What is the sum of i^2 for i from 1 to %d, mod %d?", n, m)
			code = fmt.Sprintf("s = 0\nfor i in range(1, %d):\n    s += i * i\nprint(s %% %d)", n+1, m)
			ans = big.NewInt(n * (n + 1) * (2*n + 1) / 6 % m)
		}
	case NamedOpLevel:
		a, b := r(10, 99), r(10, 99)
		if a < b {
			a, b = b, a // the larger first: no negative difference, a quotient of at least 1
		}
		op := NamedOps[rng.IntN(len(NamedOps))]
		return envs.Task{
			Prompt: fmt.Sprintf(namedOpPrompt, op.Word, a, b),
			Answer: strconv.FormatInt(namedOpValue(op.Op, a, b), 10),
			Meta:   map[string]string{"level": strconv.Itoa(level), "code": fmt.Sprintf("print(%d %s %d)", a, op.Op, b), "op_word": op.Word},
		}
	default:
		a, b, c, m := r(1000, 99999), r(1000, 99999), r(1, 9999), r(101, 9973)
		e := r(2, 9)
		prompt = fmt.Sprintf("What is (%d * %d + %d)^%d mod %d?", a, b, c, e, m)
		code = fmt.Sprintf("x = %d * %d + %d\nprint(pow(x, %d, %d))", a, b, c, e, m)
		x := new(big.Int).Add(new(big.Int).Mul(big.NewInt(a), big.NewInt(b)), big.NewInt(c))
		ans = new(big.Int).Exp(x, big.NewInt(e), big.NewInt(m))
	}
	return envs.Task{Prompt: prompt, Answer: ans.String(), Meta: map[string]string{"level": strconv.Itoa(level), "code": code}}
}

func namedOpValue(op string, a, b int64) int64 {
	switch op {
	case "+":
		return a + b
	case "*":
		return a * b
	case "-":
		return a - b
	case "%":
		return a % b
	case "//":
		return a / b // both positive: floor division
	}
	panic("synthetic: named operation " + op)
}

// Reword is t, a named-operation problem, with its operation called word instead: the same
// numbers, operation, answer and program under another name (SFT uses it to teach the taught
// words only, and to demonstrate reading a hint with words no task uses). ok is false when t is
// not a named-operation problem or the reworded text is a held-out problem.
func Reword(t envs.Task, word string) (envs.Task, bool) {
	old := t.Meta["op_word"]
	if t.Meta["level"] != strconv.Itoa(NamedOpLevel) || old == "" {
		return t, false
	}
	p := strings.Replace(t.Prompt, "the "+old+" of", "the "+word+" of", 1)
	if p == t.Prompt && word != old || heldOut(p) {
		return t, false
	}
	meta := maps.Clone(t.Meta)
	meta["op_word"] = word
	t.Prompt, t.Meta = p, meta
	return t, true
}

// NonceWord is a made-up word of two or three syllables, never one of NamedOps' words.
func NonceWord(rng *rand.Rand) string {
	const cons, vows = "bdfgklmnprstvz", "aeiou"
	for {
		var b strings.Builder
		for range 2 + rng.IntN(2) {
			b.WriteByte(cons[rng.IntN(len(cons))])
			b.WriteByte(vows[rng.IntN(len(vows))])
		}
		b.WriteByte(cons[rng.IntN(len(cons))])
		w := b.String()
		if !slices.ContainsFunc(NamedOps, func(o NamedOp) bool { return o.Word == w }) {
			return w
		}
	}
}

func digitSum(n *big.Int) int64 {
	var s int64
	for _, c := range n.String() {
		s += int64(c - '0')
	}
	return s
}

func lcm(a, b int64) int64 {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// TaskGroup names the kind of a synthetic task: "level N", and for a named-operation problem
// whether SFT teaches its word ("named, taught") or leaves it to RL ("named, untaught": the
// problems whose hint carries what the problem does not).
func TaskGroup(t envs.Task) string {
	w, named := t.Meta["op_word"]
	if !named {
		return "level " + t.Meta["level"]
	}
	for _, op := range NamedOps {
		if op.Word == w && op.Taught {
			return "named, taught"
		}
	}
	return "named, untaught"
}
