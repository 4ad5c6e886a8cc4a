package doctor

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"agentrl/engine/bench"
	"agentrl/engine/event"
	"agentrl/engine/torchref"
)

// The files scripts/gpu-check.sh leaves in its steps/ folder, one or two per step, and status.tsv
// with a line "step<TAB>exit code<TAB>seconds" per step that ran.
const (
	StatusFile     = "status.tsv"
	DoctorFile     = "doctor.json"
	ParityFile     = "parity.json"
	PlanFile       = "plan.json"     // plan for the named shape and budget (qwen3-4b at 96 GiB)
	RunPlanFile    = "run-plan.json" // plan for the recipe run's model on this device
	RunEventsFile  = "run.jsonl"
	RunPeakFile    = "run-peak.json"
	TrainFile      = "train.json"
	TorchTrainFile = "torch-train.json"
	PartialFile    = "partial.json" // scripts/bench-partial.sh's JSON line
	rolloutPrefix  = "rollout-"     // rollout-<batch>.json
	hfLoadPrefix   = "hf-load-"     // hf-load-<name>.json: scripts/hf-load-check.py's line
	variantPrefix  = "parity-"      // parity-<variant>.json: dev parity under changed XLA settings
	opParityPrefix = "op-parity-"   // op-parity-<backend>.json: dev op-parity
)

// HFLoadRow is scripts/hf-load-check.py's line: an export loaded in HF transformers itself, its
// log-probs beside this project's score of the same folder.
type HFLoadRow struct {
	Name         string  `json:"name"` // the step's: builtin, random
	Model        string  `json:"model"`
	Shards       int     `json:"shards"`
	Class        string  `json:"class,omitempty"`
	Transformers string  `json:"transformers,omitempty"`
	Torch        string  `json:"torch,omitempty"`
	Device       string  `json:"device"`
	DType        string  `json:"dtype"`
	N            int     `json:"n"`
	MaxErr       float64 `json:"max_err"`
	Tol          float64 `json:"tol"`
	OK           bool    `json:"ok"`
	LoadSeconds  float64 `json:"load_s"`
	Error        string  `json:"error,omitempty"`
}

// ParityVariant is `dev parity` run again with one setting changed (TF32 off, Triton GEMMs off,
// autotuning off): diagnostic rows that name what costs a dtype its tolerance, apart from OK.
type ParityVariant struct {
	Name    string      `json:"name"`
	Seconds float64     `json:"seconds"`
	Rows    []ParityRow `json:"rows"`
}

// StepStatus is how one step of the script ended.
type StepStatus struct {
	Name     string  `json:"name"`
	ExitCode int     `json:"exit_code"`
	Seconds  float64 `json:"seconds"`
	LogTail  string  `json:"log_tail,omitempty"` // the end of its stderr when it failed
}

// ParityReport is what `dev parity --json` prints.
type ParityReport struct {
	Backend string      `json:"backend"`
	Rows    []ParityRow `json:"rows"`
}

// RolloutRow is `bench rollout` at one batch: the engine's tokens/s and step time, its memory
// traffic as a share of the device's bandwidth (the roofline), and HF generate's tokens/s.
type RolloutRow struct {
	// Tag is the step's name between "rollout-" and the batch ("" for rollout-64: the check's one
	// shape; gpu-bench's "small", "small-again" (the same command started again, its programs
	// from the compilation cache), "large"), Model what was measured.
	Tag            string  `json:"tag,omitempty"`
	Model          string  `json:"model,omitempty"`
	Batch          int     `json:"batch"`
	TokensPerSec   float64 `json:"tokens_per_s"`
	StepMs         float64 `json:"step_ms"`
	BytesPerSec    float64 `json:"bytes_per_s"`
	Bandwidth      float64 `json:"bandwidth_bytes_per_s"`
	RooflineShare  float64 `json:"roofline_share"`
	RefTokensPerS  float64 `json:"reference_tokens_per_s,omitempty"`
	Ratio          float64 `json:"ratio,omitempty"` // engine ÷ reference
	Reference      string  `json:"reference"`       // what the reference was, or why there was none
	CompileSeconds float64 `json:"compile_s"`
	// Programs the generator built, of which CacheHits were loaded from the compilation cache.
	Programs    int `json:"programs,omitempty"`
	CacheHits   int `json:"cache_hits,omitempty"`
	CacheMisses int `json:"cache_misses,omitempty"`
	// CacheFailures are the compilation cache's own failures in the command (a program that did
	// not serialize, store or load), CacheFailure the last one's words.
	CacheFailures int64  `json:"cache_failures,omitempty"`
	CacheFailure  string `json:"cache_failure,omitempty"`

	ran int // the step's place in status.tsv (after every step's when it has no line): the rows' order
}

// TrainRow is `bench train` beside PyTorch eager on the same shape and batch.
type TrainRow struct {
	Model         string  `json:"model,omitempty"`
	Sequences     int     `json:"sequences"`
	Length        int     `json:"length"`
	TokensPerSec  float64 `json:"tokens_per_s"`
	MicroStepMs   float64 `json:"micro_step_ms"`
	PeakShare     float64 `json:"peak_share"`
	CompileSecs   float64 `json:"compile_s"`
	RefTokensPerS float64 `json:"reference_tokens_per_s,omitempty"`
	Ratio         float64 `json:"ratio,omitempty"`
	Reference     string  `json:"reference"`
}

// RunRow is the recipe run: steps done, phase switches and the weight sync per step, the NVML
// peak over the run beside the ledger's prediction and the engine's own accounting.
type RunRow struct {
	Status          string    `json:"status"`
	Reason          string    `json:"reason,omitempty"`
	Backend         string    `json:"backend"`
	Steps           int       `json:"steps"`
	SwitchToTrain   []float64 `json:"switch_to_train_s"`
	SwitchToRollout []float64 `json:"switch_to_rollout_s"` // the sync included
	Sync            []float64 `json:"sync_s"`              // the sync phase as the controller times it
	StepSeconds     []float64 `json:"step_s"`              // every phase of the step, summed
	// Phases are each phase's seconds over the run's steps (evaluations before step 1 left out),
	// in the order the first step ran them.
	Phases []PhaseSeconds `json:"phases,omitempty"`
	// Model is the run's model (run_start), Compiled what it compiled: programs, seconds, and
	// the compilation cache's hits and misses (the last metrics event's totals by kind, summed).
	Model           string         `json:"model,omitempty"`
	Compiled        event.Compiled `json:"compiled"`
	NVMLAvailable   bool           `json:"nvml_available"`
	NVMLBaseline    uint64         `json:"nvml_baseline_bytes"`
	NVMLPeak        uint64         `json:"nvml_peak_bytes"`
	EngineLedger    int64          `json:"engine_ledger_bytes"` // the largest sum of the run's ledger events
	Predicted       int64          `json:"ledger_predicted_bytes"`
	PredictedPhases string         `json:"ledger_predicted_phases,omitempty"`
}

// PhaseSeconds is one phase's time over a run's steps.
type PhaseSeconds struct {
	Phase   string  `json:"phase"`
	Seconds float64 `json:"seconds"`
}

// PlanRow is `plan` for a shape at a budget.
type PlanRow struct {
	Shape      string `json:"shape"`
	Fits       bool   `json:"fits"`
	KVSlots    int    `json:"kv_slots"`
	MicroBatch int    `json:"micro_batch"`
	Total      int64  `json:"total"`
	Budget     int64  `json:"budget"`
	Reason     string `json:"reason,omitempty"`
	// HostRAM and Disk are the plan's host memory and the store's disk (ledger.HostPlan), where
	// doctor planned them.
	HostRAM int64 `json:"host_ram,omitempty"`
	Disk    int64 `json:"disk,omitempty"`
}

// PartialSide is one of scripts/bench-partial.sh's two runs: trained tokens over the seconds of
// whole steps, of which the rollout's, and the rollout's slot occupancy and tail (step means).
type PartialSide struct {
	Tokens     float64 `json:"tokens"`
	Seconds    float64 `json:"seconds"`
	RolloutS   float64 `json:"rollout_s"`
	TokensPerS float64 `json:"tokens_per_s"`
	Occupancy  float64 `json:"occupancy"`
	TailS      float64 `json:"tail_s"`
}

// PartialRow is synchronous against partial rollouts on the long-tail workload.
type PartialRow struct {
	Sync    PartialSide `json:"sync"`
	Partial PartialSide `json:"partial"`
	Ratio   float64     `json:"ratio"` // partial ÷ synchronous trained tokens/s
	// Bound is what a rollout that took no time would give: synchronous step seconds over its
	// seconds without the rollout (Amdahl), the most any rollout schedule can gain here.
	Bound float64 `json:"bound"`
}

// PartialGoal is issue #25's goal for Ratio.
const PartialGoal = 1.5

// GPUReport is the self-check's one JSON report.
type GPUReport struct {
	Created string       `json:"created"`
	Device  string       `json:"device"`
	Backend string       `json:"backend"`
	OK      bool         `json:"ok"` // every step exited 0 and every parity row holds
	Steps   []StepStatus `json:"steps"`
	Doctor  *Report      `json:"doctor,omitempty"`
	Parity  []ParityRow  `json:"parity"`
	Rollout []RolloutRow `json:"rollout"`
	Train   *TrainRow    `json:"train,omitempty"`
	Run     *RunRow      `json:"run,omitempty"`
	Plan    *PlanRow     `json:"plan,omitempty"`
	Partial *PartialRow  `json:"partial,omitempty"`
	HFLoad  []HFLoadRow  `json:"hf_load,omitempty"`
	// ParityVariants are diagnostic: they do not decide OK.
	ParityVariants []ParityVariant `json:"parity_variants,omitempty"`
	// OpParity are diagnostic too: each float32 op of the forward pass against float64, on the
	// Go backend and on the GPU's, to name the op behind a float32 parity gap.
	OpParity []OpParityReport `json:"op_parity,omitempty"`
	Missing  []string         `json:"missing,omitempty"` // step outputs that are absent or unreadable
}

// BuildReport reads the step files in dir into the report.
func BuildReport(dir string) (*GPUReport, error) {
	r := &GPUReport{Created: time.Now().UTC().Format(time.RFC3339)}
	steps, err := readStatus(dir)
	if err != nil {
		return nil, err
	}
	r.Steps = steps
	var doc Report
	if r.read(dir, DoctorFile, &doc) {
		r.Doctor = &doc
		r.Device = describeDevice(&doc)
		r.Backend = doc.Backend
	}
	var par ParityReport
	if r.read(dir, ParityFile, &par) {
		r.Parity, r.Backend = par.Rows, par.Backend
	}
	r.rollouts(dir)
	r.train(dir)
	r.run(dir)
	var plan planJSON
	if r.ran("plan") && r.read(dir, PlanFile, &plan) { // gpu-bench plans only its run
		r.Plan = plan.row()
	}
	var part PartialRow
	if r.ran("partial") && r.read(dir, PartialFile, &part) {
		if rest := part.Sync.Seconds - part.Sync.RolloutS; rest > 0 {
			part.Bound = part.Sync.Seconds / rest
		}
		r.Partial = &part
	}
	for _, s := range r.Steps {
		switch {
		case strings.HasPrefix(s.Name, hfLoadPrefix):
			row := HFLoadRow{Name: strings.TrimPrefix(s.Name, hfLoadPrefix)}
			if r.read(dir, s.Name+".json", &row) {
				r.HFLoad = append(r.HFLoad, row)
			}
		case strings.HasPrefix(s.Name, opParityPrefix):
			var op OpParityReport
			if r.read(dir, s.Name+".json", &op) {
				r.OpParity = append(r.OpParity, op)
			}
		case strings.HasPrefix(s.Name, variantPrefix):
			var par ParityReport
			if r.read(dir, s.Name+".json", &par) {
				r.ParityVariants = append(r.ParityVariants, ParityVariant{Name: strings.TrimPrefix(s.Name, variantPrefix), Seconds: s.Seconds, Rows: par.Rows})
			}
		}
	}
	r.OK = len(r.Steps) > 0 && len(r.Parity) > 0
	for _, s := range r.Steps {
		// op-parity's rows are diagnostic: its steps do not decide the report's ok either
		r.OK = r.OK && (s.ExitCode == 0 || strings.HasPrefix(s.Name, opParityPrefix))
	}
	for _, p := range r.Parity {
		r.OK = r.OK && p.OK
	}
	for _, h := range r.HFLoad {
		r.OK = r.OK && h.OK
	}
	return r, nil
}

// ran says whether the script ran the step called name (its status line).
func (r *GPUReport) ran(name string) bool {
	return slices.ContainsFunc(r.Steps, func(s StepStatus) bool { return s.Name == name })
}

// read decodes dir/name into v; a missing or bad file is noted in Missing.
func (r *GPUReport) read(dir, name string, v any) bool {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err == nil {
		if err = json.Unmarshal(lastJSON(data), v); err == nil {
			return true
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		r.Missing = append(r.Missing, name)
	} else {
		r.Missing = append(r.Missing, fmt.Sprintf("%s (%v)", name, err))
	}
	return false
}

// lastJSON is the last non-empty line of a command's output (commands print one JSON line).
func lastJSON(data []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return []byte(lines[len(lines)-1])
}

func readStatus(dir string) ([]StepStatus, error) {
	f, err := os.Open(filepath.Join(dir, StatusFile))
	if err != nil {
		return nil, fmt.Errorf("gpu report: %w (the script writes it)", err)
	}
	defer f.Close()
	var out []StepStatus
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 3 {
			continue
		}
		rc, _ := strconv.Atoi(fields[1])
		secs, _ := strconv.ParseFloat(fields[2], 64)
		s := StepStatus{Name: fields[0], ExitCode: rc, Seconds: secs}
		if rc != 0 {
			s.LogTail = tail(filepath.Join(dir, fields[0]+".log"), 800)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(data))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

func describeDevice(d *Report) string {
	if g := d.GPU; g.Seen {
		return fmt.Sprintf("%s (driver %s, CUDA %s, %s, compute capability %s)", g.Name, g.Driver, g.CUDA, gib(int64(g.TotalBytes)), g.ComputeCapability)
	}
	return fmt.Sprintf("no GPU: %s, %d cores", d.CPU.Model, d.CPU.Cores)
}

func (r *GPUReport) rollouts(dir string) {
	m, _ := filepath.Glob(filepath.Join(dir, rolloutPrefix+"*.json"))
	ranAt := map[string]int{} // each step's place, so that rows read in the order they ran
	for i, s := range r.Steps {
		ranAt[s.Name] = i
	}
	for _, f := range m {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		tag, b, ok := rolloutStep(name)
		if !ok {
			continue
		}
		var res bench.RolloutResult
		if !r.read(dir, filepath.Base(f), &res) || res.BenchResult == nil {
			continue
		}
		row := RolloutRow{Tag: tag, Model: res.Model, Batch: b, TokensPerSec: res.TokensPerSec, StepMs: res.StepMillis, BytesPerSec: res.BytesPerSec,
			Bandwidth: res.Bandwidth, RefTokensPerS: res.ReferenceTokensPerSec, Ratio: res.Ratio, CompileSeconds: res.CompileTime.Seconds(),
			Programs: res.Compiles.Programs, CacheHits: res.Compiles.CacheHits, CacheMisses: res.Compiles.CacheMisses}
		if c := res.CompileCache; c != nil {
			row.CacheFailures, row.CacheFailure = c.Failures, c.LastFailure
		}
		row.ran = len(r.Steps)
		if i, ok := ranAt[name]; ok {
			row.ran = i
		}
		if res.Bandwidth > 0 {
			row.RooflineShare = res.BytesPerSec / res.Bandwidth
		}
		row.Reference = reference(res.Versus, func() string {
			if t := res.Torch; t != nil {
				return fmt.Sprintf("HF generate, torch %s on %s", t.Torch, t.Device)
			}
			if ref := res.Reference; ref != nil {
				return fmt.Sprintf("PyTorch %s eager on %s", ref.Torch, ref.Device)
			}
			return ""
		})
		r.Rollout = append(r.Rollout, row)
	}
	sort.Slice(r.Rollout, func(i, j int) bool {
		a, b := r.Rollout[i], r.Rollout[j]
		if a.ran != b.ran {
			return a.ran < b.ran
		}
		if a.Tag != b.Tag {
			return a.Tag < b.Tag
		}
		return a.Batch < b.Batch
	})
}

// rolloutStep reads a rollout step's name: rollout-<batch> or rollout-<tag>-<batch>.
func rolloutStep(name string) (tag string, batch int, ok bool) {
	rest, found := strings.CutPrefix(name, rolloutPrefix)
	if !found {
		return "", 0, false
	}
	if i := strings.LastIndexByte(rest, '-'); i >= 0 {
		tag, rest = rest[:i], rest[i+1:]
	}
	b, err := strconv.Atoi(rest)
	return tag, b, err == nil
}

// reference says what a benchmark's reference was, or why it did not run.
func reference(v bench.Versus, what func() string) string {
	switch {
	case v.ReferenceError != "":
		return "failed: " + firstLine(v.ReferenceError)
	case v.ReferenceSkipped != "":
		return v.ReferenceSkipped
	}
	return what()
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func (r *GPUReport) train(dir string) {
	var res bench.TrainResult
	if !r.read(dir, TrainFile, &res) || res.BenchResult == nil {
		return
	}
	row := &TrainRow{Model: res.Model, Sequences: res.Config.Sequences, Length: res.Config.Length, TokensPerSec: res.TokensPerSec,
		MicroStepMs: res.MicroStepMs, PeakShare: res.PeakShare, CompileSecs: res.CompileTime}
	// The PyTorch reference is optional (a machine without torch still gets its own figures): when
	// its step did not run, the row says why instead of the report counting a missing output.
	var ref torchref.Result
	_, statErr := os.Stat(filepath.Join(dir, TorchTrainFile))
	switch {
	case statErr == nil && r.read(dir, TorchTrainFile, &ref) && ref.Train != nil:
		row.RefTokensPerS = ref.Train.TokensPerSec
		row.Ratio = res.TokensPerSec / ref.Train.TokensPerSec
		row.Reference = fmt.Sprintf("PyTorch %s eager on %s", ref.Torch, ref.Device)
	default:
		row.Reference = "none: " + cmp.Or(tail(filepath.Join(dir, "torch-train.log"), 300), "the PyTorch step did not run")
	}
	r.Train = row
}

// planJSON is what `plan --json` prints.
type planJSON struct {
	Fits       bool             `json:"fits"`
	KVSlots    int              `json:"kv_slots"`
	MicroBatch int              `json:"micro_batch"`
	Total      int64            `json:"total"`
	Budget     int64            `json:"budget"`
	Phases     map[string]int64 `json:"phases"`
	Reason     string           `json:"reason"`
	Shape      string           `json:"shape"`
}

func (p planJSON) row() *PlanRow {
	return &PlanRow{Shape: p.Shape, Fits: p.Fits, KVSlots: p.KVSlots, MicroBatch: p.MicroBatch, Total: p.Total, Budget: p.Budget, Reason: p.Reason}
}

func (r *GPUReport) run(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, RunEventsFile))
	if err != nil {
		r.Missing = append(r.Missing, RunEventsFile)
		return
	}
	row := &RunRow{}
	steps := map[int]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		var e struct {
			Type       string                    `json:"type"`
			Step       int                       `json:"step"`
			Phase      string                    `json:"phase"`
			Seconds    float64                   `json:"seconds"`
			Metrics    map[string]float64        `json:"metrics"`
			Components map[string]int64          `json:"components"`
			Backend    string                    `json:"backend"`
			Model      string                    `json:"model"`
			Status     string                    `json:"status"`
			Reason     string                    `json:"reason"`
			Compiles   map[string]event.Compiled `json:"compiles"`
		}
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		switch e.Type {
		case "run_start":
			row.Backend, row.Model = e.Backend, e.Model
		case "phase":
			if e.Step > 0 {
				steps[e.Step] += e.Seconds
				i := slices.IndexFunc(row.Phases, func(p PhaseSeconds) bool { return p.Phase == e.Phase })
				if i < 0 {
					row.Phases = append(row.Phases, PhaseSeconds{Phase: e.Phase})
					i = len(row.Phases) - 1
				}
				row.Phases[i].Seconds += e.Seconds
			}
			if e.Phase == "sync" {
				row.Sync = append(row.Sync, e.Seconds)
			}
		case "metrics":
			row.Steps++
			if len(e.Compiles) > 0 {
				row.Compiled = event.CompiledTotal(e.Compiles)
			}
			if v, ok := e.Metrics[string(event.MetricSwitchToTrainSeconds)]; ok {
				row.SwitchToTrain = append(row.SwitchToTrain, v)
			}
			if v, ok := e.Metrics[string(event.MetricSwitchToRolloutSeconds)]; ok {
				row.SwitchToRollout = append(row.SwitchToRollout, v)
			}
		case "ledger":
			var sum int64
			for k, v := range e.Components {
				if !strings.Contains(k, "host") {
					sum += v
				}
			}
			row.EngineLedger = max(row.EngineLedger, sum)
		case "run_end":
			row.Status, row.Reason = e.Status, e.Reason
		}
	}
	for _, s := range slices.Sorted(maps.Keys(steps)) {
		row.StepSeconds = append(row.StepSeconds, steps[s])
	}
	var peak Peak
	if r.read(dir, RunPeakFile, &peak) {
		row.NVMLAvailable, row.NVMLBaseline, row.NVMLPeak = peak.Available, peak.Baseline, peak.PeakUsed
	}
	var plan planJSON
	if r.read(dir, RunPlanFile, &plan) {
		row.Predicted = plan.Total
		row.PredictedPhases = fmt.Sprintf("rollout %s, train %s", gib(plan.Phases["rollout"]), gib(plan.Phases["train"]))
	}
	r.Run = row
}
