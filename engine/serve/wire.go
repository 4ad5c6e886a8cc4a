package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"agentrl/engine/remote/wire"
	"agentrl/envs"
)

// maxBody bounds a request body (a long conversation is a few MiB at most).
const maxBody = 32 << 20

// sampling is the part of a request that chooses how tokens are drawn; nil = not given.
type sampling struct {
	Temperature *float32  `json:"temperature"`
	TopP        *float32  `json:"top_p"`
	TopK        *int      `json:"top_k"` // vLLM's extension
	Seed        *int64    `json:"seed"`
	N           *int      `json:"n"`
	Stop        wire.Stop `json:"stop"`
	// IgnoreEOS (vLLM's extension) generates past the end-of-turn tokens, up to max_tokens.
	IgnoreEOS bool `json:"ignore_eos"`
	// Accepted for compatibility; a value that would change the result is refused (refused).
	FrequencyPenalty *float64        `json:"frequency_penalty"`
	PresencePenalty  *float64        `json:"presence_penalty"`
	LogitBias        map[string]any  `json:"logit_bias"`
	User             string          `json:"user"`
	Metadata         json.RawMessage `json:"metadata"`
	Store            *bool           `json:"store"`
	ServiceTier      *string         `json:"service_tier"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatRequest is POST /v1/chat/completions. Fields outside it are refused by name.
type chatRequest struct {
	Model               string            `json:"model"`
	Messages            []wireMessage     `json:"messages"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	Stream              bool              `json:"stream"`
	StreamOptions       *streamOptions    `json:"stream_options"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls"` // every call of a reply is returned either way
	Logprobs            *bool             `json:"logprobs"`
	TopLogprobs         *int              `json:"top_logprobs"`
	ResponseFormat      json.RawMessage   `json:"response_format"`
	sampling
}

// completionRequest is POST /v1/completions.
type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int            `json:"max_tokens"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	Echo          bool            `json:"echo"`
	Logprobs      *int            `json:"logprobs"`
	Suffix        *string         `json:"suffix"`
	BestOf        *int            `json:"best_of"`
	sampling
}

// wireMessage is a chat message as OpenAI clients send it.
type wireMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"` // a string, null, or an array of text parts
	Name             string          `json:"name"`
	ToolCalls        []wireToolCall  `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent *string         `json:"reasoning_content"`
	// What clients echo back from a reply's message; accepted and not rendered.
	Refusal      *string         `json:"refusal"`
	Annotations  json.RawMessage `json:"annotations"`
	Audio        json.RawMessage `json:"audio"`
	FunctionCall json.RawMessage `json:"function_call"`
}

// wireToolCall is a tool call in OpenAI's form; Index appears in streamed deltas (and in clients
// that echo accumulated deltas back).
type wireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// fromWire and toWire are where the server's messages (envs.Message) and OpenAI's wire forms
// meet, one way each. A call's arguments travel as text (a JSON string in envs.ToolCall, a
// string on the wire): what the client sent, what the model wrote.

// fromWire is a request's message as the server keeps it. role and content are as readMessages
// checked them (developer read as system, content parts joined); the rest is the message's own.
func fromWire(w wireMessage, role, content string) envs.Message {
	m := envs.Message{Role: role, Content: content, Name: w.Name, ToolCallID: w.ToolCallID, ReasoningContent: w.ReasoningContent}
	for _, c := range w.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, envs.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: envs.TextArguments(c.Function.Arguments)})
	}
	return m
}

// toWire is an assistant message (a reply) in OpenAI's form: its content null when the message
// is only tool calls, and with indexed, the calls numbered (as a stream's delta numbers them).
func toWire(m envs.Message, indexed bool) replyMessage {
	w := replyMessage{Role: m.Role}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		w.Content = &m.Content
	}
	for i, c := range m.ToolCalls {
		wc := wireToolCall{ID: c.ID, Type: "function", Function: wireFunction{Name: c.Name, Arguments: c.Text()}}
		if indexed {
			wc.Index = &i
		}
		w.ToolCalls = append(w.ToolCalls, wc)
	}
	return w
}

// decodeBody reads a JSON request body into v, refusing unknown fields by name.
func decodeBody(r *http.Request, v any) error {
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
				Message: fmt.Sprintf("the request body is over %d MiB", maxBody>>20)}
		}
		return badRequest("", "reading the request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest("", "the request body is empty: send a JSON object (Content-Type: application/json)")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return badRequest("", "the request body holds more than one JSON value: send one object")
	}
	return nil
}

// jsonError explains a decoding error: malformed JSON, a wrong type, or an unknown field.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return badRequest("", "the request body is not valid JSON (at byte %d): %v", syn.Offset, err)
	case errors.As(err, &typ):
		if typ.Field == "stop" || strings.HasSuffix(typ.Field, ".stop") {
			return badRequest("stop", "stop must be a string or a list of strings")
		}
		field := strings.TrimPrefix(typ.Field, "sampling.") // the embedded struct's fields are the request's own
		return badRequest(field, "%s has the wrong type: got a JSON %s, want %s", field, typ.Value, jsonKind(typ.Type))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "the request body is not valid JSON: it ends early")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field := strings.Trim(name, `"`)
		return badRequest(field, "unknown field %q: this server takes the OpenAI API's fields (see the serve package's documentation for which); remove it", field)
	}
	return badRequest("", "the request body is not valid JSON: %v", err)
}

// jsonKind names what a Go type takes in JSON.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "an object"
}

// messageContent reads a message's content: a string, null, or an array of {"type": "text",
// "text": …} parts (joined).
func messageContent(raw json.RawMessage, i int) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	param := fmt.Sprintf("messages[%d].content", i)
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(param, "%s must be a string, null or a list of text parts", param)
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" {
			return "", badRequest(param, "%s[%d] has type %q: this model reads text only (type \"text\")", param, j, p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// check refuses sampling fields this server cannot honour, naming them.
func (q *sampling) check() error {
	if q.N != nil && *q.N != 1 {
		return badRequest("n", "n is %d: this server returns one choice per request (n = 1); send separate requests instead, each a step of the trajectory", *q.N)
	}
	for _, p := range []struct {
		name string
		v    *float64
	}{{"frequency_penalty", q.FrequencyPenalty}, {"presence_penalty", q.PresencePenalty}} {
		if p.v != nil && *p.v != 0 {
			return badRequest(p.name, "%s is %g: penalties would change the sampled distribution away from the policy's; leave it out (or 0)", p.name, *p.v)
		}
	}
	if len(q.LogitBias) > 0 {
		return badRequest("logit_bias", "logit_bias would change the sampled distribution away from the policy's; leave it out")
	}
	for i, st := range q.Stop {
		if st == "" {
			return badRequest("stop", "stop[%d] is empty: a stop string needs at least one character", i)
		}
	}
	switch {
	case q.Temperature != nil && (*q.Temperature < 0 || *q.Temperature > 2):
		return badRequest("temperature", "temperature is %g: want a value in [0, 2]", *q.Temperature)
	case q.TopP != nil && (*q.TopP <= 0 || *q.TopP > 1):
		return badRequest("top_p", "top_p is %g: want a value in (0, 1]", *q.TopP)
	case q.TopK != nil && *q.TopK < 0:
		return badRequest("top_k", "top_k is %d: want 0 (off) or more", *q.TopK)
	}
	return nil
}

// maxTokens reads max_tokens or max_completion_tokens (0: not given).
func maxTokens(v *int, name string) (int, error) {
	if v == nil {
		return 0, nil
	}
	if *v < 1 {
		return 0, badRequest(name, "%s is %d: want at least 1", name, *v)
	}
	return *v, nil
}

// jsonCompact is json.Compact.
func jsonCompact(dst *bytes.Buffer, src []byte) error { return json.Compact(dst, src) }
