package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"agentrl/engine/model"
	"agentrl/engine/rollout"
	"agentrl/engine/serve"
	"agentrl/engine/tokenizer"
)

// ServeConfig is a serving benchmark: bench rollout's requests (Bench) straight into a
// generator, then the same requests through the HTTP endpoint from Clients concurrent clients
// (each one API key, one request at a time), alternating Rounds times.
type ServeConfig struct {
	Bench   rollout.BenchConfig
	Clients int
	Rounds  int
}

// ServeRun is one timed pass over the requests.
type ServeRun struct {
	Requests       int           `json:"requests"`
	Tokens         int64         `json:"tokens"`
	Wall           time.Duration `json:"wall_ns"`
	RequestsPerSec float64       `json:"requests_per_s"`
	TokensPerSec   float64       `json:"tokens_per_s"`
	StepMillis     float64       `json:"step_ms"`
	Occupancy      float64       `json:"slot_occupancy"`
}

// ServeResult is what `bench serve` measured: each round's direct and HTTP passes, the best of
// each, and what the HTTP layer costs: Ratio is the best HTTP tokens/s over the best direct
// tokens/s, Overhead 1 − Ratio.
type ServeResult struct {
	Clients   int        `json:"clients"`
	Slots     int        `json:"slots"`
	Sequences int        `json:"sequences"`
	PromptLen int        `json:"prompt_len"`
	NewTokens int        `json:"new_tokens"`
	Direct    []ServeRun `json:"rollout"`
	HTTP      []ServeRun `json:"serve"`
	Ratio     float64    `json:"ratio"`
	Overhead  float64    `json:"overhead"`
	CPU       string     `json:"cpu,omitempty"`
	Kernels   string     `json:"kernels,omitempty"`
}

// Serve runs c on model m with tokenizer tok (the server renders and decodes with it).
// Both passes sample at temperature 1 with each request's own seed and generate exactly
// NewTokens tokens (the HTTP requests ask for ignore_eos, as the direct ones stop on nothing).
func Serve(ctx context.Context, m *model.Model, tok *tokenizer.Tokenizer, c ServeConfig) (*ServeResult, error) {
	bc := c.Bench
	if bc.Gen.Slots <= 0 {
		bc.Gen.Slots = 8
	}
	if bc.Gen.MaxLen == 0 {
		bc.Gen.MaxLen = model.Bucket(bc.PromptLen + bc.NewTokens + 1)
	}
	c.Clients, c.Rounds = max(c.Clients, 1), max(c.Rounds, 1)
	out := &ServeResult{Clients: c.Clients, Slots: bc.Gen.Slots, Sequences: bc.Sequences, PromptLen: bc.PromptLen, NewTokens: bc.NewTokens}
	for range c.Rounds {
		d, err := rollout.Bench(ctx, m, bc)
		if err != nil {
			return nil, err
		}
		out.Direct = append(out.Direct, ServeRun{Requests: bc.Sequences, Tokens: d.Tokens, Wall: d.Wall, TokensPerSec: d.TokensPerSec,
			RequestsPerSec: float64(bc.Sequences) / d.Wall.Seconds(), StepMillis: d.StepMillis, Occupancy: d.Occupancy})
		h, err := httpPass(ctx, m, tok, bc, c.Clients)
		if err != nil {
			return nil, err
		}
		out.HTTP = append(out.HTTP, *h)
	}
	best := func(rs []ServeRun) float64 {
		b := 0.0
		for _, r := range rs {
			b = max(b, r.TokensPerSec)
		}
		return b
	}
	if d := best(out.Direct); d > 0 {
		out.Ratio = best(out.HTTP) / d
		out.Overhead = 1 - out.Ratio
	}
	return out, nil
}

// httpPass serves m on a generator of bc.Gen and sends bc's requests as completions of token
// ids from clients concurrent clients, timing from the first request to the last reply.
func httpPass(ctx context.Context, m *model.Model, tok *tokenizer.Tokenizer, bc rollout.BenchConfig, clients int) (*ServeRun, error) {
	gcfg := bc.Gen
	gcfg.Decode = func(ids []int32) string { return tok.Decode(ids, false) }
	gen, err := rollout.New(m, gcfg)
	if err != nil {
		return nil, err
	}
	defer gen.Close()
	srv, err := serve.New(gen, tok, serve.Options{ModelName: "bench", Open: true, Preempt: true, Sampling: serve.Sampling{Temperature: 1}})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	before := gen.Stats()
	var next atomic.Int64
	var tokens atomic.Int64
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for k := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < bc.Sequences; i = int(next.Add(1) - 1) {
				n, err := postCompletion(ctx, hc, base, fmt.Sprintf("client-%d", k), rollout.BenchPrompt(bc, i, m.Config.VocabSize), bc.NewTokens, bc.Seed+uint64(i))
				if err != nil {
					errs <- fmt.Errorf("bench serve: request %d: %w", i, err)
					return
				}
				tokens.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	st := gen.Stats()
	r := &ServeRun{Requests: bc.Sequences, Tokens: st.Tokens - before.Tokens, Wall: wall}
	if r.Tokens != tokens.Load() || r.Tokens != int64(bc.Sequences*bc.NewTokens) {
		return nil, fmt.Errorf("bench serve: the generator sampled %d tokens and the replies counted %d; want %d × %d", r.Tokens, tokens.Load(), bc.Sequences, bc.NewTokens)
	}
	r.TokensPerSec = float64(r.Tokens) / wall.Seconds()
	r.RequestsPerSec = float64(r.Requests) / wall.Seconds()
	if steps := st.Steps - before.Steps; steps > 0 {
		r.StepMillis = (st.StepTime - before.StepTime).Seconds() * 1000 / float64(steps)
		r.Occupancy = float64(st.SlotSteps-before.SlotSteps) / float64(steps*int64(gcfg.Slots))
	}
	return r, nil
}

// postCompletion posts one completion of prompt ids and returns the tokens it generated.
func postCompletion(ctx context.Context, hc *http.Client, base, key string, prompt []int32, newTokens int, seed uint64) (int, error) {
	body, _ := json.Marshal(map[string]any{"model": "bench", "prompt": prompt, "max_tokens": newTokens, "ignore_eos": true,
		"temperature": 1, "seed": seed})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/completions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, data)
	}
	var r struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, err
	}
	return r.Usage.CompletionTokens, nil
}

// Write prints the result for a person.
func (b *ServeResult) Write(w io.Writer) {
	if b.Kernels != "" {
		fmt.Fprintf(w, "kernels: %s\n", b.Kernels)
	}
	if b.CPU != "" {
		fmt.Fprintf(w, "cpu: %s\n", b.CPU)
	}
	fmt.Fprintf(w, "%d requests of %d prompt + %d new tokens, %d slots; HTTP from %d concurrent clients\n", b.Sequences, b.PromptLen, b.NewTokens, b.Slots, b.Clients)
	for i := range b.Direct {
		d, h := b.Direct[i], b.HTTP[i]
		fmt.Fprintf(w, "round %d: generator %.1f tokens/s, %.2f requests/s (%.2f ms/step); HTTP %.1f tokens/s, %.2f requests/s (%.2f ms/step)\n",
			i+1, d.TokensPerSec, d.RequestsPerSec, d.StepMillis, h.TokensPerSec, h.RequestsPerSec, h.StepMillis)
	}
	fmt.Fprintf(w, "best HTTP / best generator = %.3f: the HTTP layer costs %.1f%% of throughput", b.Ratio, 100*b.Overhead)
	if b.Overhead < 0 {
		fmt.Fprint(w, " (the HTTP pass was the faster one: the difference is run-to-run noise)")
	}
	fmt.Fprintln(w)
}
