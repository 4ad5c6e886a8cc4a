package batch

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNoPlayer: the trajectory every phase passes imports, of this module, only envs,
// the tokenizer's types and the event types; never a phase (serve, train, …) nor a player
// (envs/retool, envs/external, …), whose own state a trajectory carries unread.
func TestImportsNoPlayer(t *testing.T) {
	allowed := []string{"agentrl/envs", "agentrl/engine/tokenizer", "agentrl/engine/event"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "agentrl/") && !slices.Contains(allowed, path) {
				t.Errorf("%s imports %s; want only %v of this module", name, path, allowed)
			}
		}
	}
}
