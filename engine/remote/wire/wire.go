// Package wire is the JSON the rollout engines speak, as SGLang and vLLM document it: SGLang's
// native /generate and /update_weights_from_disk, vLLM's /v1/completions with its token-id
// extensions and /collective_rpc. The remote engines' clients (engine/remote) send these and
// the serve command's engine endpoints (engine/serve) answer them, so that a fleet of
// agentrl-tui serve processes stands in for SGLang or vLLM servers in tests.
//
// Requests leave unset fields out (pointers and omitempty), so that a server's own defaults
// apply; responses carry every documented field, null where the server has no value.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// GenerateRequest is SGLang's POST /generate body (io_struct.py GenerateReqInput) for one prompt.
type GenerateRequest struct {
	Text           *string         `json:"text,omitempty"`
	InputIDs       []int32         `json:"input_ids,omitempty"`
	SamplingParams *SamplingParams `json:"sampling_params,omitempty"`
	ReturnLogprob  bool            `json:"return_logprob,omitempty"`
	// LogprobStartLen is where in the prompt log-probs start (with ReturnLogprob); SGLang's
	// default −1 returns the output tokens' only.
	LogprobStartLen      *int   `json:"logprob_start_len,omitempty"`
	TopLogprobsNum       int    `json:"top_logprobs_num,omitempty"`
	ReturnTextInLogprobs bool   `json:"return_text_in_logprobs,omitempty"`
	Stream               bool   `json:"stream,omitempty"`
	RID                  string `json:"rid,omitempty"`
}

// SamplingParams is SGLang's sampling_params (sampling_params.py SamplingParams).
type SamplingParams struct {
	MaxNewTokens *int     `json:"max_new_tokens,omitempty"` // SGLang's default 128
	Stop         Stop     `json:"stop,omitempty"`           // a string or a list on the wire
	StopTokenIDs []int32  `json:"stop_token_ids,omitempty"`
	Temperature  *float32 `json:"temperature,omitempty"`
	TopP         *float32 `json:"top_p,omitempty"`
	TopK         *int     `json:"top_k,omitempty"` // −1: the whole vocabulary
	MinP         *float32 `json:"min_p,omitempty"`
	// Penalties: accepted at their neutral values only by this project's server.
	FrequencyPenalty  *float32 `json:"frequency_penalty,omitempty"`
	PresencePenalty   *float32 `json:"presence_penalty,omitempty"`
	RepetitionPenalty *float32 `json:"repetition_penalty,omitempty"`
	MinNewTokens      *int     `json:"min_new_tokens,omitempty"`
	N                 *int     `json:"n,omitempty"`
	IgnoreEOS         bool     `json:"ignore_eos,omitempty"`
	SkipSpecialTokens *bool    `json:"skip_special_tokens,omitempty"`
	NoStopTrim        bool     `json:"no_stop_trim,omitempty"`
	// SamplingSeed seeds the request's random stream (SGLang's deterministic sampling).
	SamplingSeed *uint64 `json:"sampling_seed,omitempty"`
}

// UnmarshalJSON refuses unknown fields, as the server does.
func (p *SamplingParams) UnmarshalJSON(b []byte) error {
	type plain SamplingParams
	if err := strict(b, (*plain)(p)); err != nil {
		return fmt.Errorf("sampling_params: %w", err)
	}
	return nil
}

// Stop is a request's stop: a JSON string, a list of strings, or null (OpenAI's, SGLang's and
// vLLM's form); anything else is a json.UnmarshalTypeError on the field stop.
type Stop []string

func (s *Stop) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*s = Stop{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return &json.UnmarshalTypeError{Value: "stop", Field: "stop"}
	}
	*s = many
	return nil
}

// strict decodes b into v, refusing unknown fields.
func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// GenerateResponse is SGLang's /generate reply for one prompt.
type GenerateResponse struct {
	Text      string   `json:"text"`
	OutputIDs []int32  `json:"output_ids"`
	MetaInfo  MetaInfo `json:"meta_info"`
}

// MetaInfo is a /generate reply's meta_info.
type MetaInfo struct {
	ID               string        `json:"id"`
	FinishReason     *FinishReason `json:"finish_reason"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	CachedTokens     int           `json:"cached_tokens"`
	E2ELatency       float64       `json:"e2e_latency"`
	// WeightVersion is the label the last update_weights_from_disk gave ("default" before any).
	WeightVersion string `json:"weight_version,omitempty"`
	// InputTokenLogprobs are the prompt's from logprob_start_len (the first prompt token's
	// log-prob is null); OutputTokenLogprobs the sampled tokens'. Present with return_logprob.
	InputTokenLogprobs  []TokenLogprob `json:"input_token_logprobs,omitempty"`
	OutputTokenLogprobs []TokenLogprob `json:"output_token_logprobs,omitempty"`
}

// FinishReason is SGLang's finish_reason: {"type": "stop", "matched": TOKEN_ID or "STRING"},
// {"type": "length", "length": N} or {"type": "abort", "message": …}.
type FinishReason struct {
	Type    string          `json:"type"`
	Matched json.RawMessage `json:"matched,omitempty"`
	Length  *int            `json:"length,omitempty"` // with type length: the tokens generated
	Message string          `json:"message,omitempty"`
}

// MatchedToken is the stop token id that ended the reply (ok false when a string, or nothing, did).
func (f *FinishReason) MatchedToken() (int32, bool) {
	var id int32
	if f == nil || len(f.Matched) == 0 || json.Unmarshal(f.Matched, &id) != nil {
		return 0, false
	}
	return id, true
}

// MatchedString is the stop string that ended the reply (ok false when a token, or nothing, did).
func (f *FinishReason) MatchedString() (string, bool) {
	var s string
	if f == nil || len(f.Matched) == 0 || json.Unmarshal(f.Matched, &s) != nil {
		return "", false
	}
	return s, true
}

// TokenLogprob is SGLang's [logprob, token_id, text] triple: logprob null for the first prompt
// token (nothing precedes it), text null unless return_text_in_logprobs.
type TokenLogprob struct {
	Logprob *float64
	TokenID int32
	Text    *string
}

// MarshalJSON writes the triple.
func (t TokenLogprob) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{t.Logprob, t.TokenID, t.Text})
}

// UnmarshalJSON reads a triple (or the [logprob, token_id] pair some versions send).
func (t *TokenLogprob) UnmarshalJSON(b []byte) error {
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) < 2 || len(parts) > 3 {
		return fmt.Errorf("a token log-prob is [logprob, token_id, text], not %s", b)
	}
	*t = TokenLogprob{}
	if err := json.Unmarshal(parts[0], &t.Logprob); err != nil {
		return fmt.Errorf("token log-prob %s: logprob: %w", b, err)
	}
	if err := json.Unmarshal(parts[1], &t.TokenID); err != nil {
		return fmt.Errorf("token log-prob %s: token_id: %w", b, err)
	}
	if len(parts) == 3 {
		if err := json.Unmarshal(parts[2], &t.Text); err != nil {
			return fmt.Errorf("token log-prob %s: text: %w", b, err)
		}
	}
	return nil
}

// UpdateWeightsFromDiskRequest is SGLang's POST /update_weights_from_disk body.
type UpdateWeightsFromDiskRequest struct {
	ModelPath        string  `json:"model_path"`
	LoadFormat       *string `json:"load_format,omitempty"`
	AbortAllRequests bool    `json:"abort_all_requests,omitempty"`
	WeightVersion    *string `json:"weight_version,omitempty"`
	IsAsync          bool    `json:"is_async,omitempty"`
	TorchEmptyCache  bool    `json:"torch_empty_cache,omitempty"`
	KeepPause        bool    `json:"keep_pause,omitempty"`
	RecaptureGraph   bool    `json:"recapture_cuda_graph,omitempty"`
	TokenStep        int     `json:"token_step,omitempty"`
	FlushCache       *bool   `json:"flush_cache,omitempty"`
}

// UpdateWeightsFromDiskResponse is its reply.
type UpdateWeightsFromDiskResponse struct {
	Success           bool   `json:"success"`
	Message           string `json:"message"`
	NumPausedRequests int    `json:"num_paused_requests"`
}

// CompletionRequest is vLLM's POST /v1/completions body with the extensions a token-exact
// rollout uses (return_token_ids, prompt_logprobs, stop_token_ids, include_stop_str_in_output).
type CompletionRequest struct {
	Model                  string          `json:"model"`
	Prompt                 json.RawMessage `json:"prompt"` // token ids or a string
	MaxTokens              *int            `json:"max_tokens,omitempty"`
	Temperature            *float32        `json:"temperature,omitempty"`
	TopP                   *float32        `json:"top_p,omitempty"`
	TopK                   *int            `json:"top_k,omitempty"` // −1 or 0: off
	Seed                   *int64          `json:"seed,omitempty"`
	N                      *int            `json:"n,omitempty"`
	Stop                   Stop            `json:"stop,omitempty"`
	StopTokenIDs           []int32         `json:"stop_token_ids,omitempty"`
	IncludeStopStrInOutput bool            `json:"include_stop_str_in_output,omitempty"`
	IgnoreEOS              bool            `json:"ignore_eos,omitempty"`
	SkipSpecialTokens      *bool           `json:"skip_special_tokens,omitempty"`
	Logprobs               *int            `json:"logprobs,omitempty"`
	PromptLogprobs         *int            `json:"prompt_logprobs,omitempty"`
	ReturnTokenIDs         bool            `json:"return_token_ids,omitempty"`
	ReturnTokensAsTokenIDs bool            `json:"return_tokens_as_token_ids,omitempty"`
	Echo                   bool            `json:"echo,omitempty"`
	Stream                 bool            `json:"stream,omitempty"`
	User                   string          `json:"user,omitempty"`
	SpacesBetweenSpecial   *bool           `json:"spaces_between_special_tokens,omitempty"`
	AddSpecialTokens       *bool           `json:"add_special_tokens,omitempty"`
	RequestID              string          `json:"request_id,omitempty"`
	TruncatePromptTokens   *int            `json:"truncate_prompt_tokens,omitempty"`
	FrequencyPenalty       *float32        `json:"frequency_penalty,omitempty"`
	PresencePenalty        *float32        `json:"presence_penalty,omitempty"`
	RepetitionPenalty      *float32        `json:"repetition_penalty,omitempty"`
	MinTokens              int             `json:"min_tokens,omitempty"`
	MinP                   *float32        `json:"min_p,omitempty"`
}

// UnmarshalJSON refuses unknown fields, as the server does.
func (r *CompletionRequest) UnmarshalJSON(b []byte) error {
	type plain CompletionRequest
	return strict(b, (*plain)(r))
}

// PromptIDs reads a token-id prompt (one list, or a list of one list); ok false for a text one.
func (r *CompletionRequest) PromptIDs() (ids []int32, ok bool) {
	if json.Unmarshal(r.Prompt, &ids) == nil && ids != nil {
		return ids, true
	}
	var lists [][]int32
	if json.Unmarshal(r.Prompt, &lists) == nil && len(lists) == 1 {
		return lists[0], true
	}
	return nil, false
}

// CompletionResponse is vLLM's /v1/completions reply.
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"` // text_completion
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   Usage              `json:"usage"`
}

// Usage counts a reply's tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// CompletionChoice is one completion with vLLM's extensions: stop_reason (the stop token id or
// string, null for EOS or a length end), token_ids and prompt_token_ids (return_token_ids), and
// prompt_logprobs (null for the first prompt token, then {token id: Logprob} per token).
type CompletionChoice struct {
	Index          int                   `json:"index"`
	Text           string                `json:"text"`
	Logprobs       *CompletionLogprobs   `json:"logprobs"`
	FinishReason   *string               `json:"finish_reason"`
	StopReason     json.RawMessage       `json:"stop_reason"`
	TokenIDs       []int32               `json:"token_ids,omitempty"`
	PromptTokenIDs []int32               `json:"prompt_token_ids,omitempty"`
	PromptLogprobs []map[string]*Logprob `json:"prompt_logprobs,omitempty"`
}

// CompletionLogprobs is the OpenAI completions logprobs object: the sampled token's log-prob at
// each position, its text (or "token_id:ID" with return_tokens_as_token_ids) and the top ones.
type CompletionLogprobs struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
}

// Logprob is vLLM's per-token log-prob entry.
type Logprob struct {
	Logprob      float64 `json:"logprob"`
	Rank         *int    `json:"rank"`
	DecodedToken *string `json:"decoded_token"`
}

// StopToken is the stop token id that ended a choice (ok false when a string or EOS did).
func (c *CompletionChoice) StopToken() (int32, bool) {
	var id int32
	if len(c.StopReason) == 0 || json.Unmarshal(c.StopReason, &id) != nil {
		return 0, false
	}
	return id, true
}

// StopString is the stop string that ended a choice (ok false otherwise).
func (c *CompletionChoice) StopString() (string, bool) {
	var s string
	if len(c.StopReason) == 0 || json.Unmarshal(c.StopReason, &s) != nil {
		return "", false
	}
	return s, true
}

// CollectiveRPCRequest is vLLM's dev-mode POST /collective_rpc body: {"method": "reload_weights"}
// reloads the weights from the folder the server was started on.
type CollectiveRPCRequest struct {
	Method  string         `json:"method"`
	Args    []any          `json:"args,omitempty"`
	Kwargs  map[string]any `json:"kwargs,omitempty"`
	Timeout *float64       `json:"timeout,omitempty"`
}

// CollectiveRPCResponse is its reply: one result per worker.
type CollectiveRPCResponse struct {
	Results []any `json:"results"`
}

// ErrorResponse is the error body both servers (and OpenAI) send: {"error": {"message", …}};
// SGLang's native endpoints may send {"error": {"message"}} or {"message"}.
type ErrorResponse struct {
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
	Message string `json:"message"`
	Detail  any    `json:"detail"`
}

// Text is the error body's message ("" when none).
func (e ErrorResponse) Text() string {
	switch {
	case e.Error != nil && e.Error.Message != "":
		return e.Error.Message
	case e.Message != "":
		return e.Message
	case e.Detail != nil:
		return fmt.Sprint(e.Detail)
	}
	return ""
}

// ErrNoLogprobs says a reply carried no per-token log-probs where the request asked for them.
var ErrNoLogprobs = errors.New("the reply has no per-token log-probs")

// UploadWeightsResponse is this project's serve's reply to PUT /upload_weights/VERSION/NAME
// (not an SGLang or vLLM endpoint: neither takes weight files over HTTP): the server's folder
// holding the version's files so far, which update_weights_from_disk then loads, and the bytes
// it stored.
type UploadWeightsResponse struct {
	ModelPath string `json:"model_path"`
	Bytes     int64  `json:"bytes"`
}

// ModelList is vLLM's GET /v1/models reply (vllm/entrypoints/openai/protocol.py ModelList,
// ModelCard, ModelPermission): each served model's name (id, its --served-model-name) and the
// folder or hub name it was started on (root), which reload_weights reads again.
type ModelList struct {
	Object string      `json:"object"`
	Data   []ModelCard `json:"data"`
}

// ModelCard is one model of a ModelList.
type ModelCard struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        *string           `json:"root"`
	Parent      *string           `json:"parent"`
	MaxModelLen *int              `json:"max_model_len"`
	Permission  []ModelPermission `json:"permission"`
}

// ModelPermission is a ModelCard's permission entry (OpenAI's legacy fields, as vLLM fills them).
type ModelPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}
