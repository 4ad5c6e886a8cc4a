package remote

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"agentrl/engine/rollout"
)

var fixtures = filepath.Join("..", "..", "testdata", "fixtures", "engines")

// replay is a server that checks each request's body against the fixture named for its path
// (as JSON values) and answers with the reply fixture.
func replay(t *testing.T, routes map[string][2]string) string {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(fixtures, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := routes[r.URL.Path]
		if !ok {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var got, want any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Errorf("%s: the client sent %s: %v", r.URL.Path, body, err)
		}
		if rt[0] != "" {
			_ = json.Unmarshal(read(rt[0]), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: the client sent\n%s\nwant the documented request %s", r.URL.Path, body, rt[0])
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if rt[1] == "" {
			return
		}
		reply := read(rt[1])
		var fail struct {
			Success *bool `json:"success"`
		}
		if json.Unmarshal(reply, &fail) == nil && fail.Success != nil && !*fail.Success {
			w.WriteHeader(http.StatusBadRequest)
		}
		_, _ = w.Write(reply)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// fixtureRequest is the request the generation fixtures were written for.
var fixtureRequest = rollout.Request{
	Append: []int32{151644, 872, 198, 3838, 374, 220, 16, 22, 3039, 220, 17, 18, 30, 151645, 198, 151644, 77091, 198},
	MaxNew: 96, StopIDs: []int32{151645, 151643}, StopStrings: []string{"</code>"}, Sampling: rollout.Sampling{Temperature: 1, Seed: 4242},
}

// TestClientsOnDocumentedFixtures: the SGLang and vLLM clients send the documented requests
// (generation, probe, reload) and read the documented replies into the tokens, log-probs and
// stop reason the players use.
func TestClientsOnDocumentedFixtures(t *testing.T) {
	wantIDs := []int32{27, 1851, 397, 1350, 7, 16, 22, 353, 220, 17, 18, 340, 522, 1851, 29}
	cases := []struct {
		kind             Kind
		gen, probe, load map[string][2]string
	}{
		{SGLang,
			map[string][2]string{"/generate": {"sglang/generate_request.json", "sglang/generate_response.json"}},
			map[string][2]string{"/generate": {"sglang/generate_probe_request.json", "sglang/generate_probe_response.json"}},
			map[string][2]string{"/update_weights_from_disk": {"sglang/update_weights_from_disk_request.json", "sglang/update_weights_from_disk_response.json"}}},
		{VLLM,
			map[string][2]string{"/v1/completions": {"vllm/completions_request.json", "vllm/completions_response.json"}},
			map[string][2]string{"/v1/completions": {"vllm/completions_probe_request.json", "vllm/completions_probe_response.json"}},
			map[string][2]string{"/collective_rpc": {"vllm/collective_rpc_request.json", "vllm/collective_rpc_response.json"}, "/reset_prefix_cache": {"", ""}}},
	}
	for _, tc := range cases {
		t.Run(string(tc.kind), func(t *testing.T) {
			c := &client{ep: Endpoint{URL: replay(t, tc.gen), Kind: tc.kind, Model: "policy"}, http: http.DefaultClient}
			res, err := c.generate(context.Background(), fixtureRequest.Append, fixtureRequest)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.IDs, wantIDs) || res.Stop != rollout.StopString || res.Matched != "</code>" || len(res.LogProbs) != len(wantIDs) ||
				res.LogProbs[5] != -0.52 {
				t.Errorf("read %+v; want the 15 tokens ending on </code> with their log-probs", res)
			}
			c.ep.URL = replay(t, tc.probe)
			p, err := c.probe(context.Background(), nil, "<|im_start|>user\nWhat is 17 times 23?<|im_end|>\n<|im_start|>assistant\n")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.IDs, []int32{151644, 872, 198, 3838, 374, 220}) || !math.IsNaN(p.LogProbs[0]) || p.LogProbs[3] != -3.75 {
				t.Errorf("probe %+v", p)
			}
			c.ep.URL = replay(t, tc.load)
			if err := c.reload(context.Background(), "/shared/policy", "run-step3"); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The other endings: a stop token (SGLang's matched id, vLLM's stop_reason), and max_new_tokens.
	for _, tc := range []struct {
		kind        Kind
		path, reply string
		stop        rollout.StopReason
		n           int
	}{
		{SGLang, "/generate", "sglang/generate_eos_response.json", rollout.StopToken, 11},
		{SGLang, "/generate", "sglang/generate_length_response.json", rollout.StopMaxNew, 2},
		{VLLM, "/v1/completions", "vllm/completions_eos_response.json", rollout.StopToken, 7},
	} {
		c := &client{ep: Endpoint{URL: replay(t, map[string][2]string{tc.path: {"", tc.reply}}), Kind: tc.kind, Model: "policy"}, http: http.DefaultClient}
		res, err := c.generate(context.Background(), fixtureRequest.Append, fixtureRequest)
		if err != nil || res.Stop != tc.stop || len(res.IDs) != tc.n {
			t.Errorf("%s: %+v, %v; want %d tokens, stop %s", tc.reply, res, err, tc.n, tc.stop)
		}
	}
	c := &client{ep: Endpoint{URL: replay(t, map[string][2]string{"/update_weights_from_disk": {"", "sglang/update_weights_from_disk_failure.json"}}), Kind: SGLang}, http: http.DefaultClient}
	if err := c.reload(context.Background(), "/shared/policy", "v"); err == nil {
		t.Error("a failed update_weights_from_disk was taken as done")
	}
}

// TestVLLMReloadFolder: the vLLM client reads the documented GET /v1/models (the served name and
// the folder the server was started on), and a run whose weights folder is another is refused
// before its first step, naming both folders, since vLLM's reload_weights re-reads the folder it
// was started on.
func TestVLLMReloadFolder(t *testing.T) {
	reply, err := os.ReadFile(filepath.Join(fixtures, "vllm", "models_response.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/models" {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	}))
	t.Cleanup(srv.Close)
	f, err := New(Config{Endpoints: []Endpoint{{URL: srv.URL, Kind: VLLM}}, MaxLen: 256})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ResolveModels(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e := f.engines[0]; e.c.ep.Model != "policy" || e.root != "/shared/policy" {
		t.Fatalf("model %q, root %q; want policy and /shared/policy", e.c.ep.Model, e.root)
	}
	for _, tc := range []struct {
		dir  string
		want string // "" for no error
	}{
		{"/shared/policy", ""},
		{"/shared/policy/", ""},
		{"/shared/other", "was started on /shared/policy, but the policy is written into /shared/other (rollout.remote.weights_dir)"},
	} {
		err := f.CheckReloadFolders(tc.dir)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("weights folder %s: %v; want %q", tc.dir, err, tc.want)
		}
	}
}
