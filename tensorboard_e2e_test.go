package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"agentrl/store/tfevents"
)

// TestTensorBoardKillResume: a run writing --tensorboard logs is killed (SIGKILL) in step 4, its
// last checkpoint step 2, and resumed with the same --tensorboard: the resumed run trains steps 3
// to 6 again into the same folder, and its logs (read by scripts/tfevents_read.py, the
// independent reader, when python3 is there; by the package's own reader else) hold every step 1
// to 6 of each metric once, with the values the store keeps.
func TestTensorBoardKillResume(t *testing.T) {
	bin, env := buildForSignals(t)
	dir := t.TempDir()
	db, tb := filepath.Join(dir, "runs.db"), filepath.Join(dir, "tb")
	cmd, lines, stderr := startJSON(t, bin, env, tinyRL(db, "--ui", "json", "--tensorboard", tb)...)
	for e := range lines { // step 4 has begun: step 3 is stored, step 2 the latest checkpoint
		if e["step"] == 4.0 {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	_ = cmd.Wait()
	st, run := storedRun(t, db)
	st.Close()
	resume := exec.Command(bin, "resume", "--store", db, run.ID, "--ui", "json", "--tensorboard", tb)
	resume.Env = env
	if out, err := resume.CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s\n(the killed run's stderr: %s)", err, out, stderr)
	}

	logs := filepath.Join(tb, run.ID)
	files, err := tfevents.Files(logs)
	if err != nil || len(files) < 2 {
		t.Fatalf("event files %v (%v); want the killed run's and the resumed run's", files, err)
	}
	for _, f := range files { // what each process wrote: the resumed run's steps 3 on, less what was there
		evs, _ := tfevents.ReadFile(f)
		var written []int64
		for _, e := range evs {
			for _, v := range e.Values {
				if v.Tag == "train/loss" {
					written = append(written, e.Step)
				}
			}
		}
		t.Logf("%s: train/loss at steps %v", filepath.Base(f), written)
	}
	steps := map[string][]int64{} // tag → the steps it has, in the order written
	values := map[string]map[int64]float64{}
	add := func(tag string, step int64, v float64) {
		steps[tag] = append(steps[tag], step)
		if values[tag] == nil {
			values[tag] = map[int64]float64{}
		}
		values[tag][step] = v
	}
	if py, err := exec.LookPath("python3"); err == nil {
		out, err := exec.Command(py, "scripts/tfevents_read.py", logs).Output()
		if err != nil {
			t.Fatalf("tfevents_read.py: %v", err)
		}
		var got struct {
			Files []struct {
				Events []struct {
					Step   int64
					Values []struct {
						Tag         string
						SimpleValue *float64 `json:"simple_value"`
					}
				}
			}
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		for _, f := range got.Files {
			for _, e := range f.Events {
				for _, v := range e.Values {
					if v.SimpleValue != nil {
						add(v.Tag, e.Step, *v.SimpleValue)
					}
				}
			}
		}
	} else {
		t.Log("no python3 on PATH: reading the logs with the package's own reader, not the independent one")
		for _, f := range files {
			evs, err := tfevents.ReadFile(f)
			if err != nil {
				t.Logf("%v (a killed writer's last record)", err)
			}
			for _, e := range evs {
				for _, v := range e.Values {
					if v.HasSimple {
						add(v.Tag, e.Step, float64(v.Simple))
					}
				}
			}
		}
	}

	st, _ = storedRun(t, db)
	defer st.Close()
	metrics, err := st.Metrics(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range rlKeys {
		tag := "train/" + k
		if fmt.Sprint(steps[tag]) != "[1 2 3 4 5 6]" {
			t.Errorf("%s at steps %v; want each of 1 to 6 once, in order", tag, steps[tag])
		}
		for s := 1; s <= 6; s++ {
			if got, want := values[tag][int64(s)], float64(float32(metrics[s][k])); got != want {
				t.Errorf("%s at step %d = %v; the store has %v", tag, s, got, want)
			}
		}
	}
}
