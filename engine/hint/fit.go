package hint

import (
	"fmt"
	"os"
	"path/filepath"

	"agentrl/engine/model"
	"agentrl/recipes"
)

// FitPRM resolves prm.kind model's prompt and lengths for the model that judges: policyDir's
// model for prm.model reference or policy, else prm.model's folder. A prm.prompt left "" takes
// the folder's own PRM prompt (model.PRMPromptFile) when it has one: the built-in model's is the
// prompt it was taught to judge in. Prompt and reply lengths that together exceed the model's
// positions are cut to fit: the reply to a quarter of them at most, the prompt to the rest, so
// that --set prm.kind=model works as typed on a small model. It returns what it changed, one
// line each; an endpoint PRM is left as it is.
func FitPRM(r *recipes.Recipe, policyDir string) ([]string, error) {
	if !r.PRMModel() || r.PRM.Endpoint != "" {
		return nil, nil
	}
	dir := policyDir
	if m := r.PRM.Model; m != "reference" && m != "policy" && m != "" {
		dir = m
	}
	var said []string
	if r.PRM.Prompt == "" {
		if b, err := os.ReadFile(filepath.Join(dir, model.PRMPromptFile)); err == nil {
			r.PRM.Prompt, r.PRM.PromptFile = "@"+filepath.Join(dir, model.PRMPromptFile), string(b)
			said = append(said, fmt.Sprintf("prm: the PRM prompt its model was taught to judge in (%s)", model.PRMPromptFile))
		}
	}
	cfg, err := model.ReadConfig(dir)
	if err != nil {
		if dir != policyDir {
			return said, fmt.Errorf("prm.model %q: %w (give a HuggingFace model folder, or reference, policy)", r.PRM.Model, err)
		}
		return said, fmt.Errorf("prm.kind model: %w", err)
	}
	askedIn, askedOut, pos := r.PRMInputTokens(), r.PRM.MaxNewTokens, cfg.MaxPositions
	if pos > 0 && (askedIn+askedOut+15)/16*16 > pos {
		out := min(askedOut, max(16, pos/4))
		in := min(askedIn, pos-out)
		in -= (in + out) % 16 // the slot is a multiple of 16 tokens
		r.PRM.MaxNewTokens, r.PRM.MaxInputTokens = out, recipes.AutoInt(in)
		said = append(said, fmt.Sprintf("prm: %d prompt and %d reply tokens, to fit the PRM model's %d positions (the recipe asked %d and %d)", in, out, pos, askedIn, askedOut))
	}
	return said, nil
}
