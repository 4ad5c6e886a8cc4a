package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"agentrl/store/safetensors"
)

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runs.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func tensor(name string, n int, seed byte) *safetensors.Tensor {
	d := make([]byte, 4*n)
	for i := range d {
		d[i] = byte(i)*7 + seed
	}
	return &safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: []int{n}, Data: d}
}

func checkpoint(run string, step int, seed byte) *Checkpoint {
	return &Checkpoint{
		Manifest: Manifest{Run: run, Step: step, Metrics: map[string]float64{"pass@1": float64(step%5) / 10}, RecipeHash: "abc", DataPosition: int64(step * 64), RNG: []byte{1, 2, byte(step)}},
		Weights:  []*safetensors.Tensor{tensor("frozen.ref", 300_000, 1), tensor("policy.w", 1000, seed)},
		Moments:  []*safetensors.Tensor{tensor("m.policy.w", 1000, seed+1)},
		FileData: map[string][]byte{"config.json": []byte(`{"model_type":"qwen3"}`)},
	}
}

func TestCheckpointRoundTripAndDedup(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.SaveCheckpoint(checkpoint("r1", 1, 10)); err != nil {
		t.Fatal(err)
	}
	n1, _ := s.BlobCount()
	if err := s.SaveCheckpoint(checkpoint("r1", 2, 20)); err != nil {
		t.Fatal(err)
	}
	n2, _ := s.BlobCount()
	// 1.2 MB frozen tensor = 1 chunk shared; the second checkpoint adds only its policy and moment chunks.
	if n2-n1 != 2 {
		t.Errorf("second checkpoint added %d chunks; want 2 (the frozen tensor is stored once)", n2-n1)
	}
	cp, err := s.LoadCheckpoint("r1", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := checkpoint("r1", 2, 20)
	for i, w := range want.Weights {
		if cp.Weights[i].Name != w.Name || !bytes.Equal(cp.Weights[i].Data, w.Data) {
			t.Errorf("weight %s differs after the round trip", w.Name)
		}
	}
	if !bytes.Equal(cp.Moments[0].Data, want.Moments[0].Data) || string(cp.FileData["config.json"]) != `{"model_type":"qwen3"}` {
		t.Error("moments or files differ")
	}
	if cp.DataPosition != 128 || !bytes.Equal(cp.RNG, []byte{1, 2, 2}) || cp.RecipeHash != "abc" {
		t.Errorf("manifest fields: %+v", cp.Manifest)
	}
	latest, err := s.LatestCheckpoint("r1")
	if err != nil || latest.Step != 2 {
		t.Errorf("latest: %v %v", latest.Step, err)
	}
}

// TestPhases round-trips phase times, and opens a store written before they were kept (no
// phases bucket): read-only it has none and says so without error; writable it gains the bucket
// and keeps everything it held.
func TestPhases(t *testing.T) {
	s, path := openTemp(t)
	want := map[int]map[string]float64{0: {"eval": 1.5}, 1: {"rollout": 0.25, "train": 2, "save": 0.125}}
	for step, p := range want {
		if err := s.PutPhases("r", step, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutMetrics("r", 1, map[string]float64{"loss": 0.5}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Phases("r"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("phases %v (%v); want %v", got, err, want)
	}
	// make it an older store: drop the bucket
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bPhases) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ro.Phases("r"); err != nil || len(got) != 0 {
		t.Errorf("read-only older store: phases %v (%v); want none, no error", got, err)
	}
	ro.Close()
	rw, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if err := rw.PutPhases("r", 2, map[string]float64{"train": 1}); err != nil {
		t.Errorf("writable older store: %v", err)
	}
	if m, err := rw.Metrics("r"); err != nil || m[1]["loss"] != 0.5 {
		t.Errorf("metrics after the upgrade %v (%v); want step 1's loss 0.5 kept", m, err)
	}
}

func TestRetentionAndGC(t *testing.T) {
	s, _ := openTemp(t)
	for step := 1; step <= 6; step++ {
		if err := s.SaveCheckpoint(checkpoint("r", step, byte(step))); err != nil {
			t.Fatal(err)
		}
	}
	// pass@1 = (step%5)/10: best is step 4 (0.4); last 2 are 5 and 6.
	deleted, err := s.Retain("r", "pass@1", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(deleted) != "[1 2 3]" {
		t.Errorf("deleted %v; want [1 2 3]", deleted)
	}
	n, _ := s.BlobCount()
	// Kept: the frozen tensor, policies with seeds 4, 5, 6 and moments with seeds 5, 6, 7 (equal
	// contents are one chunk, so 4 distinct), and config.json.
	if want := 1 + 4 + 1; n != want {
		t.Errorf("%d chunks after GC; want %d", n, want)
	}
	for _, step := range []int{4, 5, 6} {
		if err := s.Verify("r", step); err != nil {
			t.Errorf("kept checkpoint %d: %v", step, err)
		}
	}
}

// TestRetainPinned keeps a pinned step (the user's best mark) that neither the metric nor
// recency would keep, and deletes nothing else extra.
func TestRetainPinned(t *testing.T) {
	for _, tc := range []struct {
		pinned []int
		want   string
	}{
		{nil, "[1 2 3]"},
		{[]int{2}, "[1 3]"},
		{[]int{4}, "[1 2 3]"},  // already kept as the metric's best
		{[]int{1, 9}, "[2 3]"}, // a step without a checkpoint changes nothing else
		{[]int{1, 2, 3}, "[]"}, // everything pinned
	} {
		s, _ := openTemp(t)
		for step := 1; step <= 6; step++ {
			if err := s.SaveCheckpoint(checkpoint("r", step, byte(step))); err != nil {
				t.Fatal(err)
			}
		}
		deleted, err := s.Retain("r", "pass@1", 1, 2, tc.pinned...)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(deleted); got != tc.want {
			t.Errorf("pinned %v: deleted %v; want %s", tc.pinned, deleted, tc.want)
		}
		for _, step := range tc.pinned {
			if step <= 6 {
				if err := s.Verify("r", step); err != nil {
					t.Errorf("pinned %v: checkpoint %d: %v", tc.pinned, step, err)
				}
			}
		}
	}
}

func TestMetricsEvalsTrajectories(t *testing.T) {
	s, _ := openTemp(t)
	s.PutRun(Run{ID: "r", Name: "hybrid", Recipe: "retool.yaml", Status: "running", TotalSteps: 3, Created: time.Now()})
	s.PutMetrics("r", 1, map[string]float64{"loss": 0.5})
	s.PutMetrics("r", 2, map[string]float64{"loss": 0.25})
	eval := Eval{Step: 2, PassAtK: map[int]float64{1: 0.4, 8: 0.8}, ByLevel: map[string]map[int]float64{"0": {1: 0.6, 8: 1}, "1": {1: 0.2, 8: 0.6}},
		Counts: [][2]int{{8, 5}, {8, 1}}, Tasks: "00ff"}
	s.PutEval("r", eval)
	recs := []TrajectoryRecord{
		{Step: 1, TaskID: "t1", Sample: 0, Reward: 1, Correct: true, Data: []byte(`{"turns":1}`)},
		{Step: 1, TaskID: "t2", Sample: 1, Reward: 0, Data: bytes.Repeat([]byte("x"), 10000)},
		{Step: 2, TaskID: "t1", Sample: 0, Reward: 0.5, Hinted: true, Data: []byte(`{}`)},
		// the evaluation of step 2: the same step, task and sample as a training one, kept apart
		{Step: 2, TaskID: "t1", Sample: 0, Reward: 1, Correct: true, Eval: true, Data: []byte(`{"eval":true}`)},
		{Step: 2, TaskID: "h9", Sample: 3, Eval: true, Data: []byte(`{"eval":true}`)},
	}
	if err := s.PutTrajectories("r", recs); err != nil {
		t.Fatal(err)
	}
	got, err := s.Trajectories("r", 1)
	if err != nil || len(got) != 2 || got[1].TaskID != "t2" || len(got[1].Data) != 10000 || !got[0].Correct {
		t.Fatalf("step 1 trajectories: %+v %v", got, err)
	}
	for _, tc := range []struct {
		name string
		read func(string, int) ([]TrajectoryRecord, error)
		step int
		want []TrajectoryRecord
	}{
		{"training, step 2", s.Trajectories, 2, recs[2:3]},
		{"evaluation, step 2", s.EvalTrajectories, 2, []TrajectoryRecord{recs[4], recs[3]}}, // key order: task, sample
		{"evaluation, every step", s.EvalTrajectories, -1, []TrajectoryRecord{recs[4], recs[3]}},
		{"evaluation, step 1", s.EvalTrajectories, 1, nil},
	} {
		got, err := tc.read("r", tc.step)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v (%v); want %+v", tc.name, got, err, tc.want)
		}
	}
	byTask, _ := s.TrajectoriesByTask("r", "t1")
	if len(byTask) != 2 || !byTask[1].Hinted {
		t.Errorf("by task: %+v", byTask)
	}
	if evals, err := s.Evals("r"); err != nil || len(evals) != 1 || !reflect.DeepEqual(evals[0], eval) {
		t.Errorf("evals %+v %v; want %+v", evals, err, eval)
	}
	m, _ := s.Metrics("r")
	if m[2]["loss"] != 0.25 {
		t.Errorf("metrics %v", m)
	}
	sums, err := s.Summaries()
	if err != nil || len(sums) != 1 || sums[0].Steps != 2 || sums[0].BestPassAtK[8] != 0.8 {
		t.Fatalf("summaries %+v %v", sums, err)
	}
	var b bytes.Buffer
	WriteTable(&b, sums)
	if !strings.Contains(b.String(), "@8=0.800") || !strings.Contains(b.String(), "hybrid") {
		t.Errorf("table:\n%s", b.String())
	}
	// An evaluation run is listed as one: what it evaluated, on which set, at which step.
	s.PutRun(Run{ID: "e", Name: "hybrid", Recipe: "retool.yaml", Status: "finished", Kind: KindEval, Evaluated: "checkpoint r step 2",
		EvalSet: "heldout", EvalStep: 2, Created: time.Now().Add(time.Second)})
	s.PutEval("e", Eval{Step: 2, PassAtK: map[int]float64{1: 0.5}})
	sums, _ = s.Summaries()
	b.Reset()
	WriteTable(&b, sums)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], "evaluation finished: checkpoint r step 2, heldout") || !strings.Contains(lines[2], "eval@2") {
		t.Errorf("table with an evaluation run:\n%s", b.String())
	}
}

func TestExportImportExportByteIdentical(t *testing.T) {
	s, _ := openTemp(t)
	src := filepath.Join("..", "testdata", "fixtures", "qwen3-tiny")
	if err := s.ImportHF(src, "imported", 0); err != nil {
		t.Fatal(err)
	}
	out1 := t.TempDir()
	if err := s.Export("imported", 0, out1); err != nil {
		t.Fatal(err)
	}
	if err := s.ImportHF(out1, "again", 0); err != nil {
		t.Fatal(err)
	}
	out2 := t.TempDir()
	if err := s.Export("again", 0, out2); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"model.safetensors", "config.json", "generation_config.json"} {
		a, err1 := os.ReadFile(filepath.Join(out1, name))
		b, err2 := os.ReadFile(filepath.Join(out2, name))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between the two exports (%v, %v)", name, err1, err2)
		}
	}
	orig, _ := os.ReadFile(filepath.Join(src, "config.json"))
	exported, _ := os.ReadFile(filepath.Join(out1, "config.json"))
	if !bytes.Equal(orig, exported) {
		t.Error("config.json was not exported byte for byte")
	}
}

func TestErrorsTouchNothing(t *testing.T) {
	t.Run("not a bbolt file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.db")
		garbage := bytes.Repeat([]byte("not a database "), 1000)
		os.WriteFile(path, garbage, 0o644)
		_, err := Open(path, Options{})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not changed") {
			t.Fatalf("got %v", err)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, garbage) {
			t.Error("the file was modified")
		}
	})
	t.Run("wrong schema version", func(t *testing.T) {
		s, path := openTemp(t)
		s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bMeta).Put(kSchema, u64(99)) })
		s.Close()
		_, err := Open(path, Options{})
		if err == nil || !strings.Contains(err.Error(), "schema version 99") || !strings.Contains(err.Error(), "reads version 1") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("missing blob and hash mismatch", func(t *testing.T) {
		s, _ := openTemp(t)
		s.SaveCheckpoint(checkpoint("r", 1, 1))
		m, _ := s.Manifest("r", 1)
		victim, _ := hex.DecodeString(m.Tensors[1].Chunks[0])
		s.db.Update(func(tx *bolt.Tx) error {
			v := append([]byte{}, tx.Bucket(bBlobs).Get(victim)...)
			v[0] ^= 0xff
			return tx.Bucket(bBlobs).Put(victim, v)
		})
		if err := s.Verify("r", 1); err == nil || !strings.Contains(err.Error(), "fails its hash check") || !strings.Contains(err.Error(), "policy.w") {
			t.Errorf("hash mismatch: %v", err)
		}
		s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bBlobs).Delete(victim) })
		if err := s.Verify("r", 1); err == nil || !strings.Contains(err.Error(), "missing chunk") {
			t.Errorf("missing blob: %v", err)
		}
		if _, err := s.Manifest("r", 1); err != nil {
			t.Errorf("the manifest was touched: %v", err)
		}
	})
	t.Run("no such checkpoint", func(t *testing.T) {
		s, _ := openTemp(t)
		if _, err := s.LoadCheckpoint("r", 7); err == nil || !strings.Contains(err.Error(), "no checkpoint at step 7") {
			t.Errorf("got %v", err)
		}
		if _, err := s.GetRun("nope"); err == nil || !strings.Contains(err.Error(), `no run "nope"`) {
			t.Errorf("got %v", err)
		}
	})
}

// Helper processes, selected by environment variables, for the tests below.
func TestMain(m *testing.M) {
	switch os.Getenv("AGENTRL_STORE_HELPER") {
	case "writer": // write checkpoints forever; the parent kills us
		s, err := Open(os.Getenv("AGENTRL_STORE_PATH"), Options{Timeout: 5 * time.Second})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		base := 0
		if cps, _ := s.Checkpoints("crash"); len(cps) > 0 {
			base = cps[len(cps)-1].Step
		}
		for step := base + 1; ; step++ {
			cp := checkpoint("crash", step, byte(step))
			cp.Weights = append(cp.Weights, tensor("big", 2_000_000+step, byte(step))) // 8 MB, 2+ chunks, new each time
			if err := s.SaveCheckpoint(cp); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(4)
			}
			if step%3 == 0 {
				s.Retain("crash", "pass@1", 2, 2)
			}
		}
	case "holder": // hold the store open until killed
		s, err := Open(os.Getenv("AGENTRL_STORE_PATH"), Options{})
		if err != nil {
			os.Exit(3)
		}
		fmt.Println("open")
		time.Sleep(time.Minute)
		s.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCrashDuringCheckpointWrite SIGKILLs a writing process at random points, many times: the file
// always opens, every visible checkpoint verifies, none is partial.
func TestCrashDuringCheckpointWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	rounds := 12
	if testing.Short() {
		rounds = 4
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seen := 0
	for i := 0; i < rounds; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "AGENTRL_STORE_HELPER=writer", "AGENTRL_STORE_PATH="+path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: writer ended by itself (%v): %s", i, err, stderr.String())
		}
		s, err := Open(path, Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("round %d: store does not open after SIGKILL: %v", i, err)
		}
		cps, err := s.Checkpoints("crash")
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		for _, m := range cps {
			if err := s.Verify("crash", m.Step); err != nil {
				t.Fatalf("round %d: visible checkpoint %d does not verify: %v", i, m.Step, err)
			}
		}
		seen = max(seen, len(cps))
		s.Close()
	}
	t.Logf("%d kills; up to %d checkpoints visible, all verified", rounds, seen)
}

// TestSecondProcessGetsInUse: while one process holds the store, another gets a clear error fast.
func TestSecondProcessGetsInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "AGENTRL_STORE_HELPER=holder", "AGENTRL_STORE_PATH="+path)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	buf := make([]byte, 4)
	if _, err := out.Read(buf); err != nil || string(buf) != "open" {
		t.Fatalf("holder did not open the store: %q %v", buf, err)
	}
	start := time.Now()
	for _, ro := range []bool{false, true} {
		_, err := Open(path, Options{ReadOnly: ro})
		if err == nil || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), path) {
			t.Errorf("read-only=%v: got %v; want an in-use error naming the file", ro, err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("waited %s for the in-use error", d)
	}
}

// BenchmarkCheckpoint writes and reads a 100 MB checkpoint (1 GB with AGENTRL_BENCH_1GB=1)
// against a plain file write and read of the same bytes on the same disk.
func BenchmarkCheckpoint(b *testing.B) {
	sizes := []int{100 << 20}
	if os.Getenv("AGENTRL_BENCH_1GB") == "1" {
		sizes = append(sizes, 1<<30)
	}
	for _, size := range sizes {
		b.Run(fmt.Sprintf("%dMB", size>>20), func(b *testing.B) {
			dir := b.TempDir()
			// Random contents: no chunk repeats, so deduplication does not flatter the store.
			rng := rand.New(rand.NewPCG(uint64(size), 9))
			var ts []*safetensors.Tensor
			for i := 0; i < size/(16<<20); i++ {
				d := make([]byte, 16<<20)
				for j := 0; j < len(d); j += 8 {
					binary.LittleEndian.PutUint64(d[j:], rng.Uint64())
				}
				ts = append(ts, &safetensors.Tensor{Name: fmt.Sprintf("w%03d", i), DType: safetensors.F32, Shape: []int{4 << 20}, Data: d})
			}
			raw := make([]byte, 0, size)
			for _, t := range ts {
				raw = append(raw, t.Data...)
			}
			b.Run("store-write", func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				for i := 0; i < b.N; i++ {
					s, err := Open(filepath.Join(dir, fmt.Sprintf("w%d.db", i)), Options{})
					if err != nil {
						b.Fatal(err)
					}
					if err := s.SaveCheckpoint(&Checkpoint{Manifest: Manifest{Run: "b", Step: 1}, Weights: ts}); err != nil {
						b.Fatal(err)
					}
					s.Close()
				}
			})
			b.Run("plain-write", func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				for i := 0; i < b.N; i++ {
					f, _ := os.Create(filepath.Join(dir, fmt.Sprintf("p%d.bin", i)))
					f.Write(raw)
					f.Sync()
					f.Close()
				}
			})
			s, _ := Open(filepath.Join(dir, "r.db"), Options{})
			s.SaveCheckpoint(&Checkpoint{Manifest: Manifest{Run: "b", Step: 1}, Weights: ts})
			os.WriteFile(filepath.Join(dir, "r.bin"), raw, 0o644)
			b.Run("store-read", func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				for i := 0; i < b.N; i++ {
					if _, err := s.LoadCheckpoint("b", 1); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("plain-read", func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				for i := 0; i < b.N; i++ {
					os.ReadFile(filepath.Join(dir, "r.bin"))
				}
			})
			s.Close()
		})
	}
}

// TestFreeRunID: a run id already stored gets the first free -N suffix, so that two runs
// started in the same second keep separate records; an unused id is kept as it is.
func TestFreeRunID(t *testing.T) {
	s, _ := openTemp(t)
	tests := []struct {
		store []string
		base  string
		want  string
	}{
		{nil, "r-s1-20261127-175510", "r-s1-20261127-175510"},
		{[]string{"r-s1-20261127-175510"}, "r-s1-20261127-175510", "r-s1-20261127-175510-2"},
		{[]string{"r-s1-20261127-175510-2", "r-s1-20261127-175510-3"}, "r-s1-20261127-175510", "r-s1-20261127-175510-4"},
		{nil, "other", "other"},
	}
	for _, tt := range tests {
		for _, id := range tt.store {
			if err := s.PutRun(Run{ID: id, Name: "r"}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.FreeRunID(tt.base)
		if err != nil || got != tt.want {
			t.Errorf("FreeRunID(%q) with %v stored = %q, %v; want %q", tt.base, tt.store, got, err, tt.want)
		}
	}
	if _, err := s.FreeRunID(""); err == nil {
		t.Error("FreeRunID(\"\") gave no error")
	}
}
