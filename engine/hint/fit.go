package hint

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"agentrl/engine/model"
	"agentrl/engine/remote/wire"
	"agentrl/recipes"
)

// FitPRM resolves prm.kind model's prompt and lengths for the model that judges: policyDir's
// model for prm.model reference or policy, else prm.model's folder. A prm.prompt left "" takes
// the folder's own PRM prompt (model.PRMPromptFile) when it has one: the built-in model's is the
// prompt it was taught to judge in. Prompt and reply lengths that together exceed the model's
// positions are cut to fit: the reply to a quarter of them at most, the prompt to the rest, so
// that --set prm.kind=model works as typed on a small model. It returns what it changed, one
// line each; an endpoint PRM is FitPRMEndpoint's.
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
	if line := fitLengths(r, cfg.MaxPositions, 16, "the PRM model's %d positions"); line != "" {
		said = append(said, line)
	}
	return said, nil
}

// fitLengths cuts prm.max_input_tokens and prm.max_new_tokens when together (rounded up to a
// multiple of align) they exceed room: the reply to a quarter of it at most (16 at least), the
// prompt to the rest. It says what it changed, naming room with what (a format with one %d).
func fitLengths(r *recipes.Recipe, room, align int, what string) string {
	askedIn, askedOut := r.PRMInputTokens(), r.PRM.MaxNewTokens
	if room <= 0 || (askedIn+askedOut+align-1)/align*align <= room {
		return ""
	}
	out := min(askedOut, max(16, room/4))
	in := min(askedIn, room-out)
	in -= (in + out) % align // a local slot is a multiple of 16 tokens
	r.PRM.MaxNewTokens, r.PRM.MaxInputTokens = out, recipes.AutoInt(in)
	return fmt.Sprintf("prm: %d prompt and %d reply tokens, to fit %s (the recipe asked %d and %d)", in, out, fmt.Sprintf(what, room), askedIn, askedOut)
}

// FitPRMEndpoint fits prm.kind model's lengths to the context of the server prm.endpoint names,
// as FitPRM does to a local model's positions: it asks GET ENDPOINT/models (with the key of
// prm.api_key_env) for prm.model's max_model_len, the prompt-and-reply length vLLM and agentrl's
// serve report, and cuts the lengths that do not fit it. A server that does not answer, or
// reports no length, leaves the recipe as it is and says so: the judge's requests then say what
// the server refuses. It returns what it changed or found, one line each.
func FitPRMEndpoint(ctx context.Context, r *recipes.Recipe) []string {
	if !r.PRMModel() || r.PRM.Endpoint == "" {
		return nil
	}
	n, err := endpointContext(ctx, r)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("prm: the lengths stand as the recipe gives them: %v", err)}
	case n == 0:
		return nil
	}
	if line := fitLengths(r, n, 1, "the context of "+r.PRM.Model+" at prm.endpoint (max_model_len %d)"); line != "" {
		return []string{line}
	}
	return nil
}

// endpointContext is max_model_len of prm.model on prm.endpoint's GET /models (0: not reported).
func endpointContext(ctx context.Context, r *recipes.Recipe) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := strings.TrimSuffix(r.PRM.Endpoint, "/") + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("prm.endpoint %q: %w", r.PRM.Endpoint, err)
	}
	if r.PRM.APIKeyEnv != "" {
		if key := os.Getenv(r.PRM.APIKeyEnv); key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var list wire.ModelList
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return 0, fmt.Errorf("GET %s: not a model list: %w", url, err)
	}
	for _, m := range list.Data {
		if m.ID == r.PRM.Model && m.MaxModelLen != nil {
			return *m.MaxModelLen, nil
		}
	}
	return 0, nil // prm.model not listed: the judge's requests say so
}
