package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
)

// defaultCompletionTokens is OpenAI's max_tokens default for /v1/completions.
const defaultCompletionTokens = 16

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"` // text_completion
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

type completionChoice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

// completions answers POST /v1/completions: a raw prompt (text or token ids), no chat template.
func (s *Server) completions(w http.ResponseWriter, r *http.Request, t *trajectory) {
	var q completionRequest
	if err := decodeBody(r, &q); err != nil {
		writeError(w, err)
		return
	}
	j, err := s.completionJob(&q)
	if err != nil {
		writeError(w, err)
		return
	}
	id, created := s.newID("cmpl"), time.Now().Unix()
	resp := func(text string, finish *string) completionResponse {
		return completionResponse{ID: id, Object: "text_completion", Created: created, Model: s.o.ModelName,
			Choices: []completionChoice{{Text: text, FinishReason: finish}}}
	}
	if !q.Stream {
		o, err := s.run(r.Context(), t, j, nil)
		if err != nil {
			writeError(w, err)
			return
		}
		out := resp(o.reply.content, &o.reply.finish)
		out.Usage = o.usage()
		writeJSON(w, http.StatusOK, out)
		return
	}
	s.streamRun(w, r, t, j,
		func(*sse) {},
		func(e *sse, text string) { e.send(resp(text, nil)) },
		func(e *sse, o *outcome, d *deltas) {
			e.send(resp(d.rest(o.reply.content), &o.reply.finish))
			if q.StreamOptions != nil && q.StreamOptions.IncludeUsage {
				u := resp("", nil)
				u.Choices, u.Usage = []completionChoice{}, o.usage()
				e.send(u)
			}
		})
}

// completionJob checks a completion request and makes its job.
func (s *Server) completionJob(q *completionRequest) (*job, error) {
	if err := s.checkModel(q.Model); err != nil {
		return nil, err
	}
	p, err := s.readPrompt(q.Prompt)
	if err != nil {
		return nil, err
	}
	if err := q.check(); err != nil {
		return nil, err
	}
	switch {
	case q.Echo:
		return nil, badRequest("echo", "echo is not supported: leave it out")
	case q.Logprobs != nil && *q.Logprobs > 0:
		return nil, badRequest("logprobs", "logprobs are not returned by this server: leave logprobs out")
	case q.Suffix != nil && *q.Suffix != "":
		return nil, badRequest("suffix", "suffix (insertion) is not supported: leave it out")
	case q.BestOf != nil && *q.BestOf != 1:
		return nil, badRequest("best_of", "best_of is %d: this server returns one sample per request (best_of = 1)", *q.BestOf)
	case q.StreamOptions != nil && !q.Stream:
		return nil, badRequest("stream_options", "stream_options is only allowed with stream: true")
	}
	maxNew, err := maxTokens(q.MaxTokens, "max_tokens")
	if err != nil {
		return nil, err
	}
	if maxNew == 0 {
		maxNew = defaultCompletionTokens
	}
	return &job{endpoint: "completions", parse: replyParse{stopIDs: s.o.StopIDs, stops: q.Stop}, sampling: q.sampling, maxNew: maxNew, ignoreEOS: q.IgnoreEOS,
		plan: func(t *trajectory) (*plan, error) { return s.planText(t, p) }}, nil
}

// readPrompt reads a completion's prompt: a string, or token ids (one prompt per request: a
// one-element list of either is taken too).
func (s *Server) readPrompt(raw json.RawMessage) (textPrompt, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return textPrompt{}, badRequest("prompt", "prompt is required: a string or a list of token ids")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if text == "" {
			return textPrompt{}, badRequest("prompt", "prompt is empty")
		}
		return textPrompt{text: text}, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil {
		return s.idsPrompt(ids)
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) == 1 {
		return s.readPrompt(json.RawMessage(mustJSON(texts[0])))
	}
	var lists [][]int32
	if json.Unmarshal(raw, &lists) == nil && len(lists) == 1 {
		return s.idsPrompt(lists[0])
	}
	return textPrompt{}, badRequest("prompt", "prompt must be one string or one list of token ids: this server answers one prompt per request")
}

func (s *Server) idsPrompt(ids []int32) (textPrompt, error) {
	if len(ids) == 0 {
		return textPrompt{}, badRequest("prompt", "prompt is an empty list of token ids")
	}
	for i, id := range ids {
		if id < 0 || int(id) >= s.vocab {
			return textPrompt{}, badRequest("prompt", "prompt[%d] is token id %d, outside the vocabulary [0, %d)", i, id, s.vocab)
		}
	}
	return textPrompt{ids: ids, isIDs: true}, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
