package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"agentrl/engine/doctor"
)

// TestDoctor runs doctor on this machine (the tests force the go backend through GOMLX_BACKEND):
// every section is there, --json parses, and the error (the exit code) follows the verdict.
func TestDoctor(t *testing.T) {
	// an 8B-parameter model folder (only its config.json is read) is more than this machine holds
	dir := t.TempDir()
	files := map[string]string{"model.safetensors": "", "tokenizer.json": "{}", "config.json": `{"model_type": "qwen3", "vocab_size": 151936,
		"hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
		"head_dim": 128, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": false}`,
		"huge.yaml": "model:\n  path: " + dir + "\n"}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tooBig := filepath.Join(dir, "huge.yaml")
	for _, tc := range []struct {
		name     string
		args     []string
		wantErr  string // "" when doctor says the recipe can run
		wantFail []string
		// anyVerdict leaves can_run and the failed checks unchecked (they depend on the machine)
		anyVerdict bool
	}{
		{name: "default recipe", args: []string{"doctor", "--json"}},
		{name: "shipped recipe", args: []string{"doctor", recipe("retool.yaml"), "--json", "--torch-python", ""}},
		// GOMLX_BACKEND=go: never a GPU path, whether or not this machine has a GPU
		{name: "GPU required", args: []string{"doctor", "--json", "--gpu", "--torch-python", ""}, wantErr: "doctor", anyVerdict: true},
		{name: "recipe missing", args: []string{"doctor", "nonexistent.yaml", "--json", "--torch-python", ""}, wantErr: "failed: recipe", wantFail: []string{"recipe"}},
		{name: "recipe does not fit", args: []string{"doctor", tooBig, "--json", "--torch-python", ""}, wantErr: "failed", wantFail: []string{"fits"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCmd(t, tc.args...)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("doctor: %v\n%s", err, out)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("doctor: error %v; want one containing %q", err, tc.wantErr)
			}
			var rep doctor.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("doctor --json printed %q: %v", out, err)
			}
			if rep.GPUReady && tc.anyVerdict {
				t.Errorf("gpu_ready with the go backend forced")
			}
			if !tc.anyVerdict && rep.CanRun != (len(tc.wantFail) == 0) {
				t.Errorf("can_run = %v; want %v (failed: %v)", rep.CanRun, len(tc.wantFail) == 0, rep.Failed())
			}
			// the 8B model's host memory and disk fail or pass by this machine's memory and free disk
			got := slices.DeleteFunc(rep.Failed(), func(n string) bool { return n == "host_memory" || n == "disk" })
			if len(tc.wantFail) > 0 && !slices.Equal(got, tc.wantFail) {
				t.Errorf("failed checks %v (host_memory and disk aside); want %v", got, tc.wantFail)
			}
			sections := map[string]bool{}
			for _, c := range rep.Checks {
				sections[c.Section] = true
				if c.Status != doctor.OK && c.Status != doctor.Info && c.Fix == "" {
					t.Errorf("%s: %s without a fix: %s", c.Name, c.Status, c.Detail)
				}
			}
			for _, s := range []string{doctor.SecCPU, doctor.SecMemory, doctor.SecGPU, doctor.SecBackend, doctor.SecPython, doctor.SecSandbox, doctor.SecRecipe} {
				if !sections[s] {
					t.Errorf("no %s section in %v", s, rep.Checks)
				}
			}
		})
	}
}

// TestDoctorText checks the text report: a title per section, a verdict per line, the last line.
// The bf16 line is OK where the CPU kernels compute bf16 right and WARN where they do not (the
// AVX2 kernels on some CPUs): the recipe computes in f32 on the CPU, so it is never FAIL.
func TestDoctorText(t *testing.T) {
	out, err := runCmd(t, "doctor", recipe("retool.yaml"), "--torch-python", "")
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	for _, want := range []string{"CPU\n", "Memory\n", "GPU (NVML", "Backend\n", "Code sandbox\n", "Recipe\n", "READY: "} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor's report lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^  (OK|WARN) +bf16 `).MatchString(out) {
		t.Errorf("doctor's report has no bf16 line that is OK or WARN:\n%s", out)
	}
}

// TestDoctorEngines runs doctor on a recipe whose rollout.engines are a real serve with a key,
// the same serve under a variable holding another key, and a port nobody listens on: the first
// passes every step (its model named, the probe tokenised as the policy does), the others fail
// at their step with their fix, and the recipe cannot run.
func TestDoctorEngines(t *testing.T) {
	base, _, _, _ := startServeErr(t, "--slots", "1", "--api-key", "sesame")
	dead := "http://127.0.0.1:1" // a privileged port nothing of ours listens on
	t.Setenv("AGENTRL_ENGINE_API_KEY", "sesame")
	t.Setenv("AGENTRL_TEST_OTHER_KEY", "wrong")
	path := filepath.Join(t.TempDir(), "engines.yaml")
	yaml := "rollout:\n  engines:\n    - serve " + base + "\n    - sglang " + dead + "\n    - serve " + base + " AGENTRL_TEST_OTHER_KEY\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(t, "doctor", path, "--json", "--torch-python", "")
	if err == nil || !strings.Contains(err.Error(), "engine 2, engine 3") {
		t.Errorf("doctor: %v; want it to fail on engine 2 and engine 3", err)
	}
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json printed %q: %v", out, err)
	}
	for _, tc := range []struct{ name, status, detail, fix string }{
		{"engine 1", "ok", "reachable, key $AGENTRL_ENGINE_API_KEY accepted, serves agentrl-builtin; tokenises the probe as the policy does", ""},
		{"engine 2", "fail", "sglang engine " + dead + ": reach failed", "start the server"},
		{"engine 3", "fail", "key failed: HTTP 401: the server refuses the key sent", "$AGENTRL_TEST_OTHER_KEY holds a key this server refuses"},
	} {
		c, ok := rep.Find(tc.name)
		if !ok || string(c.Status) != tc.status || !strings.Contains(c.Detail, tc.detail) || !strings.Contains(c.Fix, tc.fix) {
			t.Errorf("%s: %+v (found %v); want %s with %q and the fix %q", tc.name, c, ok, tc.status, tc.detail, tc.fix)
		}
		if strings.Contains(c.Detail+c.Fix, "sesame") || strings.Contains(c.Detail+c.Fix, "wrong") {
			t.Errorf("%s: %+v shows a key", tc.name, c)
		}
	}
}
