package recipes

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a recipe.
type Problem struct {
	// File is the recipe file ("recipe" when the recipe did not come from a file).
	File string
	// Line is the 1-based line of the field in File, or 0 when the field is not in the file.
	Line int
	// Field is the dotted key, e.g. "algorithm.kl_estimator".
	Field string
	// Source says where a value not written in the file came from: "$AGENTRL_TRAIN_LR",
	// "override" or "default"; empty for values from the file (and for recipes built in code).
	Source string
	// Message says what is wrong and what would be accepted.
	Message string
}

// String renders the problem as FILE[:LINE]: FIELD[ (from SOURCE) | (default)]: MESSAGE, e.g.
// `recipes/retool.yaml:14: algorithm.kl_estimator: "k2" is not one of k1, k3`.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		switch p.Source {
		case "":
		case "default":
			b.WriteString(" (default)")
		default:
			b.WriteString(" (from " + p.Source + ")")
		}
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Error lists every problem found in a recipe, one per line, in file order.
type Error struct {
	Problems []Problem
}

// Error joins the problems, one per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}
