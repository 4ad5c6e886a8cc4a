package main

import (
	"agentrl/engine/serve/servetest"
	"bufio"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestPRMEndpointServeKilled: the PRM of a training step is `agentrl-tui serve`, a process of its
// own, SIGKILLed when the PRM's third request reaches it. The step still finishes: the two
// trajectories judged before the kill keep their replies, the other two are counted unjudged, and
// the run ends finished. (engine's TestPRMEndpointKilledMidStep does the same with the server in
// the test's process; this is the real binary and a real kill.) The PRM's prompt is the built-in
// model's, and its lengths are the recipe's auto ones, fitted by the run to the server's 1,023-token
// context as GET /models reports it (max_model_len): unfitted, a long trajectory's prompt is
// refused (400, context_length_exceeded) before any kill. The run's log says what it fitted.
func TestPRMEndpointServeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a server and a training step as processes")
	}
	bin, env := buildForSignals(t)
	server := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--backend", "go", "--slots", "2", "--max-new-tokens", "16")
	server.Env = env
	out, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/v1)$`)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		close(urls)
	}()
	var base string
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatal("serve ended before printing its URL")
		}
		base = u
	case <-time.After(2 * time.Minute):
		t.Fatal("serve printed no URL in 2 minutes")
	}

	// The PRM's requests reach the server through this door, which SIGKILLs it when the third
	// arrives.
	door := servetest.NewDoor(t, base, 3, func() { _ = server.Process.Kill(); _, _ = server.Process.Wait() })

	args := []string{"run", filepath.Join("recipes", "retool.yaml"), "--ui", "json", "--store", filepath.Join(t.TempDir(), "runs.db"), "--max-steps", "1"}
	for _, kv := range []string{"rollout.tasks_per_step=2", "rollout.group_size=2", "eval.every=0", "eval.at_start=false",
		"checkpoint.keep_best=0", "early_stop.patience=0", "early_stop.max_drop=0",
		"hinter.kind=none", "prm.kind=model", "prm.endpoint=" + door.URL, "prm.model=agentrl-builtin",
		"prm.timeout=5s", "prm.retries=1", "prm.max_new_tokens=16", "prm.prompt=@prm-builtin.txt", "prm.api_key_env="} { // the lengths fitted to the server's max_model_len
		args = append(args, "--set", kv)
	}
	run, events, stderr := startJSON(t, bin, env, args...)
	var metrics map[string]any
	status := ""
	deadline := time.After(5 * time.Minute)
	for done := false; !done; {
		select {
		case e, ok := <-events:
			if !ok {
				done = true
				break
			}
			switch e["type"] {
			case "metrics":
				metrics, _ = e["metrics"].(map[string]any)
			case "run_end":
				status, _ = e["status"].(string)
			}
		case <-deadline:
			t.Fatalf("the run did not end in 5 minutes:\n%s", stderr)
		}
	}
	if err := run.Wait(); err != nil || status != "finished" || metrics == nil {
		t.Fatalf("run: %v, status %q, metrics %v\n%s", err, status, metrics, stderr)
	}
	if !strings.Contains(stderr.String(), "prm: 1007 prompt and 16 reply tokens, to fit the context of agentrl-builtin at prm.endpoint (max_model_len 1023)") {
		t.Errorf("the run's log does not say it fitted the PRM's lengths to the server's context:\n%s", stderr)
	}
	num := func(k string) float64 { v, _ := metrics[k].(float64); return v }
	if answered := door.Answered(); answered != 2 || num("prm_unjudged") != 2 || num("prm_judged")+num("prm_malformed") != 2 {
		t.Errorf("answered %d; metrics judged %v, malformed %v, unjudged %v; want 2 answered, 2 unjudged",
			answered, num("prm_judged"), num("prm_malformed"), num("prm_unjudged"))
	}
}
