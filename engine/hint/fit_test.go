package hint

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"agentrl/recipes"
)

// TestFitPRM: prm.kind model takes the PRM model folder's own prompt when the recipe leaves
// prm.prompt empty, and cuts prompt and reply lengths that exceed the model's positions (the
// built-in model's 1,024) to fit, reply first to a quarter; a large model, a prompt the recipe
// names, and an endpoint PRM are left as they are.
func TestFitPRM(t *testing.T) {
	folder := func(positions int, prompt string) string {
		dir := t.TempDir()
		cfg := `{"model_type": "qwen3", "vocab_size": 392, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 4,
"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": ` + strconv.Itoa(positions) + `}`
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		if prompt != "" {
			if err := os.WriteFile(filepath.Join(dir, "prm_prompt.txt"), []byte(prompt), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	base := func(set map[string]string) *recipes.Recipe {
		return retoolWith(t, map[string]string{"hinter.kind": "none", "prm.kind": "model", "prm.model": "reference"}, set)
	}
	small, large := folder(1024, "Judge {problem}: {trajectory}"), folder(40960, "")
	for _, tc := range []struct {
		name            string
		r               *recipes.Recipe
		dir, wantPrompt string
		wantIn, wantOut int
	}{
		{"built-in size, its own prompt", base(nil), small, "Judge {problem}: {trajectory}", 768, 256},
		{"a named prompt stays", base(map[string]string{"prm.prompt": "Mine: {trajectory}"}), small, "Mine: {trajectory}", 768, 256},
		{"lengths that fit stay", base(map[string]string{"prm.max_input_tokens": "640", "prm.max_new_tokens": "48"}), small, "Judge {problem}: {trajectory}", 640, 48},
		{"a large model", base(nil), large, recipes.DefaultPRMPrompt, 0, 0},
	} {
		wantIn, wantOut := tc.wantIn, tc.wantOut
		if wantIn == 0 {
			wantIn, wantOut = tc.r.PRMInputTokens(), tc.r.PRM.MaxNewTokens
		}
		said, err := FitPRM(tc.r, tc.dir)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := tc.r.PRM.PromptText(); got != tc.wantPrompt {
			t.Errorf("%s: prompt %q; want %q", tc.name, got, tc.wantPrompt)
		}
		if in, out := tc.r.PRMInputTokens(), tc.r.PRM.MaxNewTokens; in != wantIn || out != wantOut || (in+out)%16 != 0 && wantIn == 768 {
			t.Errorf("%s: %d prompt and %d reply tokens; want %d and %d (said %q)", tc.name, in, out, wantIn, wantOut, said)
		}
		if err := tc.r.Validate(); err != nil {
			t.Errorf("%s: the fitted recipe does not validate: %v", tc.name, err)
		}
	}
	ep := base(map[string]string{"prm.endpoint": "http://127.0.0.1:1/v1", "prm.model": "judge"})
	if said, err := FitPRM(ep, small); err != nil || said != nil || ep.PRM.Prompt != "" {
		t.Errorf("an endpoint PRM: said %q, err %v, prompt %q; want it left alone", said, err, ep.PRM.Prompt)
	}
	if _, err := FitPRM(base(nil), t.TempDir()); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("a folder without config.json: %v; want an error naming config.json", err)
	}
}

// TestBuiltinPRMPrompt: the built-in model keeps the PRM prompt make builtin teaches it to judge in.
func TestBuiltinPRMPrompt(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "recipes", "prm-builtin.txt"))
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join("..", "..", "testdata", "builtin", "prm_prompt.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(src) != string(shipped) {
		t.Errorf("testdata/builtin/prm_prompt.txt differs from recipes/prm-builtin.txt, which make builtin teaches")
	}
}

// TestFitPRMEndpoint: an endpoint PRM's lengths are fitted to the max_model_len GET /models
// reports for prm.model (vLLM's field, agentrl's serve too), with the key of prm.api_key_env; a
// recipe that fits, a model the list lacks, a list without the field change nothing; a server that
// refuses or cannot be reached leaves the lengths as the recipe gives them and says why.
func TestFitPRMEndpoint(t *testing.T) {
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		switch {
		case r.URL.Path == "/v1/models" && r.Header.Get("Authorization") == "Bearer wrong":
			http.Error(w, `{"error": {"message": "bad key"}}`, http.StatusUnauthorized)
		case r.URL.Path == "/v1/models":
			fmt.Fprint(w, `{"object": "list", "data": [{"id": "judge", "object": "model", "max_model_len": 2048},
				{"id": "other", "object": "model", "max_model_len": 100000}, {"id": "bare", "object": "model"}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	load := func(set map[string]string) *recipes.Recipe {
		return retoolWith(t, map[string]string{"hinter.kind": "none", "prm.kind": "model", "prm.endpoint": srv.URL + "/v1", "prm.model": "judge",
			"prm.max_new_tokens": "4096", "prm.api_key_env": "FIT_TEST_KEY"}, set)
	}
	t.Setenv("FIT_TEST_KEY", "k1")
	for _, tc := range []struct {
		name, key     string
		set           map[string]string
		wantIn, wantN int
		said          string
	}{
		// retool.yaml: rollout.max_total_tokens 512, so auto input is 1,536; with 4,096 reply tokens
		// that is over 2,048: the reply takes a quarter (512), the prompt the rest (1,536).
		{"auto lengths over the context", "k1", nil, 1536, 512,
			"prm: 1536 prompt and 512 reply tokens, to fit the context of judge at prm.endpoint (max_model_len 2048) (the recipe asked 1536 and 4096)"},
		{"a reply cut to a quarter first", "k1", map[string]string{"prm.max_new_tokens": "1024"}, 1536, 512,
			"prm: 1536 prompt and 512 reply tokens, to fit the context of judge at prm.endpoint (max_model_len 2048) (the recipe asked 1536 and 1024)"},
		{"lengths that fit", "k1", map[string]string{"prm.max_new_tokens": "256", "prm.max_input_tokens": "1792"}, 1792, 256, ""},
		{"a model the server does not list", "k1", map[string]string{"prm.model": "absent"}, 1536, 4096, ""},
		{"a model listed without max_model_len", "k1", map[string]string{"prm.model": "bare"}, 1536, 4096, ""},
		{"a refused key", "wrong", nil, 1536, 4096, "prm: the lengths stand as the recipe gives them: GET " + srv.URL + "/v1/models: 401 Unauthorized"},
		{"a server that is gone", "k1", map[string]string{"prm.endpoint": closed.URL + "/v1"}, 1536, 4096, "prm: the lengths stand as the recipe gives them: GET " + closed.URL + "/v1/models"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FIT_TEST_KEY", tc.key)
			r := load(tc.set)
			said := strings.Join(FitPRMEndpoint(context.Background(), r), "\n")
			if got := r.PRMInputTokens(); got != tc.wantIn || r.PRM.MaxNewTokens != tc.wantN {
				t.Errorf("lengths %d and %d; want %d and %d", got, r.PRM.MaxNewTokens, tc.wantIn, tc.wantN)
			}
			if (tc.said == "") != (said == "") || !strings.Contains(said, tc.said) {
				t.Errorf("said %q; want %q", said, tc.said)
			}
		})
	}
	if got := auth.Load(); got != "Bearer wrong" && got != "Bearer k1" {
		t.Errorf("the last request's Authorization %q; want the key of prm.api_key_env", got)
	}
	r := load(map[string]string{"prm.endpoint": "", "prm.model": "reference"})
	if said := FitPRMEndpoint(context.Background(), r); said != nil {
		t.Errorf("a local PRM: %v; want nothing (FitPRM's)", said)
	}
}

// retoolWith is recipes/retool.yaml with the overrides of base, then of set.
func retoolWith(t *testing.T, base, set map[string]string) *recipes.Recipe {
	t.Helper()
	over := map[string]string{}
	for _, m := range []map[string]string{base, set} {
		for k, v := range m {
			over[k] = v
		}
	}
	r, err := recipes.Load(filepath.Join("..", "..", "recipes", "retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: over})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
