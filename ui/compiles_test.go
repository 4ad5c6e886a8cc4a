package ui

import (
	"testing"

	"agentrl/engine/event"
)

func TestCompiledText(t *testing.T) {
	gen := map[string]event.Compiled{"decode": {Programs: 2, Seconds: 0.5}, "prefill": {Programs: 4, Seconds: 1.5}}
	all := map[string]event.Compiled{"decode": {Programs: 2, Seconds: 0.5}, "prefill": {Programs: 4, Seconds: 1.5}, "train": {Programs: 1, Seconds: 1}}
	tests := []struct {
		name       string
		events     []event.Event
		text, late string
		ok         bool
	}{
		{"nothing yet", nil, "", "", false},
		{"run start: the generator's", []event.Event{event.RunStart{Compiles: gen}}, "6 programs (decode 2, prefill 4), 2.00s", "", true},
		{"step 1", []event.Event{event.RunStart{Compiles: gen},
			event.StepMetrics{Step: 1, Compiles: all, Metrics: map[event.Metric]float64{"compiles": 7, "compiles_new": 7, "compile_s": 3}}},
			"7 programs (decode 2, prefill 4, train 1), 3.00s", "", true},
		{"stored run: totals only", []event.Event{event.StepMetrics{Step: 2, Metrics: map[event.Metric]float64{"compiles": 1, "compile_total_s": 0.25}}},
			"1 program, 0.25s", "", true},
		{"a later step compiled", []event.Event{event.StepMetrics{Step: 3, Compiles: all, Metrics: map[event.Metric]float64{"compiles": 7, "compiles_new": 1, "compile_s": 1}}},
			"7 programs (decode 2, prefill 4, train 1), 3.00s", "step 3 compiled 1 new program (1.00s)", true},
		{"the XLA backend's cache: a second start", []event.Event{event.RunStart{Compiles: map[string]event.Compiled{
			"decode": {Programs: 2, Seconds: 0.5, CacheHits: 2}, "prefill": {Programs: 4, Seconds: 20, CacheHits: 3, CacheMisses: 1}}}},
			"6 programs (decode 2, prefill 4), 20.5s; cache: 5 loaded, 1 compiled", "", true},
	}
	for _, tt := range tests {
		d := newRunData()
		for _, e := range tt.events {
			d.apply(e)
		}
		text, late, ok := compiledText(d)
		if text != tt.text || late != tt.late || ok != tt.ok {
			t.Errorf("%s: got %q, %q, %v; want %q, %q, %v", tt.name, text, late, ok, tt.text, tt.late, tt.ok)
		}
	}
}
