package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"agentrl/engine/remote/wire"
)

// ProbeText is the prompt every engine scores after a weight push (its token ids check the
// tokenizer, its log-probs the weights), and the one doctor tokenises on each engine.
const ProbeText = "<|im_start|>user\nWhat is 17 times 23? Write code to check.<|im_end|>\n<|im_start|>assistant\n"

// ErrOtherTokenizer is a probe whose token ids differ from the policy's: the server was started
// on another model's folder.
var ErrOtherTokenizer = errors.New("it serves another tokenizer")

// Step is a step of Diagnose, in the order they run; each needs the ones before it.
type Step string

// The steps: the server answers GET /health; it accepts the key (or needs none) on a request
// that needs one; it says what model it serves (SGLang's and serve's /get_model_info, vLLM's
// /v1/models), which also tells that it speaks its kind's protocol; it tokenises ProbeText as the
// policy's tokenizer does.
const (
	StepReach Step = "reach"
	StepKey   Step = "key"
	StepModel Step = "model"
	StepProbe Step = "probe"
)

// Diagnosis is what Diagnose found on one engine.
type Diagnosis struct {
	Engine string // kind and URL, never the key
	// Failed is the step that failed (Err says how), "" when every step passed.
	Failed Step
	Err    error
	// Model is the model it serves as it names it (model path, served name), once StepModel passed.
	Model string
	// Root is the folder a vLLM server says it was started on (/v1/models' root), "" otherwise.
	Root string
	// Tokens is the probe's length in tokens, once StepProbe passed (both tokenizers agree).
	Tokens int
}

// Diagnose checks one engine step by step, as doctor reports it: reachable, key accepted, the
// model it serves, and ProbeText's token ids (text: as it tokenises the prompt) against ids, the
// policy's (nil: the probe step is skipped). The first failing step ends it. hc nil is
// http.DefaultClient; ctx bounds the whole.
func Diagnose(ctx context.Context, ep Endpoint, ids []int32, hc *http.Client) Diagnosis {
	if hc == nil {
		hc = http.DefaultClient
	}
	ep.URL = strings.TrimSuffix(strings.TrimSuffix(ep.URL, "/"), "/v1")
	e := &engine{c: &client{ep: ep, http: hc}}
	d := Diagnosis{Engine: e.name()}
	fail := func(s Step, err error) Diagnosis {
		d.Failed, d.Err = s, err
		return d
	}
	status, _, err := e.c.get(ctx, "/health")
	switch {
	case err != nil:
		return fail(StepReach, fmt.Errorf("GET /health: %w", err))
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return fail(StepKey, keyRefused(status, ep))
	case status/100 != 2:
		return fail(StepReach, fmt.Errorf("GET /health answers HTTP %d: the server is up but not ready (still loading the model?)", status))
	}
	path := "/get_model_info"
	if ep.Kind == VLLM {
		path = "/v1/models"
	}
	status, body, err := e.c.get(ctx, path)
	switch {
	case err != nil:
		return fail(StepModel, fmt.Errorf("GET %s: %w", path, err))
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return fail(StepKey, keyRefused(status, ep))
	case status == http.StatusNotFound:
		return fail(StepModel, fmt.Errorf("GET %s answers HTTP 404: the server does not speak %s's protocol (another kind of server?)", path, ep.Kind))
	case status/100 != 2:
		return fail(StepModel, fmt.Errorf("GET %s answers HTTP %d: %s", path, status, short(strings.TrimSpace(string(body)))))
	}
	if d.Model, d.Root, err = servedModel(ep.Kind, body); err != nil {
		return fail(StepModel, fmt.Errorf("GET %s: %w", path, err))
	}
	if ep.Kind == VLLM && e.c.ep.Model == "" {
		e.c.ep.Model, _, _ = strings.Cut(d.Model, " ")
	}
	if ids == nil {
		return d
	}
	got, err := e.c.probe(ctx, nil, ProbeText)
	var st *errStatus
	switch {
	case errors.As(err, &st) && (st.status == http.StatusUnauthorized || st.status == http.StatusForbidden):
		return fail(StepKey, keyRefused(st.status, ep))
	case err != nil:
		return fail(StepProbe, fmt.Errorf("scoring the probe prompt: %w", err))
	case !equalIDs(got.IDs, ids):
		return fail(StepProbe, fmt.Errorf("it tokenises the probe %q as %d tokens %v, the policy's tokenizer as %d tokens %v: %w",
			short(ProbeText), len(got.IDs), head(got.IDs), len(ids), head(ids), ErrOtherTokenizer))
	}
	d.Tokens = len(ids)
	return d
}

// keyRefused is a 401 or 403, worded by whether a key was sent.
func keyRefused(status int, ep Endpoint) error {
	if ep.APIKey == "" {
		return fmt.Errorf("HTTP %d without a key: the server takes an API key", status)
	}
	return fmt.Errorf("HTTP %d: the server refuses the key sent", status)
}

// servedModel reads the model a server names: SGLang's (and serve's) model_path, with serve's
// served_model_name; vLLM's first model id, with its root (the folder it loaded) when it differs.
func servedModel(kind Kind, body []byte) (name, root string, err error) {
	if kind == VLLM {
		var list wire.ModelList
		if err := json.Unmarshal(body, &list); err != nil || len(list.Data) == 0 || list.Data[0].ID == "" {
			return "", "", errors.New("the reply lists no model (an OpenAI models list with data[0].id)")
		}
		m := list.Data[0]
		if m.Root != nil && *m.Root != "" && *m.Root != m.ID {
			return m.ID + " (" + *m.Root + ")", *m.Root, nil
		}
		return m.ID, "", nil
	}
	var info struct {
		ModelPath  string `json:"model_path"`
		ServedName string `json:"served_model_name"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return "", "", fmt.Errorf("the reply is not SGLang's model info: %w", err)
	}
	switch {
	case info.ModelPath != "" && info.ServedName != "" && info.ServedName != info.ModelPath:
		return info.ServedName + " (" + info.ModelPath + ")", "", nil
	case info.ModelPath != "":
		return info.ModelPath, "", nil
	case info.ServedName != "":
		return info.ServedName, "", nil
	}
	return "", "", errors.New("the reply names no model_path")
}

// get sends GET path with the key and returns the status and the reply's first MiB. (SGLang and
// serve take /health without a key; a server that wants one there gets it.)
func (c *client) get(ctx context.Context, path string) (int, []byte, error) {
	req, err := c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}
