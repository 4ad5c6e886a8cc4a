package engine

import (
	"reflect"
	"strings"
	"testing"

	"agentrl/envs/grade"
	"agentrl/recipes"
)

// TestGraderNames: the names a recipe's reward.grader accepts are the graders envs/grade has.
func TestGraderNames(t *testing.T) {
	if got := grade.Names(); !reflect.DeepEqual(got, recipes.Graders) {
		t.Errorf("envs/grade has graders %v; recipes.Graders lists %v", got, recipes.Graders)
	}
}

// TestGraderOf: a run records its grader by name and version.
func TestGraderOf(t *testing.T) {
	r := recipes.Default()
	if got := GraderOf(r); !strings.HasPrefix(got, "verifier@") {
		t.Errorf("GraderOf(default) = %q; want verifier@…", got)
	}
	r.Reward.Grader = "math_dapo"
	if got := GraderOf(r); !strings.HasPrefix(got, "math_dapo@") || !strings.Contains(got, "verl") {
		t.Errorf("GraderOf(math_dapo) = %q; want math_dapo@ and the verl source it reproduces", got)
	}
}
