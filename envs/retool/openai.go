package retool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

// DefaultJudgeMaxTokens is the request's max_tokens when OpenAI.MaxTokens is not set.
const DefaultJudgeMaxTokens = 48

// maxJudgeBody bounds how much of a judge's HTTP reply is read.
const maxJudgeBody = 1 << 20

// defaultJudgeClient is the client of an OpenAI judge without one.
var defaultJudgeClient = &http.Client{Timeout: 60 * time.Second}

// OpenAI is a hinter and process scorer backed by an OpenAI-compatible chat-completions server
// (vLLM, SGLang, llama.cpp, a hosted API). It sends JudgeHintPrompt or JudgeScorePrompt as a
// system and a user message at temperature 0 and parses the reply with ParseJudgeHint or
// ParseJudgeScore.
//
// Errors are for a judge that cannot be asked (refused connection, non-2xx status, a reply that
// is not chat-completions JSON, a cancelled context); each names the endpoint and the likely
// fix. A reply that can be read but not used (no \boxed{}, a hint giving the answer away, a score
// out of range) is not an error — one bad judge reply must not fail a training step — but no
// hint (or no score), counted in Unparsed when it is set.
type OpenAI struct {
	Endpoint  string       // base URL, e.g. http://localhost:8000/v1 ; the request goes to Endpoint + "/chat/completions"
	Model     string       // model name the server serves
	APIKey    string       // sent as "Authorization: Bearer KEY" when non-empty
	MaxTokens int          // max_tokens of the request (≤ 0: DefaultJudgeMaxTokens); hints are cut to 8×MaxTokens characters
	Client    *http.Client // nil: a shared client with a 60 s timeout
	// Unparsed, when not nil, is incremented for every reply that gave no usable hint or score
	// (see ParseJudgeHint and ParseJudgeScore); a caller reports it as a metric.
	Unparsed *atomic.Int64
	// Section is the recipe section whose fields the errors name: "hinter" (also when empty)
	// for the hinter's judge, "prm" for the model PRM's endpoint.
	Section string
}

// field names a recipe field of the client's section: its endpoint, model and api_key_env, and
// "length", the fields that bound what a request asks the server to hold.
func (o OpenAI) field(name string) string {
	if o.Section == "prm" {
		if name == "length" {
			return "prm.max_input_tokens and prm.max_new_tokens"
		}
		return "prm." + name
	}
	if name == "length" {
		return "hinter.max_hint_tokens"
	}
	return "hinter." + name
}

var (
	_ Hinter = OpenAI{}
	_ Scorer = OpenAI{}
)

// Hint asks the judge for the trajectory's bridge thought: "" when the judge says none is needed
// (\boxed{-1}) or its reply is unusable (counted in Unparsed), an error when it cannot be asked.
func (o OpenAI) Hint(ctx context.Context, req HintRequest) (string, error) {
	system, user := JudgeHintPrompt(req)
	reply, err := o.complete(ctx, system, user)
	if err != nil {
		return "", err
	}
	hint, ok := ParseJudgeHint(reply, req.Task.Answer, 8*o.maxTokens())
	if !ok {
		o.countUnparsed()
		return "", nil
	}
	return hint, nil
}

// Score asks the judge to rate the trajectory's process: a score in [0, 1] with ok, ok = false
// when the reply holds no valid score (counted in Unparsed; fall back to RulesProcessScore), an
// error when the judge cannot be asked.
func (o OpenAI) Score(ctx context.Context, req HintRequest) (float64, bool, error) {
	system, user := JudgeScorePrompt(req)
	reply, err := o.complete(ctx, system, user)
	if err != nil {
		return 0, false, err
	}
	score, ok := ParseJudgeScore(reply)
	if !ok {
		o.countUnparsed()
	}
	return score, ok, nil
}

func (o OpenAI) maxTokens() int {
	if o.MaxTokens > 0 {
		return o.MaxTokens
	}
	return DefaultJudgeMaxTokens
}

func (o OpenAI) countUnparsed() {
	if o.Unparsed != nil {
		o.Unparsed.Add(1)
	}
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	MaxTokens   int           `json:"max_tokens"`
	Temperature float64       `json:"temperature"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

// complete sends one chat-completions request and returns choices[0].message.content ("" when
// the server sent null).
func (o OpenAI) complete(ctx context.Context, system, user string) (string, error) {
	return o.Ask(ctx, system, user, o.maxTokens(), 0)
}

// Ask sends one chat-completions request with its own max_tokens and temperature (an empty
// system sends no system message) and returns choices[0].message.content ("" when the server
// sent null). The model PRM's endpoint asks through it.
func (o OpenAI) Ask(ctx context.Context, system, user string, maxTokens int, temperature float64) (string, error) {
	base := strings.TrimRight(strings.TrimSpace(o.Endpoint), "/")
	if base == "" {
		return "", fmt.Errorf("openai judge: no endpoint: set %s to the server's base URL, e.g. http://localhost:8000/v1", o.field("endpoint"))
	}
	url := base + "/chat/completions"
	msgs := []chatMessage{{Role: "user", Content: user}}
	if system != "" {
		msgs = append([]chatMessage{{Role: "system", Content: system}}, msgs...)
	}
	body, err := json.Marshal(chatRequest{Model: o.Model, Messages: msgs, MaxTokens: maxTokens, Temperature: temperature})
	if err != nil {
		return "", fmt.Errorf("openai judge at %s: encoding the request: %w", url, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("openai judge: endpoint %q is not a valid URL (%v): fix %s, e.g. http://localhost:8000/v1", o.Endpoint, err, o.field("endpoint"))
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if o.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	client := o.Client
	if client == nil {
		client = defaultJudgeClient
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return "", o.transportError(ctx, url, client.Timeout, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJudgeBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("openai judge at %s: gave up reading the reply: %w", url, ctx.Err())
		}
		return "", fmt.Errorf("openai judge at %s: reading the reply: %w", url, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", o.statusError(url, resp.Status, resp.StatusCode, data)
	}
	if len(data) > maxJudgeBody {
		return "", fmt.Errorf("openai judge at %s: the reply is larger than 1 MiB (it starts %s): is %s an OpenAI-compatible /v1 base URL?", url, snippet(data), o.field("endpoint"))
	}
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return "", fmt.Errorf("openai judge at %s: the reply is not chat-completions JSON (%v): %s: is %s an OpenAI-compatible /v1 base URL?", url, err, snippet(data), o.field("endpoint"))
	}
	if len(cr.Choices) == 0 {
		if len(cr.Error) > 0 && string(cr.Error) != "null" {
			return "", fmt.Errorf("openai judge at %s: the server answered with an error: %s", url, snippet(cr.Error))
		}
		return "", fmt.Errorf("openai judge at %s: the reply has no choices: %s", url, snippet(data))
	}
	if c := cr.Choices[0].Message.Content; c != nil {
		return *c, nil
	}
	return "", nil
}

// transportError explains a request that got no HTTP reply.
func (o OpenAI) transportError(ctx context.Context, url string, timeout time.Duration, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("openai judge at %s: gave up waiting for the reply: %w", url, ctx.Err())
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("openai judge at %s: connection refused: start the OpenAI-compatible server (vLLM, SGLang, llama.cpp…) or fix %s: %w", url, o.field("endpoint"), err)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Errorf("openai judge at %s: cannot resolve the host: fix %s: %w", url, o.field("endpoint"), err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		within := "in time"
		if timeout > 0 {
			within = "within " + timeout.String()
		}
		return fmt.Errorf("openai judge at %s: no reply %s: the server is overloaded or hung; check it, or lower %s: %w", url, within, o.field("length"), err)
	}
	return fmt.Errorf("openai judge at %s: %w", url, err)
}

// StatusError is a reply outside 2xx: the status, the first bytes of its body and the likely fix.
type StatusError struct {
	URL, Status string
	Code        int
	Body        string // snippet of the body
	Fix         string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("openai judge at %s: status %s: %s: %s", e.URL, e.Status, e.Body, e.Fix)
}

// Retryable reports whether asking again can help: a timeout, a rate limit or the server's own
// failure; another 4xx refuses the request itself, which a retry sends unchanged.
func (e *StatusError) Retryable() bool {
	return e.Code == http.StatusRequestTimeout || e.Code == http.StatusTooManyRequests || e.Code >= 500
}

// statusError explains a non-2xx reply, with the first bytes of its body.
func (o OpenAI) statusError(url, status string, code int, body []byte) error {
	var fix string
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		fix = "check the API key in the variable named by " + o.field("api_key_env")
	case code == http.StatusNotFound:
		fix = fmt.Sprintf("check %s (the base URL, usually ending in /v1) and %s (a name the server serves)", o.field("endpoint"), o.field("model"))
	case code == http.StatusTooManyRequests:
		fix = "the server is rate-limiting; lower the request rate or raise its limits"
	case code >= 400 && code < 500 && bytes.Contains(body, []byte("context_length_exceeded")):
		fix = fmt.Sprintf("the prompt and the reply do not fit the server's context; lower %s to fit it", o.field("length"))
	case code >= 400 && code < 500:
		fix = fmt.Sprintf("the server rejected the request; check %s and %s against what it accepts", o.field("model"), o.field("length"))
	case code >= 500:
		fix = "the server failed; check its log"
	default:
		fix = "expected a 2xx reply"
	}
	return &StatusError{URL: url, Status: status, Code: code, Body: snippet(body), Fix: fix}
}

// snippet is the first ~200 bytes of a reply body, whitespace collapsed, quoted.
func snippet(b []byte) string {
	const n = 200
	cut := len(b) > n
	if cut {
		i := n
		for i > 0 && !utf8.RuneStart(b[i]) {
			i--
		}
		b = b[:i]
	}
	s := strings.Join(strings.Fields(string(b)), " ")
	if cut {
		s += "…"
	}
	return fmt.Sprintf("%q", s)
}
