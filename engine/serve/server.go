package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"agentrl/engine/rollout"
	"agentrl/engine/tokenizer"
)

// Sampling is how a reply's tokens are drawn where a request does not say (or, with
// TrajectoryOptions.Override, whatever it says). The zero value is greedy; OpenAI's default is
// Temperature 1 (what the serve command sets).
type Sampling struct {
	Temperature float32 // 0 = greedy
	TopP        float32 // 0 or 1 = off; below 1 needs a generator compiled with Truncation
	TopK        int     // 0 = off; needs Truncation
}

// Options configure a Server.
type Options struct {
	// ModelName is the model clients name in requests and GET /v1/models lists (required).
	ModelName string
	// MaxTotalTokens bounds a trajectory's context: one segment's prompt and replies together
	// (0: the generator's MaxLen − 1, which is also the most it may be).
	MaxTotalTokens int
	// MaxNewTokens caps a reply whose request gives no max_tokens (0: up to MaxTotalTokens).
	MaxNewTokens int
	// StopIDs end a reply (nil: the tokenizer's <|im_end|> and <|endoftext|>).
	StopIDs []int32
	// Sampling is the default sampling policy.
	Sampling Sampling
	// Open accepts any API key, or none: each distinct key is a trajectory of its own, created on
	// first use and never finished (the serve command). Without it only the keys Begin handed out,
	// and not yet finished, are accepted. An open server keeps only each key's current segment.
	Open bool
	// Preempt lets a request that needs a KV slot when none is free take the slot of the least
	// recently used idle trajectory (one with no request in flight); that trajectory re-prefills
	// its kept tokens on its next request, so its tokens are unchanged. Without it a trajectory
	// holds its slot from its first request to Finish, and later ones wait for a slot in arrival
	// order. The serve command sets it, since its keys never finish.
	Preempt bool
	// CodeTool, when set (e.g. "python"), serves models trained on the ReTool format (the
	// built-in one), which write code between <code> and </code> rather than Qwen's
	// <tool_call> JSON: when a request offers a function tool of this name, that tool is left
	// out of the rendered tools block (the model never saw one) and each <code>…</code> block of
	// the reply is returned as a call of it with arguments {"code": …}; an assistant message's
	// call of it renders back as that block.
	CodeTool string
	// DefaultSystem, when set, is the system message put first in a chat request that has none
	// (no system or developer message): the prompt the model was trained with (the built-in
	// model's ReTool prompt), so that a plain chat reaches the model as its training did rather
	// than as text it never saw. A request's own system message is kept as it is.
	DefaultSystem string
	// APIKey, when set, is the one key every request must send (Authorization: Bearer KEY; GET
	// /health excepted). With Open, all such requests are then one trajectory.
	APIKey string
	// Score, when set, is the served model's next-token log-probs of a sequence (entry j: token
	// j+1 after tokens 0…j), for prompt log-probs on the engine endpoints; nil refuses them.
	Score func(ids []int32) ([]float32, error)
	// Reload, when set, loads a HuggingFace folder's weights into the served model (the engine
	// endpoints' weight updates; called with no request in flight); nil refuses updates.
	Reload func(dir string) error
	// ModelPath is the folder served (vLLM's reload_weights reads it again; "" refuses that).
	ModelPath string
	// UploadDir is where uploaded weights are kept (PUT /upload_weights, for trainers that share
	// no filesystem with the server); "": a private temporary folder, removed by Close.
	UploadDir string
}

// Server is the OpenAI-compatible endpoint on one generator. It is safe for concurrent use.
type Server struct {
	gen    *rollout.Generator
	tok    *tokenizer.Tokenizer
	o      Options
	limit  int   // the context a segment may reach
	imEnd  int32 // <|im_end|>, which closes an assistant turn
	vocab  int
	topK   int // the generator's TopKMax (0: no truncated sampling compiled)
	nextID atomic.Int64

	mu      sync.Mutex
	keys    map[string]*trajectory
	revoked map[string]bool
	opened  int // open-mode trajectories created
	closed  bool
	ctx     context.Context // cancelled by Close: every request ends
	cancel  context.CancelFunc
	http    *http.Server
	listen  net.Addr // what Start listens on
	serving sync.WaitGroup
	// weights is held for reading by every request that generates, and for writing by a reload.
	weights sync.RWMutex
	version atomic.Value // string: the weight_version of the last update
	reloads atomic.Int64
	// uploads is the upload root once made (upload.go); ownUploads: a temporary one, removed by Close.
	uploads    string
	ownUploads bool
}

// New makes a server on gen, whose sessions it opens for trajectories, and tok, which renders
// chats and decodes replies. The generator must not step in lockstep: a lockstep generator runs
// a step only once every held slot has asked for more, and an external agent holds its slot
// while it thinks or runs a tool, so every other trajectory would wait for it.
func New(gen *rollout.Generator, tok *tokenizer.Tokenizer, o Options) (*Server, error) {
	if gen == nil || tok == nil {
		return nil, errors.New("serve: a generator and a tokenizer are required")
	}
	cfg := gen.Config()
	if cfg.Lockstep {
		return nil, errors.New("serve: the generator steps in lockstep (rollout.deterministic), which waits for every held slot's next request; " +
			"an external agent holds its slot while it runs its tools, so every other agent would wait for it: serve needs a generator without Lockstep (rollout.deterministic: false)")
	}
	if cfg.Decode == nil {
		return nil, errors.New("serve: the generator needs Config.Decode (stop strings are matched on decoded text)")
	}
	if o.ModelName == "" {
		return nil, errors.New("serve: Options.ModelName is required (the name clients send as model)")
	}
	imEnd, ok := tok.TokenID("<|im_end|>")
	if _, ok2 := tok.TokenID("<|im_start|>"); !ok || !ok2 {
		return nil, errors.New("serve: the tokenizer has no <|im_start|>/<|im_end|> tokens: the chat endpoint needs a Qwen chat tokenizer")
	}
	if o.StopIDs == nil {
		o.StopIDs = tok.ChatStopIDs()
	}
	s := &Server{gen: gen, tok: tok, o: o, imEnd: imEnd, vocab: tok.VocabSize(), keys: map[string]*trajectory{}, revoked: map[string]bool{}}
	s.limit = cfg.MaxLen - 1
	if o.MaxTotalTokens > 0 {
		s.limit = min(s.limit, o.MaxTotalTokens)
	}
	if cfg.Truncation {
		s.topK = cfg.TopKMax
	}
	if err := s.checkSampling(o.Sampling, "Options.Sampling"); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Handler is the endpoint: /v1/chat/completions, /v1/completions, /v1/models[/{id}], and the
// rollout-engine endpoints (engine.go).
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.route) }

// Start listens on addr ("" or ":0": a free port; a host left out means loopback) and serves
// until Close. It returns the base URL clients use, http://HOST:PORT/v1.
func (s *Server) Start(addr string) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr // loopback unless a host is named
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("serve: the server is closed")
	}
	if s.http != nil {
		return "", errors.New("serve: the server is already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("serve: listening on %s: %w", addr, err)
	}
	s.listen = ln.Addr()
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return s.ctx }}
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		_ = s.http.Serve(ln) // ends with ErrServerClosed at Close
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1" // listening everywhere: loopback reaches it
	}
	return "http://" + net.JoinHostPort(host, port) + "/v1", nil
}

// Addr is the address the server listens on, as the system resolved it (the port picked for
// port 0, 0.0.0.0 or [::] when listening on every interface); nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listen
}

// Close stops serving: requests in flight end (their clients get an error), every trajectory's
// slot is given back and its key refused. Finish still returns what a trajectory recorded.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	srv := s.http
	trajs := make([]*trajectory, 0, len(s.keys))
	for _, t := range s.keys {
		trajs = append(trajs, t)
	}
	s.mu.Unlock()
	s.cancel()
	var err error
	if srv != nil {
		err = srv.Close()
		s.serving.Wait()
	}
	for _, t := range trajs {
		t.stop()
	}
	s.removeUploads()
	return err
}

// route dispatches a request by path, then method; an unknown path or method is an error object.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path != "/health" {
		if err := s.checkKey(r); err != nil {
			writeError(w, err)
			return
		}
	}
	if method, h := s.engineRoute(path); h != nil {
		if r.Method != method {
			writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed", Allow: method,
				Message: fmt.Sprintf("%s takes %s, not %s", path, method, r.Method)})
			return
		}
		h(w, r)
		return
	}
	if path == "/v1/completions" && r.Method == http.MethodPost {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			writeError(w, badRequest("", "reading the request body: %v", err))
			return
		}
		if engineCompletion(body) {
			s.engineComplete(w, r, body)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	var allow string
	var h func(http.ResponseWriter, *http.Request, *trajectory)
	switch {
	case path == "/v1/chat/completions":
		allow, h = http.MethodPost, s.chat
	case path == "/v1/completions":
		allow, h = http.MethodPost, s.completions
	case path == "/v1/models" || strings.HasPrefix(path, "/v1/models/"):
		allow, h = http.MethodGet, s.models
	default:
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: fmt.Sprintf("no such endpoint: %s %s (this server has POST /v1/chat/completions, POST /v1/completions, GET /v1/models)", r.Method, r.URL.Path)})
		return
	}
	if r.Method != allow {
		writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed", Allow: allow,
			Message: fmt.Sprintf("%s takes %s, not %s", path, allow, r.Method)})
		return
	}
	t, err := s.authorise(r)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.inflight.Done()
	t.requests.Add(1)
	h(w, r, t)
}

// authorise finds the trajectory of the request's API key (Authorization: Bearer KEY).
func (s *Server) authorise(r *http.Request) (*trajectory, error) {
	key, hasKey := bearer(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, serverError(http.StatusServiceUnavailable, "the server is shutting down")
	}
	if t := s.keys[key]; t != nil { // Begin's keys are never empty; an open server's may be
		t.inflight.Add(1) // under s.mu with the key valid: Finish waits for it
		return t, nil
	}
	switch {
	case s.o.Open:
		s.opened++
		t := newTrajectory(s.ctx, fmt.Sprintf("key-%d", s.opened), key, TrajectoryOptions{Seed: keySeed(key)})
		s.keys[key] = t
		t.inflight.Add(1)
		return t, nil
	case !hasKey:
		return nil, unauthorized("no API key: send Authorization: Bearer KEY with the trajectory's key (the OPENAI_API_KEY the agent was started with)")
	case s.revoked[key]:
		return nil, unauthorized("the API key %s was revoked: its trajectory has finished; an agent gets a new key per trajectory", redact(key))
	}
	return nil, unauthorized("unknown API key %s: use the key the agent was started with (OPENAI_API_KEY)", redact(key))
}

// bearer is the request's API key and whether it sent one.
func bearer(r *http.Request) (string, bool) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	return key, key != ""
}

// redact shows enough of a key to tell keys apart in an error, as OpenAI does.
func redact(key string) string {
	if len(key) <= 8 {
		return "****"
	}
	return key[:4] + "…" + key[len(key)-4:]
}

// models answers GET /v1/models and GET /v1/models/{id}.
func (s *Server) models(w http.ResponseWriter, r *http.Request, _ *trajectory) {
	m := modelObject{ID: s.o.ModelName, Object: "model", OwnedBy: "agentrl", Root: s.o.ModelPath, MaxModelLen: s.limit}
	id, one := strings.CutPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/v1/models/")
	if !one {
		writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelObject{m}})
		return
	}
	if err := s.checkModel(id); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// Root is the folder served (Options.ModelPath), as vLLM names the folder it was started on:
	// what reload_weights reads again. Left out for a served copy (a checkpoint, the built-in model).
	Root string `json:"root,omitempty"`
	// MaxModelLen is a trajectory's context, prompt and reply together, as vLLM reports its own:
	// what a client (prm.endpoint's judge) fits its lengths to.
	MaxModelLen int `json:"max_model_len,omitempty"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

// checkModel refuses a model name other than the served one.
func (s *Server) checkModel(name string) error {
	if name == "" {
		return badRequest("model", "model is required: this server serves %q", s.o.ModelName)
	}
	if name != s.o.ModelName {
		return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
			Message: fmt.Sprintf("the model %q does not exist here: this server serves %q", name, s.o.ModelName)}
	}
	return nil
}

// newID is a response id with prefix (chatcmpl, cmpl).
func (s *Server) newID(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, s.nextID.Add(1))
}
