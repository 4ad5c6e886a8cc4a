package serve

import (
	"bytes"
	"net/http"
	"time"
)

// chatResponse is a whole chat completion.
type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"` // chat.completion
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      replyMessage `json:"message"`
	Logprobs     any          `json:"logprobs"`
	FinishReason string       `json:"finish_reason"`
}

// replyMessage is the assistant's message; content is null when the reply is only tool calls.
type replyMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails *promptDetail `json:"prompt_tokens_details,omitempty"`
}

// promptDetail says how much of the prompt was already in the trajectory's KV cache.
type promptDetail struct {
	CachedTokens int `json:"cached_tokens"`
}

// chatChunk is one event of a streamed chat completion.
type chatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"` // chat.completion.chunk
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

func (o *outcome) usage() *usage {
	return &usage{PromptTokens: o.promptTokens, CompletionTokens: len(o.reply.ids), TotalTokens: o.promptTokens + len(o.reply.ids),
		PromptTokensDetails: &promptDetail{CachedTokens: o.reused}}
}

// chat answers POST /v1/chat/completions.
func (s *Server) chat(w http.ResponseWriter, r *http.Request, t *trajectory) {
	var q chatRequest
	if err := decodeBody(r, &q); err != nil {
		writeError(w, err)
		return
	}
	j, err := s.chatJob(&q)
	if err != nil {
		writeError(w, err)
		return
	}
	id, created := s.newID("chatcmpl"), time.Now().Unix()
	if !q.Stream {
		o, err := s.run(r.Context(), t, j, nil)
		if err != nil {
			writeError(w, err)
			return
		}
		msg := toWire(o.reply.message(), false)
		writeJSON(w, http.StatusOK, chatResponse{ID: id, Object: "chat.completion", Created: created, Model: s.o.ModelName,
			Choices: []chatChoice{{Message: msg, FinishReason: o.reply.finish}}, Usage: o.usage()})
		return
	}
	event := func(d delta, finish *string) chatChunk {
		return chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.o.ModelName,
			Choices: []chunkChoice{{Delta: d, FinishReason: finish}}}
	}
	empty := ""
	s.streamRun(w, r, t, j,
		func(e *sse) { e.send(event(delta{Role: "assistant", Content: &empty}, nil)) },
		func(e *sse, text string) { e.send(event(delta{Content: &text}, nil)) },
		func(e *sse, o *outcome, d *deltas) {
			if rest := d.rest(o.reply.content); rest != "" {
				e.send(event(delta{Content: &rest}, nil))
			}
			if len(o.reply.calls) > 0 {
				e.send(event(delta{ToolCalls: toWire(o.reply.message(), true).ToolCalls}, nil))
			}
			e.send(event(delta{}, &o.reply.finish))
			if q.StreamOptions != nil && q.StreamOptions.IncludeUsage {
				u := event(delta{}, nil)
				u.Choices, u.Usage = []chunkChoice{}, o.usage()
				e.send(u)
			}
		})
}

// chatJob checks a chat request and makes its job.
func (s *Server) chatJob(q *chatRequest) (*job, error) {
	if err := s.checkModel(q.Model); err != nil {
		return nil, err
	}
	msgs, err := readMessages(q.Messages)
	if err != nil {
		return nil, err
	}
	msgs = withSystem(msgs, s.o.DefaultSystem)
	if err := q.check(); err != nil {
		return nil, err
	}
	if q.Logprobs != nil && *q.Logprobs || q.TopLogprobs != nil && *q.TopLogprobs > 0 {
		return nil, badRequest("logprobs", "logprobs are not returned by this server (the trajectory records each sampled token's log-prob): leave logprobs out")
	}
	if rf := bytes.TrimSpace(q.ResponseFormat); len(rf) > 0 && string(rf) != "null" && !bytes.Equal(compactJSON(rf), []byte(`{"type":"text"}`)) {
		return nil, badRequest("response_format", "response_format %s is not supported: only {\"type\": \"text\"} (no constrained decoding)", rf)
	}
	if q.StreamOptions != nil && !q.Stream {
		return nil, badRequest("stream_options", "stream_options is only allowed with stream: true")
	}
	maxNew, err := maxTokens(q.MaxCompletionTokens, "max_completion_tokens")
	if err != nil {
		return nil, err
	}
	if maxNew == 0 {
		if maxNew, err = maxTokens(q.MaxTokens, "max_tokens"); err != nil {
			return nil, err
		}
	}
	ts, err := readTools(q.Tools, s.o.CodeTool)
	if err != nil {
		return nil, err
	}
	parseTools, err := toolChoice(q.ToolChoice, ts)
	if err != nil {
		return nil, err
	}
	p := replyParse{stopIDs: s.o.StopIDs, stops: q.Stop, tools: parseTools}
	if ts.code {
		p.codeTool = s.o.CodeTool
	}
	return &job{endpoint: "chat.completions", parse: p, sampling: q.sampling, maxNew: maxNew, ignoreEOS: q.IgnoreEOS,
		plan: func(t *trajectory) (*plan, error) { return s.planChat(t, msgs, ts) }}, nil
}

// compactJSON is raw without insignificant spaces (raw itself when it is not JSON).
func compactJSON(raw []byte) []byte {
	var b bytes.Buffer
	if err := jsonCompact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}
