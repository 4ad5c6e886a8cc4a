//go:build unix

package external

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agentrl/envs"
)

var testTask = envs.Task{ID: "t-7", Prompt: "What is 6 * 7?", Answer: "42",
	Meta: map[string]string{"level": "0", "code": "print(6 * 7)", "hint": "42"}}

// sh runs script under /bin/sh as the agent.
func sh(script string) Config {
	return Config{Command: []string{"sh", "-c", script}, Grace: 100 * time.Millisecond}
}

// TestResults: what an agent prints and how it ends decide the result or the reason it is dropped.
func TestResults(t *testing.T) {
	long := `i=0; while [ $i -lt 2000 ]; do echo "log line $i: the agent talks a lot on stdout"; i=$((i+1)); done; echo '{"reward": 0.25}'`
	tests := []struct {
		name      string
		cfg       Config
		reward    float64 // checked when the result is usable and has a reward
		answer    string  // checked when the result is usable and has an answer
		info      string
		drop      Drop
		dropped   []string // substrings of Dropped
		exit      int
		signal    string
		stderrEnd string
	}{
		{name: "reward", cfg: sh(`echo "thinking"; echo '{"reward": 0.5}'`), reward: 0.5},
		{name: "answer with info and blank lines after it", cfg: sh(`echo '{"answer": "42", "info": {"turns": 2, "calls": [1, 2]}}'; echo; echo "   "`),
			answer: "42", info: `{"turns": 2, "calls": [1, 2]}`},
		{name: "number answer kept as written", cfg: sh(`echo '{"answer": 4.50}'`), answer: "4.50"},
		{name: "negative reward", cfg: sh(`echo '{"reward": -1}'`), reward: -1},
		{name: "stdout beyond MaxStdout", cfg: Config{Command: []string{"sh", "-c", long}, MaxStdout: 1024}, reward: 0.25},
		{name: "crash", cfg: sh(`echo partial; echo 'boom: the model is gone' >&2; exit 3`),
			drop: DropCrashed, dropped: []string{"crashed: exit status 3", `stderr ends "boom: the model is gone"`}, exit: 3, stderrEnd: "boom: the model is gone\n"},
		{name: "crash after printing a result", cfg: sh(`echo '{"reward": 1}'; exit 1`), drop: DropCrashed, dropped: []string{"exit status 1"}, exit: 1},
		{name: "killed by a signal", cfg: sh(`kill -SEGV $$`), drop: DropCrashed, dropped: []string{"crashed: killed by SIGSEGV"}, exit: -1, signal: "SIGSEGV"},
		{name: "hang past the timeout", cfg: Config{Command: []string{"sleep", "1000"}, Timeout: 150 * time.Millisecond, Grace: 10 * time.Second},
			drop: DropTimeout, dropped: []string{"timed out after 150ms", "killed"}, exit: -1, signal: "SIGTERM"},
		{name: "no output", cfg: sh(`true`), drop: DropNoResult, dropped: []string{"printed no result", `{"answer": "42"}`}},
		{name: "only blank lines", cfg: sh(`printf '\n  \n\n'`), drop: DropNoResult},
		{name: "garbage last line", cfg: sh(`echo '{"reward": 1}'; echo 'All done!'`), drop: DropBadResult,
			dropped: []string{`unparsable result line "All done!"`}},
		{name: "a JSON array", cfg: sh(`echo '[1, 2]'`), drop: DropBadResult, dropped: []string{"unparsable"}},
		{name: "null", cfg: sh(`echo null`), drop: DropBadResult, dropped: []string{"unparsable"}},
		{name: "very long garbage is clipped", cfg: sh(`printf 'x%.0s' $(seq 1 500); echo`), drop: DropBadResult, dropped: []string{`xxx"…`}},
		{name: "both reward and answer", cfg: sh(`echo '{"reward": 1, "answer": "42"}'`), drop: DropBadResult, dropped: []string{`both "reward" and "answer"`}},
		{name: "neither", cfg: sh(`echo '{"score": 1}'`), drop: DropBadResult, dropped: []string{`neither "reward" nor "answer"`}},
		{name: "reward as a string", cfg: sh(`echo '{"reward": "1"}'`), drop: DropBadResult, dropped: []string{`"reward" in result line`, "not a number"}},
		{name: "reward null", cfg: sh(`echo '{"reward": null}'`), drop: DropBadResult, dropped: []string{"not a number"}},
		{name: "NaN as Python writes it", cfg: sh(`echo '{"reward": NaN}'`), drop: DropBadResult, dropped: []string{"non-finite reward NaN"}},
		{name: "Infinity as Python writes it", cfg: sh(`echo '{"reward": -Infinity}'`), drop: DropBadResult, dropped: []string{"non-finite reward Infinity"}},
		{name: "reward overflowing float64", cfg: sh(`echo '{"reward": 1e999}'`), drop: DropBadResult, dropped: []string{"non-finite reward 1e999"}},
		{name: "answer an object", cfg: sh(`echo '{"answer": {"value": 42}}'`), drop: DropBadResult, dropped: []string{`"answer" in result line`, "not a string"}},
		{name: "info not an object", cfg: sh(`echo '{"answer": "42", "info": "two turns"}'`), drop: DropBadResult, dropped: []string{`"info"`, "not a JSON object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(context.Background(), tt.cfg, testTask, "http://127.0.0.1:1/v1", "key-1")
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Drop != tt.drop {
				t.Fatalf("got drop %q (%s); want %q", res.Drop, res.Dropped, tt.drop)
			}
			if (res.Dropped == "") != (tt.drop == DropNone) || res.Usable() != (tt.drop == DropNone) {
				t.Errorf("Dropped %q and Usable %v disagree with drop %q", res.Dropped, res.Usable(), res.Drop)
			}
			for _, want := range tt.dropped {
				if !strings.Contains(res.Dropped, want) {
					t.Errorf("Dropped = %q; want it to contain %q", res.Dropped, want)
				}
			}
			if res.ExitCode != tt.exit || res.Signal != tt.signal {
				t.Errorf("exit %d, signal %q; want %d, %q", res.ExitCode, res.Signal, tt.exit, tt.signal)
			}
			if tt.stderrEnd != "" && !strings.HasSuffix(res.StderrTail, tt.stderrEnd) {
				t.Errorf("stderr tail %q; want it to end %q", res.StderrTail, tt.stderrEnd)
			}
			if tt.cfg.Timeout > 0 && res.Duration < tt.cfg.Timeout {
				t.Errorf("dropped for a timeout after %s, before the timeout of %s", res.Duration, tt.cfg.Timeout)
			}
			if tt.drop != DropNone {
				if res.Reward != nil || res.Answer != nil {
					t.Errorf("a dropped result has reward %v, answer %v", res.Reward, res.Answer)
				}
				return
			}
			switch {
			case tt.answer != "":
				if res.Answer == nil || *res.Answer != tt.answer || res.Reward != nil {
					t.Errorf("got answer %v, reward %v; want answer %q", res.Answer, res.Reward, tt.answer)
				}
			default:
				if res.Reward == nil || *res.Reward != tt.reward || res.Answer != nil {
					t.Errorf("got reward %v, answer %v; want reward %v", res.Reward, res.Answer, tt.reward)
				}
			}
			if string(res.Info) != tt.info {
				t.Errorf("info %s; want %s", res.Info, tt.info)
			}
		})
	}
}

// TestWhatTheAgentGets: the task on stdin and in AGENTRL_TASK (never its answer, nor meta that
// gives it away), the endpoint and key, the extra variables, the working folder, stderr's tail.
func TestWhatTheAgentGets(t *testing.T) {
	out := t.TempDir()
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Command: []string{"./record.sh"}, Dir: dir,
		Env: map[string]string{"OUT": out, "EXTRA": "yes", "OPENAI_API_KEY": "the recipe's, not the trajectory's"}}
	res, err := Run(context.Background(), cfg, testTask, "http://127.0.0.1:8000/v1", "sk-traj-7")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Usable() || res.Reward == nil || *res.Reward != 1 || res.StderrTail != "recorded\n" {
		t.Fatalf("got %+v; want reward 1 and stderr \"recorded\\n\"", res)
	}
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	want := `{"id":"t-7","prompt":"What is 6 * 7?","meta":{"level":"0"}}`
	if got := read("stdin"); got != want+"\n" {
		t.Errorf("stdin %q; want %q", got, want+"\n")
	}
	if got := read("task_env"); got != want {
		t.Errorf("AGENTRL_TASK %q; want %q", got, want)
	}
	var task map[string]any
	if err := json.Unmarshal([]byte(read("task_env")), &task); err != nil || task["answer"] != nil {
		t.Errorf("AGENTRL_TASK %v (%v): want a JSON object without the answer", task, err)
	}
	env := "\n" + read("env")
	for _, kv := range []string{"OPENAI_BASE_URL=http://127.0.0.1:8000/v1", "OPENAI_API_KEY=sk-traj-7", "EXTRA=yes", "PATH="} {
		if !strings.Contains(env, "\n"+kv) {
			t.Errorf("the agent's environment lacks %s", kv)
		}
	}
	if strings.Contains(env, "the recipe's") {
		t.Errorf("Config.Env overrode the trajectory's key")
	}
	if got := strings.TrimSpace(read("pwd")); got != dir {
		t.Errorf("working folder %q; want %q", got, dir)
	}
}

func TestStderrTail(t *testing.T) {
	cfg := sh(`i=0; while [ $i -lt 200 ]; do echo "warning $i: something on stderr" >&2; i=$((i+1)); done; echo 'é last words' >&2; echo '{"reward": 1}'`)
	cfg.StderrTail = 100
	res, err := Run(context.Background(), cfg, testTask, "", "")
	if err != nil || !res.Usable() {
		t.Fatalf("%+v, %v", res, err)
	}
	if len(res.StderrTail) > 100 || !strings.HasSuffix(res.StderrTail, "é last words\n") || strings.Contains(res.StderrTail, "warning 0:") {
		t.Errorf("stderr tail %q (%d bytes); want at most 100 bytes ending with the last words", res.StderrTail, len(res.StderrTail))
	}
}

// TestStartErrors: a command that cannot start is an error of Run with what to fix, not a drop.
func TestStartErrors(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"empty", Config{}, "the agent command is empty"},
		{"not on PATH", Config{Command: []string{"no-such-agent-program"}}, `"no-such-agent-program" is not on PATH; install it or give its path`},
		{"relative path missing", Config{Command: []string{"./agent.mjs"}, Dir: "testdata"}, `"testdata/agent.mjs" does not exist (relative paths are relative to the agent's folder "testdata")`},
		{"not executable", Config{Command: []string{notExec}}, "is not an executable file"},
		{"folder missing", Config{Command: []string{"sh"}, Dir: "no-such-folder"}, `the agent's folder "no-such-folder" is not a folder`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(context.Background(), tt.cfg, testTask, "", "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want an error containing %q", err, tt.want)
			}
			if res.Usable() || res.Drop != DropNotStarted || !strings.Contains(res.Dropped, tt.want) {
				t.Errorf("result %+v; want not started, saying why", res)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, sh(`echo '{"reward": 1}'`), testTask, "", "")
	if !errors.Is(err, context.Canceled) || res.Drop != DropCancelled {
		t.Errorf("an ended context: got %+v, %v; want cancelled", res, err)
	}
}

func TestTaskJSON(t *testing.T) {
	got := string(TaskJSON(envs.Task{ID: "a", Prompt: "p", Answer: "7", Meta: map[string]string{"solution": "x", "k": "v", "copy": " 7 "}}, nil))
	if want := `{"id":"a","prompt":"p","meta":{"k":"v"}}`; got != want {
		t.Errorf("got %s; want %s", got, want)
	}
	got = string(TaskJSON(envs.Task{ID: "a", Prompt: "p", Answer: "7", Meta: map[string]string{"code": "c"}}, []string{}))
	if want := `{"id":"a","prompt":"p","meta":{"code":"c"}}`; got != want {
		t.Errorf("no hidden keys: got %s; want %s", got, want)
	}
}

func TestTail(t *testing.T) {
	tl := newTail(5)
	for _, s := range []string{"ab", "cdefgh", "", "ijklmnopqrstu", "v"} {
		tl.Write([]byte(s))
	}
	if got := tl.String(); got != "rstuv" {
		t.Errorf("got %q; want the last 5 bytes rstuv", got)
	}
	tl = newTail(3)
	tl.Write([]byte("aé€")) // é is 2 bytes, € 3: the tail starts at a whole character
	if got := tl.String(); got != "€" {
		t.Errorf("got %q; want €", got)
	}
}
