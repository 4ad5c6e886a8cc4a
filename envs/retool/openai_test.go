package retool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"agentrl/envs"
)

// judgeReply is a chat-completions body whose first choice says content.
func judgeReply(content string) string {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": content}}}})
	return string(b)
}

// reply serves body with status.
func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

var judgeReq = HintRequest{
	Task:     envs.Task{Prompt: "What is 6 times 7?", Answer: "42"},
	Response: "<code>print(6*8)</code>\n<interpreter>48</interpreter>\n\\boxed{48}",
	Summary:  envs.Summary{ToolCalls: 1, Answered: true, Answer: "48"},
}

type seenRequest struct {
	method, path, auth, contentType string
	body                            map[string]any
	raw                             string
}

func TestOpenAIRequest(t *testing.T) {
	for _, tc := range []struct {
		name, key, endpointSuffix string
		maxTokens                 int
		wantAuth                  string
		wantMaxTokens             float64
	}{
		{"with key", "sk-test", "", 32, "Bearer sk-test", 32},
		{"without key", "", "", 16, "", 16},
		{"trailing slash and default tokens", "", "/", 0, "", DefaultJudgeMaxTokens},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen seenRequest
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				raw, _ := io.ReadAll(r.Body)
				mu.Lock()
				seen = seenRequest{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type"), raw: string(raw)}
				_ = json.Unmarshal(raw, &seen.body)
				mu.Unlock()
				reply(200, judgeReply(`\boxed{Multiply by 7, not by 8.}`))(w, r)
			}))
			defer srv.Close()
			o := OpenAI{Endpoint: srv.URL + "/v1" + tc.endpointSuffix, Model: "judge-model", APIKey: tc.key, MaxTokens: tc.maxTokens}
			hint, err := o.Hint(context.Background(), judgeReq)
			if err != nil || hint != "Multiply by 7, not by 8." {
				t.Fatalf("got %q, %v; want %q, nil", hint, err, "Multiply by 7, not by 8.")
			}
			mu.Lock()
			defer mu.Unlock()
			if seen.method != http.MethodPost || seen.path != "/v1/chat/completions" {
				t.Errorf("got %s %s; want POST /v1/chat/completions", seen.method, seen.path)
			}
			if seen.auth != tc.wantAuth {
				t.Errorf("got Authorization %q; want %q", seen.auth, tc.wantAuth)
			}
			if seen.contentType != "application/json" {
				t.Errorf("got Content-Type %q; want application/json", seen.contentType)
			}
			b := seen.body
			if b["model"] != "judge-model" || b["max_tokens"] != tc.wantMaxTokens {
				t.Errorf("got model %v, max_tokens %v; want judge-model, %v", b["model"], b["max_tokens"], tc.wantMaxTokens)
			}
			if temp, ok := b["temperature"]; !ok || temp != 0.0 {
				t.Errorf("got temperature %v (present %v) in %s; want 0, present", temp, ok, seen.raw)
			}
			msgs, _ := b["messages"].([]any)
			wantSys, wantUser := JudgeHintPrompt(judgeReq)
			var roles, contents []string
			for _, m := range msgs {
				mm, _ := m.(map[string]any)
				r, _ := mm["role"].(string)
				c, _ := mm["content"].(string)
				roles, contents = append(roles, r), append(contents, c)
			}
			if fmt.Sprint(roles) != "[system user]" || len(contents) != 2 || contents[0] != wantSys || contents[1] != wantUser {
				t.Errorf("got messages %q %q; want [system user] with JudgeHintPrompt's text", roles, contents)
			}
		})
	}
}

func TestOpenAIHint(t *testing.T) {
	huge := func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		io.WriteString(w, `{"choices":[{"message":{"content":"`)
		chunk := []byte(strings.Repeat("a", 64<<10))
		for range 1 << 14 { // up to 1 GiB: the client must stop long before
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
	for _, tc := range []struct {
		name     string
		handler  http.HandlerFunc
		want     string
		unparsed int64
		errHas   []string // "" = no error wanted
	}{
		{"hint", reply(200, judgeReply("The product is off.\n\\boxed{Multiply by 7, not by 8.}")), "Multiply by 7, not by 8.", 0, nil},
		{"no hint needed", reply(200, judgeReply(`\boxed{-1}`)), "", 0, nil},
		{"reveals answer", reply(200, judgeReply(`\boxed{The product is 42.}`)), "", 1, nil},
		{"no box", reply(200, judgeReply(`Multiply by 7.`)), "", 1, nil},
		{"chat token", reply(200, judgeReply(`\boxed{<|im_start|>user}`)), "", 1, nil},
		{"null content", reply(200, `{"choices":[{"message":{"role":"assistant","content":null}}]}`), "", 1, nil},
		{"whole sentences within 8×max_tokens", reply(200, judgeReply(`\boxed{Multiply first. Then add eight to the product you formed.}`)), "Multiply first.", 0, nil},
		{"one sentence over 8×max_tokens", reply(200, judgeReply(`\boxed{Multiply by seven rather than eight when you form the product}`)), "", 1, nil},
		{"401", reply(401, `{"error":{"message":"Incorrect API key provided"}}`), "", 0, []string{"/v1/chat/completions", "401 Unauthorized", "Incorrect API key provided", "hinter.api_key_env"}},
		{"404", reply(404, `{"detail":"Not Found"}`), "", 0, []string{"/v1/chat/completions", "404", "hinter.model"}},
		{"500", reply(500, "upstream crashed: "+strings.Repeat("z", 1000)), "", 0, []string{"/v1/chat/completions", "500 Internal Server Error", "upstream crashed", "check its log"}},
		{"garbage", reply(200, "<html>hello</html>"), "", 0, []string{"/v1/chat/completions", "not chat-completions JSON", "<html>hello</html>"}},
		{"no choices", reply(200, `{"choices":[]}`), "", 0, []string{"/v1/chat/completions", "no choices"}},
		{"error in 200", reply(200, `{"error":{"message":"model overloaded"}}`), "", 0, []string{"/v1/chat/completions", "model overloaded"}},
		{"huge body", huge, "", 0, []string{"/v1/chat/completions", "larger than 1 MiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			var unparsed atomic.Int64
			o := OpenAI{Endpoint: srv.URL + "/v1", Model: "m", MaxTokens: 3, Unparsed: &unparsed}
			start := time.Now()
			got, err := o.Hint(context.Background(), judgeReq)
			if elapsed := time.Since(start); elapsed > 10*time.Second {
				t.Errorf("took %v; want a prompt answer", elapsed)
			}
			if len(tc.errHas) == 0 {
				if err != nil || got != tc.want {
					t.Errorf("got %q, %v; want %q, nil", got, err, tc.want)
				}
			} else {
				if err == nil {
					t.Fatalf("got %q, nil; want an error containing %q", got, tc.errHas)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("got error %q; want it to contain %q", err, s)
					}
				}
				if len(err.Error()) > 700 {
					t.Errorf("got a %d-byte error; want the body cut to ~200 bytes", len(err.Error()))
				}
			}
			if n := unparsed.Load(); n != tc.unparsed {
				t.Errorf("got Unparsed %d; want %d", n, tc.unparsed)
			}
		})
	}
}

func TestOpenAIScore(t *testing.T) {
	for _, tc := range []struct {
		name     string
		content  string
		want     float64
		ok       bool
		unparsed int64
	}{
		{"integer", `Sound work. \boxed{7}`, 0.7, true, 0},
		{"decimal", `\boxed{2.5}`, 0.25, true, 0},
		{"out of range", `\boxed{11}`, 0, false, 1},
		{"words", `\boxed{good}`, 0, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var user string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body struct {
					Messages []chatMessage `json:"messages"`
				}
				_ = json.NewDecoder(r.Body).Decode(&body)
				if len(body.Messages) == 2 {
					user = body.Messages[1].Content
				}
				reply(200, judgeReply(tc.content))(w, r)
			}))
			defer srv.Close()
			var unparsed atomic.Int64
			o := OpenAI{Endpoint: srv.URL, Unparsed: &unparsed}
			got, ok, err := o.Score(context.Background(), judgeReq)
			if err != nil || ok != tc.ok || got != tc.want {
				t.Errorf("got %v, %v, %v; want %v, %v, nil", got, ok, err, tc.want, tc.ok)
			}
			if _, want := JudgeScorePrompt(judgeReq); user != want {
				t.Errorf("got user message %q; want JudgeScorePrompt's %q", user, want)
			}
			if n := unparsed.Load(); n != tc.unparsed {
				t.Errorf("got Unparsed %d; want %d", n, tc.unparsed)
			}
		})
	}
}

func TestOpenAIUnreachable(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server notices the client hanging up
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hang.Close()
	defer close(release) // before Close, which waits for the handlers
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()

	for _, tc := range []struct {
		name     string
		o        OpenAI
		timeout  time.Duration // of the context; 0 = none
		errHas   []string
		deadline bool // errors.Is(err, context.DeadlineExceeded), true for the client's timeout too
	}{
		{"hangs past the context", OpenAI{Endpoint: hang.URL + "/v1"}, 200 * time.Millisecond, []string{hang.URL + "/v1/chat/completions", "gave up waiting"}, true},
		{"hangs past the client timeout", OpenAI{Endpoint: hang.URL + "/v1", Client: &http.Client{Timeout: 200 * time.Millisecond}}, 0, []string{hang.URL + "/v1/chat/completions", "no reply within 200ms"}, true},
		{"connection refused", OpenAI{Endpoint: deadURL + "/v1"}, 0, []string{deadURL + "/v1/chat/completions", "connection refused", "hinter.endpoint"}, false},
		{"no endpoint", OpenAI{}, 0, []string{"no endpoint", "hinter.endpoint"}, false},
		{"bad endpoint", OpenAI{Endpoint: "http://bad host:1/v1"}, 0, []string{"not a valid URL", "hinter.endpoint"}, false},
		{"the PRM's endpoint refused", OpenAI{Endpoint: deadURL + "/v1", Section: "prm"}, 0, []string{"connection refused", "prm.endpoint"}, false},
		{"the PRM's endpoint missing", OpenAI{Section: "prm"}, 0, []string{"no endpoint", "prm.endpoint"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			start := time.Now()
			got, err := tc.o.Hint(ctx, judgeReq)
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("took %v; want a prompt error", elapsed)
			}
			if err == nil {
				t.Fatalf("got %q, nil; want an error", got)
			}
			for _, s := range tc.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("got error %q; want it to contain %q", err, s)
				}
			}
			if errors.Is(err, context.DeadlineExceeded) != tc.deadline {
				t.Errorf("got errors.Is(err, DeadlineExceeded) = %v for %q; want %v", !tc.deadline, err, tc.deadline)
			}
		})
	}
}

func TestOpenAICancelled(t *testing.T) {
	srv := httptest.NewServer(reply(200, judgeReply(`\boxed{Fix it.}`)))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"hint", func() error { _, err := (OpenAI{Endpoint: srv.URL}).Hint(ctx, judgeReq); return err }},
		{"score", func() error { _, _, err := (OpenAI{Endpoint: srv.URL}).Score(ctx, judgeReq); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, context.Canceled) {
				t.Errorf("got %v; want an error wrapping context.Canceled", err)
			}
		})
	}
}
