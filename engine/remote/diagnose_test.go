package remote

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestDiagnose runs each step against a served built-in model and stand-ins for the failures:
// a right key passes every step (the model named, the probe tokenised as the policy does), for
// the serve and vllm kinds; a wrong or missing key, a dead port, a server of another kind, one
// still loading and another tokenizer each fail at their step, with a reason naming it.
func TestDiagnose(t *testing.T) {
	m, tok := builtin(t)
	base, _ := startServe(t, m, tok, "sesame") // http://HOST:PORT/v1: the /v1 is dropped
	ids := tok.Encode(ProbeText)
	other := append([]int32{ids[0] + 1}, ids[1:]...) // a tokenizer that differs in the first token

	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	notSGLang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		http.NotFound(w, r)
	}))
	defer notSGLang.Close()
	loading := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer loading.Close()

	for _, tc := range []struct {
		name  string
		ep    Endpoint
		ids   []int32
		fail  Step
		model string // with fail "": the model it names
		why   string // with fail set: what Err says
	}{
		{name: "serve, right key", ep: Endpoint{URL: base, Kind: Serve, APIKey: "sesame"}, ids: ids, model: "policy (" + builtinDir + ")"},
		{name: "vllm kind on serve", ep: Endpoint{URL: base, Kind: VLLM, APIKey: "sesame"}, ids: ids, model: "policy (" + builtinDir + ")"}, // /v1/models names the served folder as root
		{name: "no probe ids", ep: Endpoint{URL: base, Kind: SGLang, APIKey: "sesame"}, model: "policy (" + builtinDir + ")"},
		{name: "wrong key", ep: Endpoint{URL: base, Kind: Serve, APIKey: "open"}, ids: ids, fail: StepKey, why: "HTTP 401: the server refuses the key sent"},
		{name: "no key", ep: Endpoint{URL: base, Kind: SGLang}, ids: ids, fail: StepKey, why: "HTTP 401 without a key"},
		{name: "dead port", ep: Endpoint{URL: deadURL, Kind: SGLang}, ids: ids, fail: StepReach, why: "connection refused"},
		{name: "still loading", ep: Endpoint{URL: loading.URL, Kind: VLLM}, ids: ids, fail: StepReach, why: "HTTP 503"},
		{name: "not an SGLang server", ep: Endpoint{URL: notSGLang.URL, Kind: SGLang}, ids: ids, fail: StepModel, why: "does not speak sglang's protocol"},
		{name: "another tokenizer", ep: Endpoint{URL: base, Kind: Serve, APIKey: "sesame"}, ids: other, fail: StepProbe, why: "serves another tokenizer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d := Diagnose(ctx, tc.ep, tc.ids, nil)
			if d.Failed != tc.fail {
				t.Fatalf("failed at %q (%v); want %q", d.Failed, d.Err, tc.fail)
			}
			if strings.Contains(d.Engine, "sesame") || strings.Contains(d.Engine, "open") {
				t.Errorf("engine %q names the key", d.Engine)
			}
			if tc.fail != "" {
				if d.Err == nil || !strings.Contains(d.Err.Error(), tc.why) {
					t.Errorf("error %v; want one saying %q", d.Err, tc.why)
				}
				return
			}
			if d.Err != nil || d.Model != tc.model {
				t.Errorf("model %q, error %v; want %q and none", d.Model, d.Err, tc.model)
			}
			if want := len(ids); tc.ids != nil && d.Tokens != want {
				t.Errorf("tokens %d; want the probe's %d", d.Tokens, want)
			}
		})
	}
}
