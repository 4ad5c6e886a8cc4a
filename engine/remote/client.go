package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"agentrl/engine/remote/wire"
	"agentrl/engine/rollout"
)

// Kind is the protocol an engine speaks.
type Kind string

// The engine kinds: SGLang's native API, vLLM's OpenAI-compatible one with its extensions, and
// this project's serve command (SGLang's protocol, with the full 64-bit sampling seed).
const (
	SGLang Kind = "sglang"
	VLLM   Kind = "vllm"
	Serve  Kind = "serve"
)

// Kinds lists the kinds, for errors and help.
var Kinds = []Kind{SGLang, VLLM, Serve}

// Endpoint is one inference server.
type Endpoint struct {
	URL    string // base URL: http://HOST:PORT, without /v1 (a trailing /v1 is dropped)
	Kind   Kind
	APIKey string // sent as Authorization: Bearer KEY; "" sends none
	// Model is the model name a vLLM server serves (its --served-model-name), sent as model;
	// "" asks GET /v1/models once.
	Model string
	// Upload sends the weights' files over HTTP before each reload (serve only: PUT
	// /upload_weights), for a server that cannot read the trainer's folder.
	Upload bool
}

// probe is what a server answered for a probe: the prompt's token ids as it tokenised them
// (nil when the probe was ids) and each prompt token's log-prob (entry 0 is NaN), and the
// weight version it reports ("" when it reports none).
type probe struct {
	IDs           []int32
	LogProbs      []float64
	WeightVersion string
}

// client speaks one endpoint's protocol.
type client struct {
	ep   Endpoint
	http *http.Client
}

// errStatus is a reply with an HTTP error status: the request reached a live server that refused it.
type errStatus struct {
	status int
	msg    string
}

func (e *errStatus) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.msg) }

// statusError is a reply's error status with its message (the error object's, else the body's).
func statusError(status int, data []byte) *errStatus {
	var e wire.ErrorResponse
	msg := strings.TrimSpace(string(data))
	if json.Unmarshal(data, &e) == nil && e.Text() != "" {
		msg = e.Text()
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return &errStatus{status: status, msg: msg}
}

// request is a request to the server's path with the endpoint's key, if any.
func (c *client) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.ep.URL+path, body)
	if err != nil {
		return nil, err
	}
	if c.ep.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.ep.APIKey)
	}
	return req, nil
}

// post sends body as JSON to path and decodes the reply into out (nil: the reply is ignored).
func (c *client) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := c.request(ctx, http.MethodPost, path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("reading the reply of %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		return statusError(resp.StatusCode, data)
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("the reply of %s is not what %s documents: %w", path, c.ep.Kind, err)
	}
	return nil
}

// seed is the sampling seed sent: SGLang and vLLM take a signed 64-bit one, this project's
// server the generator's own 64 bits.
func (c *client) seed(s uint64) uint64 {
	if c.ep.Kind == Serve {
		return s
	}
	return s & math.MaxInt64
}

// generate samples after input as req says (req.Append is already in input).
func (c *client) generate(ctx context.Context, input []int32, req rollout.Request) (rollout.Result, error) {
	if c.ep.Kind == VLLM {
		return c.generateVLLM(ctx, input, req)
	}
	sp := &wire.SamplingParams{MaxNewTokens: &req.MaxNew, Stop: req.StopStrings, StopTokenIDs: req.StopIDs,
		Temperature: &req.Sampling.Temperature, NoStopTrim: true, SkipSpecialTokens: ptr(false)}
	seed := c.seed(req.Sampling.Seed)
	sp.SamplingSeed = &seed
	if req.Sampling.TopP > 0 && req.Sampling.TopP < 1 {
		sp.TopP = &req.Sampling.TopP
	}
	topK := -1
	if req.Sampling.TopK > 0 {
		topK = req.Sampling.TopK
	}
	sp.TopK = &topK
	var resp wire.GenerateResponse
	if err := c.post(ctx, "/generate", wire.GenerateRequest{InputIDs: input, SamplingParams: sp, ReturnLogprob: true}, &resp); err != nil {
		return rollout.Result{}, err
	}
	m := resp.MetaInfo
	if len(m.OutputTokenLogprobs) == 0 && len(resp.OutputIDs) > 0 {
		return rollout.Result{}, wire.ErrNoLogprobs
	}
	var res rollout.Result
	for _, t := range m.OutputTokenLogprobs {
		if t.Logprob == nil {
			return rollout.Result{}, fmt.Errorf("output token %d has a null log-prob", t.TokenID)
		}
		res.IDs = append(res.IDs, t.TokenID)
		res.LogProbs = append(res.LogProbs, float32(*t.Logprob))
	}
	if resp.OutputIDs != nil && !equalIDs(resp.OutputIDs, res.IDs) {
		return rollout.Result{}, fmt.Errorf("output_ids (%d tokens) disagree with output_token_logprobs (%d)", len(resp.OutputIDs), len(res.IDs))
	}
	f := m.FinishReason
	if f == nil {
		return rollout.Result{}, errors.New("the reply has no finish_reason")
	}
	matched, isString := f.MatchedString()
	var ok bool
	if res.Stop, res.Matched, ok = stopOf(f.Type, matched, isString); !ok {
		return rollout.Result{}, fmt.Errorf("the request ended with finish_reason %s: %s", f.Type, f.Message)
	}
	return res, nil
}

// stopOf is the generator's stop reason for a server's finish reason: "stop" at a stop string
// (isString, the string matched) or at a stop token, "length" at the new-token bound; ok false
// for any other.
func stopOf(reason, matched string, isString bool) (rollout.StopReason, string, bool) {
	switch reason {
	case "stop":
		if isString {
			return rollout.StopString, matched, true
		}
		return rollout.StopToken, "", true
	case "length":
		return rollout.StopMaxNew, "", true
	}
	return "", "", false
}

// generateVLLM is generate on vLLM's /v1/completions: a token-id prompt, the sampled ids
// (return_token_ids) and their log-probs (logprobs), stop strings kept in the output.
func (c *client) generateVLLM(ctx context.Context, input []int32, req rollout.Request) (rollout.Result, error) {
	prompt, _ := json.Marshal(input)
	seed := int64(c.seed(req.Sampling.Seed))
	topK := -1
	if req.Sampling.TopK > 0 {
		topK = req.Sampling.TopK
	}
	q := wire.CompletionRequest{Model: c.ep.Model, Prompt: prompt, MaxTokens: &req.MaxNew, Temperature: &req.Sampling.Temperature, TopK: &topK,
		Seed: &seed, Stop: req.StopStrings, StopTokenIDs: req.StopIDs, IncludeStopStrInOutput: true, SkipSpecialTokens: ptr(false),
		Logprobs: ptr(0), ReturnTokenIDs: true}
	if req.Sampling.TopP > 0 && req.Sampling.TopP < 1 {
		q.TopP = &req.Sampling.TopP
	}
	var resp wire.CompletionResponse
	if err := c.post(ctx, "/v1/completions", q, &resp); err != nil {
		return rollout.Result{}, err
	}
	if len(resp.Choices) != 1 {
		return rollout.Result{}, fmt.Errorf("the reply has %d choices, want 1", len(resp.Choices))
	}
	ch := resp.Choices[0]
	if ch.TokenIDs == nil {
		return rollout.Result{}, errors.New("the reply has no token_ids: the server does not take return_token_ids (vLLM 0.10.2 or later does)")
	}
	if ch.Logprobs == nil || len(ch.Logprobs.TokenLogprobs) != len(ch.TokenIDs) {
		return rollout.Result{}, wire.ErrNoLogprobs
	}
	res := rollout.Result{IDs: ch.TokenIDs}
	for i, lp := range ch.Logprobs.TokenLogprobs {
		if lp == nil {
			return rollout.Result{}, fmt.Errorf("output token %d has a null log-prob", ch.TokenIDs[i])
		}
		res.LogProbs = append(res.LogProbs, float32(*lp))
	}
	finish := ""
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	matched, isString := ch.StopString()
	var ok bool
	if res.Stop, res.Matched, ok = stopOf(finish, matched, isString); !ok {
		return rollout.Result{}, fmt.Errorf("the request ended with finish_reason %q", finish)
	}
	return res, nil
}

// probe scores a prompt on the server: its token ids (text given: as the server tokenises it)
// and the log-prob of each prompt token after the ones before it.
func (c *client) probe(ctx context.Context, ids []int32, text string) (probe, error) {
	if c.ep.Kind == VLLM {
		return c.probeVLLM(ctx, ids, text)
	}
	q := wire.GenerateRequest{SamplingParams: &wire.SamplingParams{MaxNewTokens: ptr(0), Temperature: ptr[float32](0)}, ReturnLogprob: true, LogprobStartLen: ptr(0)}
	if text != "" {
		q.Text = &text
	} else {
		q.InputIDs = ids
	}
	var resp wire.GenerateResponse
	if err := c.post(ctx, "/generate", q, &resp); err != nil {
		return probe{}, err
	}
	p := probe{WeightVersion: resp.MetaInfo.WeightVersion}
	for i, t := range resp.MetaInfo.InputTokenLogprobs {
		p.IDs = append(p.IDs, t.TokenID)
		switch {
		case t.Logprob != nil:
			p.LogProbs = append(p.LogProbs, *t.Logprob)
		case i == 0:
			p.LogProbs = append(p.LogProbs, math.NaN())
		default:
			return probe{}, fmt.Errorf("prompt token %d (position %d) has a null log-prob", t.TokenID, i)
		}
	}
	if len(p.IDs) == 0 {
		return probe{}, errors.New("the reply has no input_token_logprobs (return_logprob with logprob_start_len 0)")
	}
	return p, nil
}

// probeVLLM is probe on vLLM: prompt_logprobs with one token generated (vLLM generates at least one).
func (c *client) probeVLLM(ctx context.Context, ids []int32, text string) (probe, error) {
	prompt, _ := json.Marshal(ids)
	if text != "" {
		prompt, _ = json.Marshal(text)
	}
	q := wire.CompletionRequest{Model: c.ep.Model, Prompt: prompt, MaxTokens: ptr(1), Temperature: ptr[float32](0), PromptLogprobs: ptr(0), ReturnTokenIDs: true}
	var resp wire.CompletionResponse
	if err := c.post(ctx, "/v1/completions", q, &resp); err != nil {
		return probe{}, err
	}
	if len(resp.Choices) != 1 {
		return probe{}, fmt.Errorf("the reply has %d choices, want 1", len(resp.Choices))
	}
	ch := resp.Choices[0]
	if ch.PromptTokenIDs == nil || len(ch.PromptLogprobs) != len(ch.PromptTokenIDs) {
		return probe{}, errors.New("the reply has no prompt_token_ids and prompt_logprobs of the same length (return_token_ids, prompt_logprobs)")
	}
	p := probe{IDs: ch.PromptTokenIDs}
	for i, entry := range ch.PromptLogprobs {
		if entry == nil {
			if i != 0 {
				return probe{}, fmt.Errorf("prompt position %d has no log-prob", i)
			}
			p.LogProbs = append(p.LogProbs, math.NaN())
			continue
		}
		lp, ok := entry[fmt.Sprint(ch.PromptTokenIDs[i])]
		if !ok || lp == nil {
			return probe{}, fmt.Errorf("prompt position %d has no log-prob for its own token %d", i, ch.PromptTokenIDs[i])
		}
		p.LogProbs = append(p.LogProbs, lp.Logprob)
	}
	return p, nil
}

// reload asks the server to load the weights in dir (SGLang, serve: update_weights_from_disk
// with version; vLLM: collective_rpc reload_weights from the folder it was started on, then a
// prefix-cache reset).
func (c *client) reload(ctx context.Context, dir, version string) error {
	if c.ep.Kind == VLLM {
		var r wire.CollectiveRPCResponse
		if err := c.post(ctx, "/collective_rpc", wire.CollectiveRPCRequest{Method: "reload_weights"}, &r); err != nil {
			return fmt.Errorf("collective_rpc reload_weights: %w", err)
		}
		if err := c.post(ctx, "/reset_prefix_cache", struct{}{}, nil); err != nil {
			return fmt.Errorf("reset_prefix_cache: %w", err)
		}
		return nil
	}
	if c.ep.Upload {
		var err error
		if dir, err = c.upload(ctx, dir, version); err != nil {
			return err
		}
	}
	var r wire.UpdateWeightsFromDiskResponse
	if err := c.post(ctx, "/update_weights_from_disk", wire.UpdateWeightsFromDiskRequest{ModelPath: dir, WeightVersion: &version, FlushCache: ptr(true)}, &r); err != nil {
		return fmt.Errorf("update_weights_from_disk: %w", err)
	}
	if !r.Success {
		return fmt.Errorf("update_weights_from_disk %s: %s", dir, r.Message)
	}
	return nil
}

// model asks a vLLM server for the model it serves (GET /v1/models): its name, and the folder
// it was started on ("" when it does not say).
func (c *client) model(ctx context.Context) (id, root string, err error) {
	req, err := c.request(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil {
		return "", "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", "", &errStatus{status: resp.StatusCode, msg: "GET /v1/models"}
	}
	var list wire.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) == 0 {
		return "", "", fmt.Errorf("GET /v1/models lists no model: give the engine's model name")
	}
	m := list.Data[0]
	if m.Root != nil {
		root = *m.Root
	}
	return m.ID, root, nil
}

func ptr[T any](v T) *T { return &v }

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
