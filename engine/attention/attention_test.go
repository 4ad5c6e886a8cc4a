package attention

import (
	"errors"
	"strings"
	"testing"

	"agentrl/engine/model"
)

// TestResolveAttention: the path each model.attention takes where fused attention is missing,
// fails to compile or works, and the line (or refusal) that says why.
func TestResolveAttention(t *testing.T) {
	noOp := func() (string, error) { return "the go backend has no fused attention op", nil }
	fails := func() (string, error) { return "", errors.New("INTERNAL: cuDNN rejected the graph\nstack trace …") }
	works := func() (string, error) { return "", nil }
	for _, tc := range []struct {
		name, asked string
		probe       func() (string, error)
		seqLen      int
		want        model.AttentionKind
		line        []string // parts of the start line (or of the error)
		wantErr     bool
	}{
		{"auto without the op, long sequences: chunked, the reason said", "auto", noOp, 1024, model.AttentionAuto,
			[]string{"chunked, blocks of 256 queries", "auto: the go backend has no fused attention op"}, false},
		{"auto without the op, short sequences: dense", "auto", noOp, 128, model.AttentionAuto, []string{"dense", "auto: the go backend"}, false},
		{"auto, fused compiles", "auto", works, 16384, model.AttentionAuto, []string{"fused (auto: cuDNN flash attention, its program compiled for 16384 tokens)"}, false},
		{"auto, fused fails to compile: falls back to chunked", "auto", fails, 16384, model.AttentionChunked,
			[]string{"chunked, blocks of 256 queries", "fused attention program failed to compile for a 16384-token sequence, so chunked: INTERNAL: cuDNN rejected the graph"}, false},
		{"fused without the op: refused", "fused", noOp, 1024, "", []string{"model.attention: fused: the go backend has no fused attention op", "set model.attention: auto"}, true},
		{"fused fails to compile: refused", "fused", fails, 1024, "", []string{"model.attention: fused: the fused attention program failed to compile", "cuDNN rejected"}, true},
		{"fused compiles", "fused", works, 1024, model.AttentionFused, []string{"fused (model.attention: fused)"}, false},
		{"chunked as asked, nothing probed", "chunked", nil, 1024, model.AttentionChunked, []string{"chunked (model.attention: chunked)"}, false},
		{"dense as asked, nothing probed", "dense", nil, 1024, model.AttentionDense, []string{"dense (model.attention: dense)"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probe := tc.probe
			if probe == nil {
				probe = func() (string, error) {
					t.Fatal("probed fused attention for an explicit non-fused path")
					return "", nil
				}
			}
			kind, line, err := Resolve(tc.asked, probe, tc.seqLen, 256)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v; want error %v", err, tc.wantErr)
			}
			if err != nil {
				line = err.Error()
			}
			if kind != tc.want {
				t.Errorf("kind %q; want %q", kind, tc.want)
			}
			for _, part := range tc.line {
				if !strings.Contains(line, part) {
					t.Errorf("%q; want it to contain %q", line, part)
				}
			}
			if strings.Contains(line, "stack trace") {
				t.Errorf("%q carries the compile error past its first line", line)
			}
		})
	}
}
