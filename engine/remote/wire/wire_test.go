package wire

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var fixtures = filepath.Join("..", "..", "..", "testdata", "fixtures", "engines")

// TestFixturesRoundTrip: every request and reply written from SGLang's and vLLM's documentation
// parses into its type with no field left over, and writes back as the same JSON value.
func TestFixturesRoundTrip(t *testing.T) {
	cases := map[string]func() any{
		"sglang/generate_request.json":                  func() any { return &GenerateRequest{} },
		"sglang/generate_probe_request.json":            func() any { return &GenerateRequest{} },
		"sglang/generate_response.json":                 func() any { return &GenerateResponse{} },
		"sglang/generate_eos_response.json":             func() any { return &GenerateResponse{} },
		"sglang/generate_length_response.json":          func() any { return &GenerateResponse{} },
		"sglang/generate_probe_response.json":           func() any { return &GenerateResponse{} },
		"sglang/update_weights_from_disk_request.json":  func() any { return &UpdateWeightsFromDiskRequest{} },
		"sglang/update_weights_from_disk_response.json": func() any { return &UpdateWeightsFromDiskResponse{} },
		"sglang/update_weights_from_disk_failure.json":  func() any { return &UpdateWeightsFromDiskResponse{} },
		"vllm/completions_request.json":                 func() any { return &CompletionRequest{} },
		"vllm/completions_probe_request.json":           func() any { return &CompletionRequest{} },
		"vllm/completions_response.json":                func() any { return &CompletionResponse{} },
		"vllm/completions_eos_response.json":            func() any { return &CompletionResponse{} },
		"vllm/completions_probe_response.json":          func() any { return &CompletionResponse{} },
		"vllm/collective_rpc_request.json":              func() any { return &CollectiveRPCRequest{} },
		"vllm/collective_rpc_response.json":             func() any { return &CollectiveRPCResponse{} },
		"vllm/models_response.json":                     func() any { return &ModelList{} },
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(fixtures, name))
			if err != nil {
				t.Fatal(err)
			}
			v := mk()
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("parse: %v", err)
			}
			back, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(back, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("written back as\n%s\nwant the fixture\n%s", back, data)
			}
		})
	}
}

// TestWireForms: the forms the documentation allows besides the fixtures' — stop as one string,
// a [logprob, token_id] pair, a prompt as a list of one list — and the finish reasons' parts.
func TestWireForms(t *testing.T) {
	var sp SamplingParams
	if err := json.Unmarshal([]byte(`{"stop": "</code>", "max_new_tokens": 8}`), &sp); err != nil || !reflect.DeepEqual([]string(sp.Stop), []string{"</code>"}) {
		t.Errorf("stop as a string: %v %v", sp.Stop, err)
	}
	if err := json.Unmarshal([]byte(`{"stop_words": ["x"]}`), &sp); err == nil {
		t.Error("an unknown sampling parameter was taken")
	}
	var tl TokenLogprob
	if err := json.Unmarshal([]byte(`[-0.5, 42]`), &tl); err != nil || *tl.Logprob != -0.5 || tl.TokenID != 42 || tl.Text != nil {
		t.Errorf("a pair: %+v %v", tl, err)
	}
	var q CompletionRequest
	if err := json.Unmarshal([]byte(`{"model": "m", "prompt": [[1, 2, 3]], "stop": "\n"}`), &q); err != nil {
		t.Fatal(err)
	}
	if ids, ok := q.PromptIDs(); !ok || !reflect.DeepEqual(ids, []int32{1, 2, 3}) || !reflect.DeepEqual([]string(q.Stop), []string{"\n"}) {
		t.Errorf("prompt %v %v, stop %v", ids, ok, q.Stop)
	}
	f := FinishReason{Type: "stop", Matched: json.RawMessage(`151645`)}
	if id, ok := f.MatchedToken(); !ok || id != 151645 {
		t.Errorf("matched token: %d %v", id, ok)
	}
	if _, ok := f.MatchedString(); ok {
		t.Error("a token id read as a stop string")
	}
}
