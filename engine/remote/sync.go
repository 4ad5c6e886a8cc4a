package remote

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"agentrl/engine/model"
	"agentrl/store/safetensors"
)

// WriteWeights writes p as a HuggingFace folder the servers load: config.json (its torch_dtype
// the written dtype), files (the tokenizer's, generation_config.json; config.json among them is
// replaced) and the weights in dt (BF16 by default, as `agentrl-tui export --dtype bf16` writes
// them), in shards of at most shardBytes (0: one model.safetensors) with their index. A LoRA
// policy's adapters are merged into its base weights (as its checkpoints export), so the servers
// load a plain model. Each file is replaced atomically; weights of an earlier layout are removed,
// so a server never reads a mix.
func WriteWeights(dir string, p *model.Params, files map[string][]byte, dt safetensors.DType, shardBytes int64) error {
	if dt == "" {
		dt = safetensors.BF16
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("remote: the weights folder %s: %w", dir, err)
	}
	ts, err := p.Tensors(dt)
	if err != nil {
		return fmt.Errorf("remote: converting the policy to %s: %w", dt, err)
	}
	if l := p.Config.LoRA; l.Enabled() {
		if ts, err = safetensors.MergeLoRA(ts, l.Scale()); err != nil {
			return fmt.Errorf("remote: the policy's LoRA adapters: %w", err)
		}
	}
	if err := safetensors.WriteDir(dir, map[string]string{"format": "pt"}, ts, shardBytes); err != nil {
		return fmt.Errorf("remote: writing the policy into %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if n == "config.json" || filepath.Base(n) != n || strings.HasSuffix(n, ".safetensors") || strings.HasSuffix(n, ".index.json") {
			continue
		}
		if err := writeAtomic(filepath.Join(dir, n), files[n]); err != nil {
			return err
		}
	}
	cfg := *p.Config
	cfg.LoRA = model.LoRA{} // merged: the folder is a plain model
	cfg.DType = map[safetensors.DType]string{safetensors.F32: "float32", safetensors.BF16: "bfloat16", safetensors.F16: "float16"}[dt]
	js, err := cfg.JSON()
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, "config.json"), js)
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("remote: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("remote: writing %s: %w", path, err)
	}
	return nil
}

// Probe is the check that an engine runs the policy: a prompt's text, its token ids under the
// policy's tokenizer and the policy's log-prob of each token after the ones before it (entry 0
// unused), to be matched within Tolerance (the largest |difference| allowed).
type Probe struct {
	Text      string
	IDs       []int32
	LogProbs  []float64
	Tolerance float64
}

// Check is what one engine answered a probe with.
type Check struct {
	Engine  string  // kind and URL
	MaxDiff float64 // max |server − policy| over the prompt's tokens 1…
	Err     error   // the engine did not answer, tokenised differently, or reported other weights
}

// probeOne sends p to e and compares; version, when not "", is the weight version a server that
// reports one must report.
func probeOne(ctx context.Context, e *engine, p Probe, version string) Check {
	c := Check{Engine: e.name()}
	got, err := e.c.probe(ctx, p.IDs, p.Text)
	if err != nil {
		c.Err = fmt.Errorf("the probe failed: %w", err)
		return c
	}
	if !equalIDs(got.IDs, p.IDs) {
		c.Err = fmt.Errorf("it tokenises the probe %q as %d tokens %v, the policy's tokenizer as %d tokens %v: it serves another tokenizer (start it on the policy's folder)",
			short(p.Text), len(got.IDs), head(got.IDs), len(p.IDs), head(p.IDs))
		return c
	}
	if version != "" && got.WeightVersion != "" && got.WeightVersion != version {
		c.Err = fmt.Errorf("it reports weight version %q after the push of %q: stale weights", got.WeightVersion, version)
		return c
	}
	for i := 1; i < len(p.IDs); i++ {
		c.MaxDiff = max(c.MaxDiff, math.Abs(got.LogProbs[i]-p.LogProbs[i]))
	}
	return c
}

// Verify checks, before the first rollout, that every engine answers and serves the policy: the
// probe's token ids equal and its log-probs within tolerance. Any failure is an error naming the
// engine and what differed.
func (f *Fleet) Verify(ctx context.Context, p Probe) ([]Check, error) {
	checks := f.each(ctx, func(ctx context.Context, e *engine) Check { return probeOne(ctx, e, p, "") })
	for _, c := range checks {
		if c.Err != nil {
			return checks, fmt.Errorf("remote: %s: %w", c.Engine, c.Err)
		}
		if c.MaxDiff > p.Tolerance {
			return checks, fmt.Errorf("remote: %s: its log-probs of the probe differ from the policy's by up to %.3g (tolerance %.3g): it serves another model or other weights (start it on the policy's folder)",
				c.Engine, c.MaxDiff, p.Tolerance)
		}
	}
	return checks, nil
}

// SyncReport is a weight push: each engine's check, the largest probe difference over the
// engines that took the weights, and how many engines are out of the rotation after it.
type SyncReport struct {
	Checks  []Check
	MaxDiff float64
	Down    int
}

// Push tells every engine (those out of the rotation too) to load the weights in dir, labelled
// version, then probes each: one that fails to reload or to answer, or reports another
// version, leaves the rotation (or stays out); one that passes comes (back) in. Log-prob
// differences past the tolerance are reported (SyncReport.MaxDiff), not acted on: the caller
// raises the alarm. Push never fails the step: with every engine out, the next Generate does.
func (f *Fleet) Push(ctx context.Context, dir, version string, p Probe) SyncReport {
	checks := f.each(ctx, func(ctx context.Context, e *engine) Check {
		if err := e.c.reload(ctx, dir, version); err != nil {
			return Check{Engine: e.name(), Err: err}
		}
		return probeOne(ctx, e, p, version)
	})
	r := SyncReport{Checks: checks}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range checks {
		e := f.engines[i]
		if c.Err != nil {
			e.down = c.Err
			e.errors++
			r.Down++
			continue
		}
		e.down = nil
		r.MaxDiff = max(r.MaxDiff, c.MaxDiff)
	}
	return r
}

// each runs fn on every engine at once and returns the results in engine order.
func (f *Fleet) each(ctx context.Context, fn func(context.Context, *engine) Check) []Check {
	out := make([]Check, len(f.engines))
	var wg sync.WaitGroup
	for i, e := range f.engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
			defer cancel()
			out[i] = fn(rctx, e)
		}()
	}
	wg.Wait()
	return out
}

// ResolveModels asks each vLLM engine for the model it serves: its name, when none was given,
// and the folder it was started on (what its reload_weights reads again).
func (f *Fleet) ResolveModels(ctx context.Context) error {
	for _, e := range f.engines {
		if e.c.ep.Kind != VLLM {
			continue
		}
		m, root, err := e.c.model(ctx)
		if err != nil {
			return fmt.Errorf("remote: %s: %w", e.name(), err)
		}
		if e.c.ep.Model == "" {
			e.c.ep.Model = m
		}
		e.root = root
	}
	return nil
}

// CheckReloadFolders checks that each vLLM engine was started on dir, the folder the policy is
// written into (ReloadFolderErr).
func (f *Fleet) CheckReloadFolders(dir string) error {
	for _, e := range f.engines {
		if err := ReloadFolderErr(e.c.ep.Kind, e.root, dir); err != nil {
			return fmt.Errorf("remote: %s %w", e.name(), err)
		}
	}
	return nil
}

// ReloadFolderErr says why an engine of kind that was started on root ("" or relative: it did not
// say) would never load the policy written into dir (rollout.remote.weights_dir; "": engines/RUN
// beside the run's store, a folder no server was started on): vLLM's reload_weights re-reads the
// folder the server was started on, so an engine on another passes the first probe (it serves the
// policy as it started) and then never loads an update. nil for the other kinds, which are told
// the folder.
func ReloadFolderErr(kind Kind, root, dir string) error {
	if kind != VLLM || root == "" || !filepath.IsAbs(root) {
		return nil
	}
	if dir == "" {
		return fmt.Errorf("was started on %s, and with rollout.remote.weights_dir empty the policy is written into engines/RUN beside the run's store: vLLM's reload_weights re-reads the folder it was started on, so it would never load an update; set rollout.remote.weights_dir: %s", root, root)
	}
	want, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if filepath.Clean(root) == want {
		return nil
	}
	return fmt.Errorf("was started on %s, but the policy is written into %s (rollout.remote.weights_dir): vLLM's reload_weights re-reads the folder it was started on, so it would never load an update; start it on %s, or set rollout.remote.weights_dir: %s",
		root, want, want, root)
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func head(ids []int32) []int32 {
	if len(ids) > 8 {
		return ids[:8]
	}
	return ids
}
