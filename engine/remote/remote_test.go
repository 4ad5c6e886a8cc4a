package remote

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/serve"
	"agentrl/engine/tokenizer"
	"agentrl/store/safetensors"
)

var builtinDir = filepath.Join("..", "..", "testdata", "builtin")

// probeText is a chat opening the built-in model's tokenizer knows.
const probeText = "<|im_start|>user\nWhat is 17 times 23?<|im_end|>\n<|im_start|>assistant\n"

// builtin loads the built-in model (a model of its own per call: a server reloads weights into it).
func builtin(t testing.TB) (*model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	b, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(b, builtinDir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(builtinDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, tok
}

// startServe serves m as `agentrl-tui serve` does (engine endpoints included) and returns its
// base URL (without /v1) and the server.
func startServe(t testing.TB, m *model.Model, tok *tokenizer.Tokenizer, key string) (string, *serve.Server) {
	t.Helper()
	return startServeWith(t, m, tok, key, "")
}

// startServeWith is startServe keeping uploaded weights in uploads ("": a private folder).
func startServeWith(t testing.TB, m *model.Model, tok *tokenizer.Tokenizer, key, uploads string) (string, *serve.Server) {
	t.Helper()
	gen, err := rollout.New(m, rollout.Config{Slots: 4, MaxLen: 256, Truncation: true, Decode: func(ids []int32) string { return tok.Decode(ids, false) }})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(gen, tok, serve.Options{ModelName: "policy", Open: true, Preempt: true, APIKey: key, ModelPath: builtinDir,
		Score:  m.NextLogProbs,
		Reload: m.Params.ReloadFrom, UploadDir: uploads})
	if err != nil {
		t.Fatal(err)
	}
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); gen.Close() })
	return base, srv
}

// policyProbe is the probe with m's own log-probs.
func policyProbe(t testing.TB, m *model.Model, tok *tokenizer.Tokenizer, tol float64) Probe {
	t.Helper()
	ids := tok.Encode(probeText)
	sc, err := m.Score([][]int32{ids})
	if err != nil {
		t.Fatal(err)
	}
	lps := []float64{math.NaN()}
	for _, v := range sc.NextLogProbs[0][:len(ids)-1] {
		lps = append(lps, float64(v))
	}
	return Probe{Text: probeText, IDs: ids, LogProbs: lps, Tolerance: tol}
}

// TestServeEngineMatchesLocal: the serve kind and the vllm kind against a served built-in model
// sample, for the same seed, the tokens and log-probs the local generator samples; the probe
// passes Verify; a wrong key is refused with a 401.
func TestServeEngineMatchesLocal(t *testing.T) {
	m, tok := builtin(t)
	base, _ := startServe(t, m, tok, "sesame")
	stops := tok.ChatStopIDs()
	prompt := tok.Encode(probeText)
	req := rollout.Request{Append: prompt, MaxNew: 24, StopIDs: stops, StopStrings: []string{"</code>"}, Sampling: rollout.Sampling{Temperature: 1, Seed: 1<<63 + 12345}}
	want, err := rollout.GenerateOnce(context.Background(), m, tok, prompt, 24, req.Sampling)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []Kind{Serve, VLLM} {
		t.Run(string(kind), func(t *testing.T) {
			seed := req.Sampling.Seed
			if kind == VLLM { // a signed 64-bit seed on the wire: the local run's seed without its top bit
				r2 := req
				r2.Sampling.Seed = seed & math.MaxInt64
				if want, err = rollout.GenerateOnce(context.Background(), m, tok, prompt, 24, r2.Sampling); err != nil {
					t.Fatal(err)
				}
			}
			f, err := New(Config{Endpoints: []Endpoint{{URL: base, Kind: kind, APIKey: "sesame"}}, MaxLen: 256})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.ResolveModels(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Verify(context.Background(), policyProbe(t, m, tok, 1e-4)); err != nil {
				t.Fatal(err)
			}
			s, _ := f.Open(context.Background())
			got, err := s.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.IDs) != len(want.IDs) {
				t.Fatalf("remote %v (%s); local %v (%s)", got.IDs, got.Stop, want.IDs, want.Stop)
			}
			for i := range got.IDs {
				if got.IDs[i] != want.IDs[i] || math.Abs(float64(got.LogProbs[i]-want.LogProbs[i])) > 1e-4 {
					t.Fatalf("token %d: remote %d (%g); local %d (%g)", i, got.IDs[i], got.LogProbs[i], want.IDs[i], want.LogProbs[i])
				}
			}
			if got.Stop != want.Stop && !(want.Stop == rollout.StopToken && got.Stop == rollout.StopToken) {
				t.Errorf("stop %s; local %s", got.Stop, want.Stop)
			}
			if s.Len() != len(prompt)+len(got.IDs) {
				t.Errorf("session context %d tokens; want %d", s.Len(), len(prompt)+len(got.IDs))
			}
		})
	}
	bad, _ := New(Config{Endpoints: []Endpoint{{URL: base, Kind: Serve, APIKey: "wrong"}}, MaxLen: 256})
	_, err = bad.Verify(context.Background(), policyProbe(t, m, tok, 1e-4))
	var se *errStatus
	if !errors.As(err, &se) || se.status != http.StatusUnauthorized {
		t.Errorf("a wrong key: %v; want a 401", err)
	}
}

// TestPushReloadsAndProbes: weights written by WriteWeights (perturbed, f32) and pushed reach
// the server, whose probe then matches the perturbed model's and reports the pushed version;
// bf16 weights match within the bf16 tolerance.
func TestPushReloadsAndProbes(t *testing.T) {
	m, tok := builtin(t)
	base, _ := startServe(t, m, tok, "")
	trainer, _ := builtin(t)
	ts, err := trainer.Params.Tensors(safetensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range ts { // the trained weights: the final norm scaled
		if st.Name == "model.norm.weight" {
			v, _ := st.Float32()
			for j := range v {
				v[j] *= 1.5
			}
			ts[i], _ = safetensors.FromFloat32(st.Name, st.Shape, v, safetensors.F32)
		}
	}
	if err := trainer.Params.SetFromTensors(ts, "test"); err != nil {
		t.Fatal(err)
	}
	tj, err := os.ReadFile(filepath.Join(builtinDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"tokenizer.json": tj}
	// The second engine takes the files over HTTP into a folder of its own.
	m2, _ := builtin(t)
	uploads := t.TempDir()
	base2, _ := startServeWith(t, m2, tok, "", uploads)
	f, _ := New(Config{Endpoints: []Endpoint{{URL: base, Kind: Serve}, {URL: base2, Kind: Serve, Upload: true}}, MaxLen: 256})
	old := policyProbe(t, m, tok, 1e-4)
	probe := policyProbe(t, trainer, tok, 1e-4)
	d := 0.0
	for i := 1; i < len(old.LogProbs); i++ {
		d = max(d, math.Abs(old.LogProbs[i]-probe.LogProbs[i]))
	}
	if d < 1e-2 {
		t.Fatalf("the perturbation moves the probe by %g only: no test", d)
	}
	for _, dt := range []safetensors.DType{safetensors.F32, safetensors.BF16} {
		dir := t.TempDir()
		if err := WriteWeights(dir, trainer.Params, files, dt, 1<<20); err != nil {
			t.Fatal(err)
		}
		tol := 1e-4
		if dt == safetensors.BF16 {
			tol = 0.25
		}
		probe.Tolerance = tol
		version := "run/1-v " + string(dt) // the upload's folder is a plain name made from it
		rep := f.Push(context.Background(), dir, version, probe)
		if rep.Down != 0 || rep.Checks[0].Err != nil || rep.Checks[1].Err != nil {
			t.Fatalf("%s: push: %+v", dt, rep.Checks)
		}
		if rep.MaxDiff > tol {
			t.Errorf("%s: probe differs by %g after the push; want ≤ %g", dt, rep.MaxDiff, tol)
		}
		for _, c := range rep.Checks {
			t.Logf("%s weights, %s: probe max |diff| %.3g", dt, c.Engine, c.MaxDiff)
		}
		// The uploaded engine holds this version's folder alone (the last one's removed), every
		// file as written.
		got, err := os.ReadDir(uploads)
		if err != nil || len(got) != 1 || got[0].Name() != "run_1-v_"+string(dt) {
			t.Fatalf("%s: the upload folder holds %v (%v); want run_1-v_%s alone", dt, got, err, dt)
		}
		want, _ := os.ReadDir(dir)
		for _, e := range want {
			a, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			b, err := os.ReadFile(filepath.Join(uploads, got[0].Name(), e.Name()))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s: uploaded %s differs from the written one (%v)", dt, e.Name(), err)
			}
		}
	}
}

// TestFailoverAndStall: with one engine refusing connections (killed) and one that never answers
// (stalled past the timeout), every request is answered by the live one and the failovers are
// counted; with every engine down Generate fails, naming each.
func TestFailoverAndStall(t *testing.T) {
	m, tok := builtin(t)
	live, _ := startServe(t, m, tok, "")
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	release := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer stall.Close()
	defer close(release)
	var observed atomic.Int64
	f, _ := New(Config{Endpoints: []Endpoint{{URL: deadURL, Kind: Serve}, {URL: stall.URL, Kind: SGLang}, {URL: live, Kind: Serve}}, MaxLen: 256, Timeout: 2 * time.Second,
		Observe: func() { observed.Add(1) }})
	prompt := tok.Encode(probeText)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	var tokens atomic.Int64
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _ := f.Open(context.Background())
			res, err := s.Generate(context.Background(), rollout.Request{Append: prompt, MaxNew: 8, StopIDs: tok.ChatStopIDs(), Sampling: rollout.Sampling{Temperature: 1, Seed: uint64(i)}})
			tokens.Add(int64(len(res.IDs)))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := f.Stats()
	if st.Requests != 4 || st.Failovers < 2 || st.Down != 2 {
		t.Errorf("stats %+v; want 4 answered, at least 2 failovers (the dead and the stalled engine), 2 down", st)
	}
	// Each engine's own counters: the dead and the stalled one failed over and are down; the
	// live one answered all four, its tokens those returned, busy while it worked.
	es := f.Engines()
	if want := 4 + st.Failovers; observed.Load() != want {
		t.Errorf("Observe called %d times; want %d (every request's end on an engine)", observed.Load(), want)
	}
	for i, e := range es[:2] {
		if e.Down == nil || e.Failovers < 1 || e.Done != 0 || e.InFlight != 0 {
			t.Errorf("engine %d (%s): %+v; want down with a failover, nothing answered", i, e.URL, e)
		}
	}
	if e := es[2]; e.Down != nil || e.Done != 4 || e.Tokens != tokens.Load() || e.Tokens == 0 || e.Busy <= 0 || e.InFlight != 0 || e.Failovers != 0 || e.Errors != 0 {
		t.Errorf("live engine: %+v; want up, 4 answered, %d tokens, busy > 0, no failover or error", e, tokens.Load())
	}
	// A request the server refuses (4xx) is its error, not a failover: it stays in the rotation.
	s, _ := f.Open(context.Background())
	if _, err := s.Generate(context.Background(), rollout.Request{Append: []int32{1 << 30}, MaxNew: 4}); err == nil {
		t.Fatal("a token id past the vocabulary: no error")
	}
	if e := f.Engines()[2]; e.Errors != 1 || e.Down != nil || e.Failovers != 0 {
		t.Errorf("after a refused request: %+v; want 1 error, still up, no failover", e)
	}
	f2, _ := New(Config{Endpoints: []Endpoint{{URL: deadURL, Kind: VLLM, Model: "x"}}, MaxLen: 256})
	s, _ = f2.Open(context.Background())
	if _, err := s.Generate(context.Background(), rollout.Request{Append: prompt, MaxNew: 4}); err == nil {
		t.Error("every engine down: no error")
	}
}
