package serve

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"agentrl/engine/remote/wire"
	"agentrl/engine/rollout"
)

// The rollout-engine endpoints: a trainer's remote engines (engine/remote) generate here token
// in, token out, reload the weights it writes, and score its probe, over the APIs SGLang and
// vLLM document (engine/remote/wire), so that agentrl-tui serve processes act as a fleet of
// either. Every request is stateless: a fresh KV slot per request, released when it answers.

// engineRoute is the handler and method of an engine endpoint (nil: path is not one).
func (s *Server) engineRoute(path string) (string, func(http.ResponseWriter, *http.Request)) {
	if strings.HasPrefix(path, "/upload_weights/") {
		return http.MethodPut, s.upload
	}
	switch path {
	case "/generate":
		return http.MethodPost, s.generate
	case "/update_weights_from_disk":
		return http.MethodPost, s.updateWeights
	case "/collective_rpc":
		return http.MethodPost, s.collectiveRPC
	case "/reset_prefix_cache":
		return http.MethodPost, s.resetPrefixCache
	case "/get_model_info":
		return http.MethodGet, s.modelInfo
	case "/health":
		return http.MethodGet, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	}
	return "", nil
}

// checkKey refuses a request without Options.APIKey (when set) as its bearer key; the key is
// never echoed.
func (s *Server) checkKey(r *http.Request) error {
	if s.o.APIKey == "" {
		return nil
	}
	key, ok := bearer(r)
	if !ok || subtle.ConstantTimeCompare([]byte(key), []byte(s.o.APIKey)) != 1 {
		return unauthorized("this server takes one API key (serve --api-key, or AGENTRL_SERVE_API_KEY): send it as Authorization: Bearer KEY")
	}
	return nil
}

// engineCompletion says whether a /v1/completions body asks for vLLM's token-exact fields
// (return_token_ids or prompt_logprobs): such a request is answered statelessly (engineComplete)
// rather than as part of a key's trajectory.
func engineCompletion(body []byte) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal(body, &keys) != nil {
		return false
	}
	_, ids := keys["return_token_ids"]
	_, plp := keys["prompt_logprobs"]
	return ids || plp
}

// engineOut is one stateless request's outcome.
type engineOut struct {
	ids      []int32
	res      rollout.Result
	promptLP []float32 // the prompt's next-token log-probs, when asked: entry j is token j+1's
	latency  time.Duration
}

// engineRun samples after prompt on a fresh session (maxNew 0: nothing sampled) and, with
// promptLogprobs, scores the prompt; it holds the weights for reading throughout.
func (s *Server) engineRun(ctx context.Context, prompt []int32, maxNew int, req rollout.Request, promptLogprobs bool) (*engineOut, error) {
	for i, id := range prompt {
		if id < 0 || int(id) >= s.vocab {
			return nil, badRequest("input_ids", "input_ids[%d] is token id %d, outside the vocabulary [0, %d)", i, id, s.vocab)
		}
	}
	if len(prompt) == 0 {
		return nil, badRequest("input_ids", "the prompt is empty: send at least one token")
	}
	if len(prompt) >= s.limit {
		return nil, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "input_ids", Code: "context_length_exceeded",
			Message: fmt.Sprintf("the prompt is %d tokens and a context holds at most %d, prompt and output together: shorten it (or raise --max-total-tokens)", len(prompt), s.limit)}
	}
	start := time.Now()
	s.weights.RLock()
	defer s.weights.RUnlock()
	out := &engineOut{}
	if promptLogprobs {
		if s.o.Score == nil {
			return nil, badRequest("logprob_start_len", "this server cannot score prompts: leave prompt log-probs out")
		}
		lp, err := s.o.Score(prompt)
		if err != nil {
			return nil, serverError(http.StatusInternalServerError, "scoring the prompt: %v", err)
		}
		out.promptLP = lp
	}
	if maxNew > 0 {
		req.Append, req.MaxNew = prompt, min(maxNew, s.limit-len(prompt))
		var sess *rollout.Session
		var err error
		if s.o.Preempt {
			sess, err = s.openPreempting(ctx, nil)
		} else {
			sess, err = s.gen.Open(ctx)
		}
		if err != nil {
			return nil, s.engineInterrupted(ctx, err)
		}
		out.res, err = sess.Generate(ctx, req)
		sess.Close()
		if err != nil {
			return nil, s.engineInterrupted(ctx, err)
		}
		if out.res.Stop == rollout.StopContext {
			out.res.Stop = rollout.StopMaxNew // the clamp above: the output reached the context's end
		}
	}
	out.latency = time.Since(start)
	return out, nil
}

// engineInterrupted explains why a stateless request could not finish.
func (s *Server) engineInterrupted(ctx context.Context, err error) error {
	switch {
	case s.ctx.Err() != nil:
		return serverError(http.StatusServiceUnavailable, "the server is shutting down")
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return serverError(http.StatusServiceUnavailable, "generation failed: %v", err)
}

// seedOf is a request's seed, or one of the server's own when it gives none.
func (s *Server) seedOf(seed *uint64) uint64 {
	if seed != nil {
		return *seed
	}
	return keySeed(fmt.Sprintf("engine-%d-%d", time.Now().UnixNano(), s.nextID.Add(1)))
}

// generate answers SGLang's POST /generate for one prompt (text or input_ids).
func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	var q wire.GenerateRequest
	if err := decodeBody(r, &q); err != nil {
		writeError(w, err)
		return
	}
	sp := q.SamplingParams
	if sp == nil {
		sp = &wire.SamplingParams{}
	}
	var prompt []int32
	switch {
	case q.Text != nil && q.InputIDs != nil:
		writeError(w, badRequest("text", "give text or input_ids, not both"))
		return
	case q.Text != nil:
		prompt = s.tok.Encode(*q.Text)
	default:
		prompt = q.InputIDs
	}
	bad := func(param, format string, a ...any) bool { writeError(w, badRequest(param, format, a...)); return true }
	switch {
	case q.Stream && bad("stream", "stream is not supported by this server: leave it out (false)"):
		return
	case q.TopLogprobsNum != 0 && bad("top_logprobs_num", "top_logprobs_num %d: this server returns the sampled and prompt tokens' log-probs only (0)", q.TopLogprobsNum):
		return
	case sp.N != nil && *sp.N != 1 && bad("sampling_params.n", "n is %d: one output per request (n = 1)", *sp.N):
		return
	case !neutral(sp.FrequencyPenalty, 0) && bad("sampling_params.frequency_penalty", "penalties are not supported: leave frequency_penalty out (0)"):
		return
	case !neutral(sp.PresencePenalty, 0) && bad("sampling_params.presence_penalty", "penalties are not supported: leave presence_penalty out (0)"):
		return
	case !neutral(sp.RepetitionPenalty, 1) && bad("sampling_params.repetition_penalty", "penalties are not supported: leave repetition_penalty out (1)"):
		return
	case !neutral(sp.MinP, 0) && bad("sampling_params.min_p", "min_p is not supported: leave it out (0)"):
		return
	case sp.MinNewTokens != nil && *sp.MinNewTokens != 0 && bad("sampling_params.min_new_tokens", "min_new_tokens is not supported: leave it out (0)"):
		return
	}
	maxNew := 128 // SGLang's default
	if sp.MaxNewTokens != nil {
		maxNew = *sp.MaxNewTokens
	}
	if maxNew < 0 {
		writeError(w, badRequest("sampling_params.max_new_tokens", "max_new_tokens is %d: want 0 or more", maxNew))
		return
	}
	samp, err := s.engineSampling(sp.Temperature, sp.TopP, sp.TopK, "sampling_params.")
	if err != nil {
		writeError(w, err)
		return
	}
	samp.Seed = s.seedOf(sp.SamplingSeed)
	req := rollout.Request{Sampling: samp, StopStrings: sp.Stop, StopIDs: sp.StopTokenIDs}
	if !sp.IgnoreEOS {
		req.StopIDs = append(append([]int32{}, s.o.StopIDs...), sp.StopTokenIDs...)
	}
	start := -1
	if q.LogprobStartLen != nil {
		start = *q.LogprobStartLen
	}
	if start >= len(prompt) && q.ReturnLogprob {
		writeError(w, badRequest("logprob_start_len", "logprob_start_len %d is past the prompt's %d tokens", start, len(prompt)))
		return
	}
	out, err := s.engineRun(r.Context(), prompt, maxNew, req, q.ReturnLogprob && start >= 0)
	if err != nil {
		writeError(w, err)
		return
	}
	skip := sp.SkipSpecialTokens == nil || *sp.SkipSpecialTokens
	text := s.tok.Decode(out.res.IDs, skip)
	if out.res.Stop == rollout.StopString && !sp.NoStopTrim {
		if i := strings.LastIndex(text, out.res.Matched); i >= 0 {
			text = text[:i]
		}
	}
	id := q.RID
	if id == "" {
		id = s.newID("gen")
	}
	meta := wire.MetaInfo{ID: id, PromptTokens: len(prompt), CompletionTokens: len(out.res.IDs), E2ELatency: out.latency.Seconds(),
		WeightVersion: s.weightVersion()}
	switch out.res.Stop {
	case rollout.StopToken:
		meta.FinishReason = &wire.FinishReason{Type: "stop", Matched: mustJSON(out.res.IDs[len(out.res.IDs)-1])}
	case rollout.StopString:
		meta.FinishReason = &wire.FinishReason{Type: "stop", Matched: mustJSON(out.res.Matched)}
	default: // max_new_tokens (0 included) or the context's end
		n := len(out.res.IDs)
		meta.FinishReason = &wire.FinishReason{Type: "length", Length: &n}
	}
	if q.ReturnLogprob {
		piece := func(id int32) *string {
			if !q.ReturnTextInLogprobs {
				return nil
			}
			t := s.tok.Decode([]int32{id}, false)
			return &t
		}
		meta.OutputTokenLogprobs = []wire.TokenLogprob{}
		for i, id := range out.res.IDs {
			lp := float64(out.res.LogProbs[i])
			meta.OutputTokenLogprobs = append(meta.OutputTokenLogprobs, wire.TokenLogprob{Logprob: &lp, TokenID: id, Text: piece(id)})
		}
		if start >= 0 {
			for j := start; j < len(prompt); j++ {
				t := wire.TokenLogprob{TokenID: prompt[j], Text: piece(prompt[j])}
				if j > 0 {
					lp := float64(out.promptLP[j-1])
					t.Logprob = &lp
				}
				meta.InputTokenLogprobs = append(meta.InputTokenLogprobs, t)
			}
		}
	}
	ids := out.res.IDs
	if ids == nil {
		ids = []int32{}
	}
	writeJSON(w, http.StatusOK, wire.GenerateResponse{Text: text, OutputIDs: ids, MetaInfo: meta})
}

// neutral says whether an optional penalty is unset or at its neutral value.
func neutral(v *float32, want float32) bool { return v == nil || *v == want }

// engineSampling resolves an engine request's temperature, top_p and top_k (−1 or 0: off) with
// the server's compiled sampler; prefix names the fields in errors.
func (s *Server) engineSampling(temp, topP *float32, topK *int, prefix string) (rollout.Sampling, error) {
	p := Sampling{Temperature: 1, TopP: 1}
	if temp != nil {
		p.Temperature = *temp
	}
	if topP != nil {
		p.TopP = *topP
	}
	if topK != nil && *topK > 0 {
		p.TopK = *topK
	}
	if topK != nil && *topK < -1 {
		return rollout.Sampling{}, badRequest(prefix+"top_k", "%stop_k is %d: want −1 or 0 (off) or at least 1", prefix, *topK)
	}
	if err := s.checkSampling(p, strings.TrimSuffix(prefix, ".")); err != nil {
		return rollout.Sampling{}, err
	}
	return rollout.Sampling{Temperature: p.Temperature, TopP: p.TopP, TopK: p.TopK}, nil
}

// weightVersion is the label of the weights served: the last update's weight_version, else "default".
func (s *Server) weightVersion() string {
	if v, ok := s.version.Load().(string); ok {
		return v
	}
	return "default"
}

// reload loads the weights in dir, once every request in flight has answered (new ones wait),
// and drops the KV caches of idle trajectories (computed under the old weights).
func (s *Server) reload(dir, version string) error {
	if s.o.Reload == nil {
		return badRequest("model_path", "this server cannot reload weights")
	}
	s.weights.Lock()
	defer s.weights.Unlock()
	if err := s.o.Reload(dir); err != nil {
		return err
	}
	if err := s.pruneUploads(dir); err != nil {
		return err
	}
	if version != "" {
		s.version.Store(version)
	}
	s.reloads.Add(1)
	for s.evictIdle(nil) {
	}
	return nil
}

// updateWeights answers SGLang's POST /update_weights_from_disk.
func (s *Server) updateWeights(w http.ResponseWriter, r *http.Request) {
	var q wire.UpdateWeightsFromDiskRequest
	if err := decodeBody(r, &q); err != nil {
		writeError(w, err)
		return
	}
	if q.ModelPath == "" {
		writeJSON(w, http.StatusBadRequest, wire.UpdateWeightsFromDiskResponse{Message: "model_path is required: the folder of the new weights"})
		return
	}
	if q.LoadFormat != nil && *q.LoadFormat != "" && *q.LoadFormat != "auto" && *q.LoadFormat != "safetensors" {
		writeJSON(w, http.StatusBadRequest, wire.UpdateWeightsFromDiskResponse{Message: fmt.Sprintf("load_format %q: this server loads safetensors only", *q.LoadFormat)})
		return
	}
	version := ""
	if q.WeightVersion != nil {
		version = *q.WeightVersion
	}
	if err := s.reload(q.ModelPath, version); err != nil {
		writeJSON(w, http.StatusBadRequest, wire.UpdateWeightsFromDiskResponse{Message: fmt.Sprintf("Failed to update weights: %v", err)})
		return
	}
	writeJSON(w, http.StatusOK, wire.UpdateWeightsFromDiskResponse{Success: true, Message: "Succeeded to update model weights."})
}

// collectiveRPC answers vLLM's dev-mode POST /collective_rpc for reload_weights: the weights
// are read again from the folder the server was started on (Options.ModelPath).
func (s *Server) collectiveRPC(w http.ResponseWriter, r *http.Request) {
	var q wire.CollectiveRPCRequest
	if err := decodeBody(r, &q); err != nil {
		writeError(w, err)
		return
	}
	if q.Method != "reload_weights" {
		writeError(w, badRequest("method", "method %q is not supported here: only reload_weights (from the served folder)", q.Method))
		return
	}
	if s.o.ModelPath == "" {
		writeError(w, badRequest("method", "reload_weights needs the folder the server was started on, and this one serves a copy: start it with --model DIR"))
		return
	}
	if err := s.reload(s.o.ModelPath, ""); err != nil {
		writeError(w, serverError(http.StatusInternalServerError, "reload_weights: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, wire.CollectiveRPCResponse{Results: []any{nil}})
}

// resetPrefixCache answers vLLM's dev-mode POST /reset_prefix_cache: idle trajectories give
// their KV slots back.
func (s *Server) resetPrefixCache(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxBody))
	for s.evictIdle(nil) {
	}
	w.WriteHeader(http.StatusOK)
}

// modelInfo answers SGLang's GET /get_model_info.
func (s *Server) modelInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"model_path": s.o.ModelPath, "tokenizer_path": s.o.ModelPath, "is_generation": true,
		"weight_version": s.weightVersion(), "served_model_name": s.o.ModelName})
}

// engineComplete answers vLLM's /v1/completions with its token-exact fields, statelessly.
func (s *Server) engineComplete(w http.ResponseWriter, r *http.Request, body []byte) {
	var q wire.CompletionRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		writeError(w, jsonError(err))
		return
	}
	if err := s.checkModel(q.Model); err != nil {
		writeError(w, err)
		return
	}
	prompt, ok := q.PromptIDs()
	if !ok {
		var text string
		if json.Unmarshal(q.Prompt, &text) != nil || text == "" {
			writeError(w, badRequest("prompt", "prompt must be one string or one list of token ids"))
			return
		}
		prompt = s.tok.Encode(text)
	}
	bad := func(param, format string, a ...any) bool { writeError(w, badRequest(param, format, a...)); return true }
	switch {
	case q.Stream && bad("stream", "stream is not supported with return_token_ids or prompt_logprobs here: leave it out"):
		return
	case q.Echo && bad("echo", "echo is not supported: prompt_logprobs gives the prompt's log-probs"):
		return
	case q.N != nil && *q.N != 1 && bad("n", "n is %d: one output per request", *q.N):
		return
	case q.Logprobs != nil && *q.Logprobs > 0 && bad("logprobs", "logprobs %d: this server returns the sampled token's log-prob only (logprobs 0)", *q.Logprobs):
		return
	case q.PromptLogprobs != nil && *q.PromptLogprobs > 0 && bad("prompt_logprobs", "prompt_logprobs %d: this server returns each prompt token's own log-prob only (0)", *q.PromptLogprobs):
		return
	case (!neutral(q.FrequencyPenalty, 0) || !neutral(q.PresencePenalty, 0) || !neutral(q.RepetitionPenalty, 1)) && bad("frequency_penalty", "penalties are not supported: leave them out"):
		return
	case (!neutral(q.MinP, 0) || q.MinTokens != 0 || q.TruncatePromptTokens != nil) && bad("min_p", "min_p, min_tokens and truncate_prompt_tokens are not supported: leave them out"):
		return
	}
	maxNew := 16 // OpenAI's and vLLM's default
	if q.MaxTokens != nil {
		maxNew = *q.MaxTokens
	}
	if maxNew < 1 {
		writeError(w, badRequest("max_tokens", "max_tokens is %d: want at least 1", maxNew))
		return
	}
	samp, err := s.engineSampling(q.Temperature, q.TopP, q.TopK, "")
	if err != nil {
		writeError(w, err)
		return
	}
	var seed *uint64
	if q.Seed != nil {
		v := uint64(*q.Seed)
		seed = &v
	}
	samp.Seed = s.seedOf(seed)
	req := rollout.Request{Sampling: samp, StopStrings: q.Stop, StopIDs: q.StopTokenIDs}
	if !q.IgnoreEOS {
		req.StopIDs = append(append([]int32{}, s.o.StopIDs...), q.StopTokenIDs...)
	}
	out, err := s.engineRun(r.Context(), prompt, maxNew, req, q.PromptLogprobs != nil)
	if err != nil {
		writeError(w, err)
		return
	}
	res := out.res
	skip := q.SkipSpecialTokens == nil || *q.SkipSpecialTokens
	text := s.tok.Decode(res.IDs, skip)
	ch := wire.CompletionChoice{Text: text, StopReason: json.RawMessage("null")}
	finish := "length"
	switch res.Stop {
	case rollout.StopString:
		finish, ch.StopReason = "stop", mustJSON(res.Matched)
		if !q.IncludeStopStrInOutput {
			if i := strings.LastIndex(text, res.Matched); i >= 0 {
				ch.Text = text[:i]
			}
		}
	case rollout.StopToken:
		finish = "stop"
		if last := res.IDs[len(res.IDs)-1]; containsID(q.StopTokenIDs, last) {
			ch.StopReason = mustJSON(last)
		}
	}
	ch.FinishReason = &finish
	if q.Logprobs != nil {
		lp := &wire.CompletionLogprobs{TextOffset: []int{}, TokenLogprobs: []*float64{}, Tokens: []string{}, TopLogprobs: []map[string]float64{}}
		off := 0
		for i, id := range res.IDs {
			tok := s.tok.Decode([]int32{id}, false)
			name := tok
			if q.ReturnTokensAsTokenIDs {
				name = fmt.Sprintf("token_id:%d", id)
			}
			v := float64(res.LogProbs[i])
			lp.TextOffset = append(lp.TextOffset, off)
			lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
			lp.Tokens = append(lp.Tokens, name)
			lp.TopLogprobs = append(lp.TopLogprobs, map[string]float64{name: v})
			off += len(tok)
		}
		ch.Logprobs = lp
	}
	if q.ReturnTokenIDs {
		ch.TokenIDs, ch.PromptTokenIDs = append([]int32{}, res.IDs...), prompt
	}
	if q.PromptLogprobs != nil {
		ch.PromptLogprobs = make([]map[string]*wire.Logprob, len(prompt))
		for j := 1; j < len(prompt); j++ {
			piece := s.tok.Decode(prompt[j:j+1], false)
			ch.PromptLogprobs[j] = map[string]*wire.Logprob{fmt.Sprint(prompt[j]): {Logprob: float64(out.promptLP[j-1]), DecodedToken: &piece}}
		}
	}
	writeJSON(w, http.StatusOK, wire.CompletionResponse{ID: s.newID("cmpl"), Object: "text_completion", Created: time.Now().Unix(), Model: s.o.ModelName,
		Choices: []wire.CompletionChoice{ch}, Usage: wire.Usage{PromptTokens: len(prompt), CompletionTokens: len(res.IDs), TotalTokens: len(prompt) + len(res.IDs)}})
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
