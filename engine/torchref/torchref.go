// Package torchref runs the PyTorch references the benchmarks set the engine against. On the CPU,
// cpu.py (Run): a decoder of the engine's model layout with random weights, timed on the same work
// as the Go backend (decode with a KV cache; one training update in micro-batches); it needs only
// a python3 with torch (Debian's python3-torch), and Find picks one or says why none. On a GPU,
// generate.py (Generate): transformers' generate on the same shape and lengths.
package torchref

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"agentrl/engine/model"
)

//go:embed cpu.py
var cpuScript string

// Auto is the --torch-python value that searches Candidates; the empty string skips the reference.
const Auto = "auto"

// Candidates are the pythons Auto tries, in order: the one on PATH, then the system's (where
// Debian's python3-torch installs torch).
func Candidates() []string { return []string{"python3", "/usr/bin/python3"} }

// Spec is what cpu.py runs: the model's shape and numerics (the config's own JSON fields, as in
// config.json), the threads torch may use, and the work to time (Decode, Train, or both). Weights
// and CheckIDs serve the tests: a safetensors file (or folder) to load instead of random weights,
// and ids whose next-token log-probs to print.
type Spec struct {
	model.Config

	Threads int `json:"threads"`
	Seed    int `json:"seed"`
	// Matmul are the sizes n of n×n float32 matrix products whose best FLOP/s to report.
	Matmul  []int  `json:"matmul,omitempty"`
	Weights string `json:"weights,omitempty"`
	// BLASDir, when set, is put first on torch's LD_LIBRARY_PATH, so that its libblas.so.3 is the
	// one torch loads (see BLASDir).
	BLASDir  string  `json:"-"`
	CheckIDs []int32 `json:"check_ids,omitempty"`
	Decode   *Decode `json:"decode,omitempty"`
	Train    *Train  `json:"train,omitempty"`
	// SFT is a supervised step as sft --data takes one: cross-entropy on the tokens after the
	// prompt, gradients accumulated over the micro-batches into one AdamW update (Updates timed).
	SFT *Train `json:"sft,omitempty"`
}

// Decode is a generation run: Sequences requests of PromptLen random tokens, each sampling
// NewTokens tokens at temperature 1, Slots sequences at a time with a KV cache.
type Decode struct {
	Slots     int `json:"slots"`
	Sequences int `json:"sequences"`
	PromptLen int `json:"prompt_len"`
	NewTokens int `json:"new_tokens"`
}

// Train is one training update: Sequences random sequences of Length tokens, the first Prompt of
// them outside the loss, in micro-batches of MicroBatch with an AdamW update each; the best of
// Updates timed updates after an untimed one.
type Train struct {
	Sequences  int `json:"sequences"`
	Length     int `json:"length"`
	Prompt     int `json:"prompt"`
	MicroBatch int `json:"micro_batch"`
	Updates    int `json:"updates"`
}

// NewSpec is the spec of model shape c with torch on threads threads and no work yet.
func NewSpec(c *model.Config, threads int) Spec {
	return Spec{Config: *c, Threads: threads, Seed: 1}
}

// Result is what cpu.py measured, and with which python and torch.
type Result struct {
	Python  string `json:"python"`
	Torch   string `json:"torch"`
	Device  string `json:"device"`
	Threads int    `json:"threads"`
	// Params is the reference model's parameter count: equal to the engine model's when the shape
	// is the same.
	Params int64 `json:"params"`
	// BLAS names the BLAS libraries torch has loaded (Debian's torch runs its matrix products on
	// whichever libblas.so.3 the system selects: the reference BLAS is single-threaded and slow,
	// OpenBLAS is not).
	BLAS string `json:"blas"`
	// MatmulFLOPs is torch's best float32 n×n product over the n of Matmul, in FLOP/s (0 unless
	// asked).
	Matmul        []int         `json:"matmul,omitempty"`
	MatmulFLOPs   float64       `json:"matmul_flops_per_s,omitempty"`
	CheckLogProbs []float64     `json:"check_logprobs,omitempty"`
	Decode        *DecodeResult `json:"decode,omitempty"`
	Train         *TrainResult  `json:"train,omitempty"`
	SFT           *TrainResult  `json:"sft,omitempty"`
}

// DecodeResult is the reference's generation: sampled tokens, the timed wall time (prefill
// included, warm-up excluded), tokens/s and the mean time per model call (prefill or decode step).
type DecodeResult struct {
	Tokens       int     `json:"tokens"`
	WallSeconds  float64 `json:"wall_s"`
	TokensPerSec float64 `json:"tokens_per_s"`
	StepMillis   float64 `json:"step_ms"`
}

// TrainResult is the reference's training update: trained tokens, the best timed update, its
// tokens/s and time per micro-batch, and the untimed first update.
type TrainResult struct {
	TrainedTokens int     `json:"trained_tokens"`
	UpdateSeconds float64 `json:"update_s"`
	TokensPerSec  float64 `json:"tokens_per_s"`
	MicroStepMs   float64 `json:"micro_step_ms"`
	FirstUpdate   float64 `json:"first_update_s"`
}

// Find picks the python to run the reference with: flag "" skips it, Auto tries Candidates, any
// other value is the python to use. The python must import torch and every module of also. It
// returns the python's path, or "" and one line saying why the reference is skipped.
func Find(ctx context.Context, flag string, also ...string) (python, skipped string) {
	if flag == "" {
		return "", "PyTorch reference skipped: --torch-python is empty"
	}
	cands := []string{flag}
	if flag == Auto {
		cands = Candidates()
	}
	modules := append([]string{"torch"}, also...)
	var why []string
	seen := map[string]bool{}
	for _, p := range cands {
		path, err := exec.LookPath(p)
		if err != nil {
			why = append(why, p+": not found")
			continue
		}
		if seen[path] {
			continue
		}
		seen[path] = true
		if err := probe(ctx, path, modules); err != nil {
			why = append(why, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		return path, ""
	}
	return "", fmt.Sprintf("PyTorch reference skipped: no python3 with %s (%s); Debian/Ubuntu: apt-get install python3-torch",
		strings.Join(modules, " and "), strings.Join(why, "; "))
}

// probe checks that python finds every module, without importing it (a torch import takes
// seconds; a torch that is found but broken fails in Run, as an error the caller reports).
func probe(ctx context.Context, python string, modules []string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	script := `import importlib.util, sys
missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]
if missing:
    sys.exit("No module named " + ", ".join(repr(m) for m in missing))`
	out, err := exec.CommandContext(ctx, python, append([]string{"-c", script}, modules...)...).CombinedOutput()
	if err == nil {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return fmt.Errorf("%s", last)
	}
	return err
}

// The BLAS choices of --torch-blas. Debian's torch runs its matrix products on whichever
// libblas.so.3 the dynamic loader finds (update-alternatives picks one system-wide); the reference
// BLAS is single-threaded and several times slower than OpenBLAS, so a ratio against it flatters.
const (
	BLASAuto      = "auto"      // OpenBLAS when it is installed, else the system's choice
	BLASSystem    = "system"    // whatever libblas.so.3 the system selects
	BLASOpenBLAS  = "openblas"  // OpenBLAS (libopenblas0-pthread, -openmp or -serial), or an error
	BLASReference = "reference" // the reference BLAS (libblas3), or an error
)

// BLASDir resolves a --torch-blas value (one of the BLAS constants, or a folder holding a
// libblas.so.3, or the library's path) to the folder put first on LD_LIBRARY_PATH for torch: ""
// for the system's choice.
func BLASDir(choice string) (string, error) {
	find := func(kinds ...string) string {
		for _, k := range kinds {
			m, _ := filepath.Glob(filepath.Join("/usr/lib/*", k, "libblas.so.3"))
			if len(m) > 0 {
				return filepath.Dir(m[0])
			}
		}
		return ""
	}
	switch choice {
	case "", BLASSystem:
		return "", nil
	case BLASAuto:
		return find("openblas-pthread", "openblas-openmp", "openblas-serial"), nil
	case BLASOpenBLAS:
		if d := find("openblas-pthread", "openblas-openmp", "openblas-serial"); d != "" {
			return d, nil
		}
		return "", fmt.Errorf("--torch-blas openblas: no OpenBLAS libblas.so.3 under /usr/lib/*/openblas-*; Debian/Ubuntu: apt-get install libopenblas0-pthread")
	case BLASReference:
		if d := find("blas"); d != "" {
			return d, nil
		}
		return "", fmt.Errorf("--torch-blas reference: no /usr/lib/*/blas/libblas.so.3; Debian/Ubuntu: apt-get install libblas3")
	}
	if st, err := os.Stat(choice); err == nil {
		dir := choice
		if !st.IsDir() {
			dir = filepath.Dir(choice)
		}
		if _, err := os.Stat(filepath.Join(dir, "libblas.so.3")); err != nil {
			return "", fmt.Errorf("--torch-blas %s: no libblas.so.3 there", choice)
		}
		return dir, nil
	}
	return "", fmt.Errorf("--torch-blas %q: want auto, system, openblas, reference, or a folder holding libblas.so.3", choice)
}

// Run runs cpu.py on spec with python and returns what it measured.
func Run(ctx context.Context, python string, spec Spec) (*Result, error) {
	r := Result{Python: python}
	if err := runScript(ctx, python, cpuScript, spec, &r, spec.BLASDir); err != nil {
		return nil, err
	}
	return &r, nil
}

// runScript runs script with python on arg (as one JSON argument) and decodes the last line it
// prints, a JSON object, into out.
func runScript(ctx context.Context, python, script string, arg, out any, blasDir string) error {
	spec, err := json.Marshal(arg)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, python, "-c", script, string(spec))
	if blasDir != "" {
		path := blasDir
		if old := os.Getenv("LD_LIBRARY_PATH"); old != "" {
			path += ":" + old
		}
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+path)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tail := stderr.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("PyTorch reference (%s) failed: %w\n%s", python, err, tail)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), out); err != nil {
		return fmt.Errorf("PyTorch reference (%s) printed %q: %w", python, stdout.String(), err)
	}
	return nil
}
