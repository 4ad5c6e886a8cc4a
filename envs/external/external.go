// Package external runs an agent program as the environment of one trajectory. The workbench
// starts the agent's command once per trajectory and hands it the task (as JSON on stdin and in
// AGENTRL_TASK) and an OpenAI-compatible endpoint with a per-trajectory key (OPENAI_BASE_URL,
// OPENAI_API_KEY); the agent calls the model through the endpoint as it would any model, and
// prints its result as one JSON object on its last non-empty stdout line:
//
//	{"reward": 0.5}                        the agent scored itself
//	{"answer": "42", "info": {"turns": 2}} the workbench's verifier scores the answer
//
// with an optional "info" object that is kept with the trajectory.
//
// The agent runs in its own process group. When it times out or the caller's context ends the
// whole group gets SIGTERM, then SIGKILL after a grace period; when it exits, whatever it left
// running in its group is killed. Run returns only once the agent has been reaped and its output
// pipes are closed, so no process of a trajectory outlives it. Whatever goes wrong with the agent
// itself (a crash, a hang, no result or an unparsable one) is not an error of Run: it comes back
// as a Result whose Drop and Dropped say why, so that the caller drops the trajectory, shows the
// reason and counts it.
package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"agentrl/envs"
)

// Config says how to run the agent.
type Config struct {
	// Command is the agent's argv. Command[0] is a program on PATH or a path; a relative path is
	// relative to Dir.
	Command []string
	// Dir is the agent's working folder; "" is the caller's.
	Dir string
	// Env adds variables to the caller's environment (they win over it). OPENAI_BASE_URL,
	// OPENAI_API_KEY and AGENTRL_TASK are always the runner's.
	Env map[string]string
	// Timeout bounds one agent from start to exit; 0 means no bound but the context's.
	Timeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL when the agent is stopped; 0 means 2s.
	Grace time.Duration
	// StderrTail is how many bytes of the end of the agent's stderr are kept; 0 means 4 KiB.
	StderrTail int
	// MaxStdout is how many bytes of the end of stdout are kept to find the result line in;
	// 0 means 1 MiB. The result line must fit.
	MaxStdout int
	// HiddenMeta lists task meta keys the agent must not see; nil means DefaultHiddenMeta().
	HiddenMeta []string
}

// DefaultHiddenMeta returns the meta keys that can give the answer away (retool's synthetic tasks
// keep the reference program in "code").
func DefaultHiddenMeta() []string { return []string{"answer", "code", "solution"} }

// Drop says why a trajectory's agent gave nothing usable.
type Drop string

// The kinds of Drop; a usable Result has DropNone.
const (
	DropNone      Drop = ""
	DropCrashed   Drop = "crashed"    // a non-zero exit status or a signal the runner did not send
	DropTimeout   Drop = "timeout"    // ran past Config.Timeout; killed
	DropCancelled Drop = "cancelled"  // the caller's context ended; killed
	DropNoResult  Drop = "no_result"  // exited 0 without a non-empty stdout line
	DropBadResult Drop = "bad_result" // the last line is not a usable result object
	// DropNotStarted comes with Run's error: the program could not be found or started.
	DropNotStarted Drop = "not_started"
)

// Result is what one agent run gave.
type Result struct {
	// Reward is the agent's own score ({"reward": r}); nil when it gave an answer or was dropped.
	Reward *float64
	// Answer is the agent's final answer ({"answer": "…"}), to be verified; nil otherwise.
	Answer *string
	// Info is the result's "info" object as written, nil when absent.
	Info json.RawMessage
	// StderrTail is the end of the agent's stderr (Config.StderrTail bytes at most).
	StderrTail string
	// ExitCode is the agent's exit status; -1 when a signal ended it.
	ExitCode int
	// Signal names the signal that ended the agent ("SIGKILL"), "" when it exited.
	Signal string
	// Duration is the time from the agent's start until it was reaped.
	Duration time.Duration
	// Queued is the time spent waiting for a worker (Runner.Run), not counted in Duration.
	Queued time.Duration
	// Drop is the kind of failure, DropNone when the result is usable.
	Drop Drop
	// Dropped says in a sentence why the trajectory is dropped: "" when it is usable.
	Dropped string
}

// Usable reports whether the agent gave a reward or an answer.
func (r Result) Usable() bool { return r.Drop == DropNone }

// TaskJSON is the task as the agent sees it: {"id", "prompt", "meta"}, never the reference answer;
// meta leaves out the hidden keys (nil: DefaultHiddenMeta()) and any value equal to the answer.
func TaskJSON(t envs.Task, hidden []string) []byte {
	if hidden == nil {
		hidden = DefaultHiddenMeta()
	}
	meta := map[string]string{}
	for k, v := range t.Meta {
		if !contains(hidden, k) && (t.Answer == "" || strings.TrimSpace(v) != strings.TrimSpace(t.Answer)) {
			meta[k] = v
		}
	}
	data, _ := json.Marshal(struct { // strings and a map of strings: Marshal cannot fail
		ID     string            `json:"id"`
		Prompt string            `json:"prompt"`
		Meta   map[string]string `json:"meta"`
	}{t.ID, t.Prompt, meta})
	return data
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Resolve finds the program Command[0] names: a path (with a '/'), relative to dir when not
// absolute, or a name looked up on PATH. The error says what to fix.
func Resolve(command []string, dir string) (string, error) {
	if len(command) == 0 || command[0] == "" {
		return "", errors.New("the agent command is empty; give its argv, e.g. [node, agent.mjs]")
	}
	if dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", fmt.Errorf("the agent's folder %q is not a folder", dir)
		}
	}
	name := command[0]
	if !strings.Contains(name, "/") {
		path, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("the agent program %q is not on PATH; install it or give its path", name)
		}
		return filepath.Abs(path)
	}
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return "", fmt.Errorf("the agent program %q does not exist (relative paths are relative to the agent's folder %q)", path, dir)
	case st.IsDir() || st.Mode()&0o111 == 0:
		return "", fmt.Errorf("the agent program %q is not an executable file", path)
	}
	return filepath.Abs(path)
}

// killWait bounds the wait for SIGKILLed processes to die: only one stuck in the kernel (D state)
// takes that long.
const killWait = 5 * time.Second

// maxEnvTask is the longest task JSON also put in AGENTRL_TASK (Linux refuses a single variable
// over 128 KiB); longer tasks are on stdin only.
const maxEnvTask = 64 << 10

func (c Config) withDefaults() Config {
	if c.Grace <= 0 {
		c.Grace = 2 * time.Second
	}
	if c.StderrTail <= 0 {
		c.StderrTail = 4 << 10
	}
	if c.MaxStdout <= 0 {
		c.MaxStdout = 1 << 20
	}
	return c
}

// Run starts the agent for one task with the endpoint baseURL and key apiKey, waits for it and
// reads its result. The error is for what is not the agent's fault: the program cannot be found
// or started, or ctx ended (then the Result, DropCancelled, says what the agent had done).
func Run(ctx context.Context, cfg Config, task envs.Task, baseURL, apiKey string) (Result, error) {
	path, err := Resolve(cfg.Command, cfg.Dir)
	if err != nil {
		return notStarted(err), err
	}
	return run(ctx, cfg.withDefaults(), path, task, baseURL, apiKey)
}

func run(ctx context.Context, cfg Config, path string, task envs.Task, baseURL, apiKey string) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{ExitCode: -1, Drop: DropCancelled, Dropped: "cancelled before the agent started"}, err
	}
	taskJSON := TaskJSON(task, cfg.HiddenMeta)
	env := os.Environ()
	for k, v := range cfg.Env {
		env = append(env, k+"="+v)
	}
	env = append(env, "OPENAI_BASE_URL="+baseURL, "OPENAI_API_KEY="+apiKey)
	if len(taskJSON) <= maxEnvTask {
		env = append(env, "AGENTRL_TASK="+string(taskJSON))
	}

	var pipes [3][2]*os.File // stdin, stdout, stderr: read end, write end
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(pipes[:])
			err = fmt.Errorf("agent pipes: %w", err)
			return notStarted(err), err
		}
		pipes[i] = [2]*os.File{r, w}
	}
	cmd := &exec.Cmd{Path: path, Args: cfg.Command, Dir: cfg.Dir, Env: env,
		Stdin: pipes[0][0], Stdout: pipes[1][1], Stderr: pipes[2][1], SysProcAttr: groupAttr()}
	start := time.Now()
	err := cmd.Start()
	// The child holds its ends now; ours must go so that EOF comes when the agent's group is gone.
	pipes[0][0].Close()
	pipes[1][1].Close()
	pipes[2][1].Close()
	stdinW, stdoutR, stderrR := pipes[0][1], pipes[1][0], pipes[2][0]
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		stderrR.Close()
		err = fmt.Errorf("starting agent %s: %w", strings.Join(cfg.Command, " "), err)
		return notStarted(err), err
	}
	pgid := cmd.Process.Pid

	out, errTail := newTail(cfg.MaxStdout), newTail(cfg.StderrTail)
	var pumps sync.WaitGroup
	pumps.Add(3)
	go func() {
		defer pumps.Done()
		// An agent that never reads stdin makes this fail (EPIPE) when it exits: not its fault.
		_, _ = stdinW.Write(append(taskJSON, '\n'))
		_ = stdinW.Close()
	}()
	go func() { defer pumps.Done(); copyAll(out, stdoutR) }()
	go func() { defer pumps.Done(); copyAll(errTail, stderrR) }()

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var timeout <-chan time.Time
	if cfg.Timeout > 0 {
		t := time.NewTimer(cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var stopped Drop
	select {
	case <-exited:
	case <-timeout:
		stopped = DropTimeout
		terminate(pgid, exited, cfg.Grace)
	case <-ctx.Done():
		stopped = DropCancelled
		terminate(pgid, exited, cfg.Grace)
	}
	// The agent is reaped; what it left running in its group goes too, which also closes the
	// pipes they held. A process that left the group (setsid) may still hold one: stop reading
	// after the grace period.
	signalGroup(pgid, sigKill)
	waitGroupGone(pgid, killWait)
	done := make(chan struct{})
	go func() { pumps.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(cfg.Grace):
		stdinW.Close()
		stdoutR.Close()
		stderrR.Close()
		<-done
	}
	stdoutR.Close()
	stderrR.Close()

	res := Result{StderrTail: errTail.String(), Duration: time.Since(start)}
	res.ExitCode, res.Signal = exitStatus(cmd.ProcessState)
	switch stopped {
	case DropTimeout:
		res.Drop, res.Dropped = DropTimeout, fmt.Sprintf("timed out after %s; its process group was killed", cfg.Timeout)
		return res, nil
	case DropCancelled:
		res.Drop, res.Dropped = DropCancelled, "cancelled (the run is stopping); its process group was killed"
		return res, ctx.Err()
	}
	if res.ExitCode != 0 {
		how := fmt.Sprintf("exit status %d", res.ExitCode)
		if res.Signal != "" {
			how = "killed by " + res.Signal
		}
		res.Drop, res.Dropped = DropCrashed, "crashed: "+how
		res.Dropped += crashDetail(res.StderrTail, cfg.Dir)
		return res, nil
	}
	parseResult(&res, lastLine(out.String()))
	return res, nil
}

func notStarted(err error) Result {
	return Result{ExitCode: -1, Drop: DropNotStarted, Dropped: "not started: " + err.Error()}
}

// terminate stops the agent's group: SIGTERM, then SIGKILL after grace, and waits for the agent
// to be reaped.
func terminate(pgid int, exited <-chan error, grace time.Duration) {
	signalGroup(pgid, sigTerm)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
		return
	case <-t.C:
	}
	signalGroup(pgid, sigKill)
	<-exited
}

func closeAll(pipes [][2]*os.File) {
	for _, p := range pipes {
		for _, f := range p {
			if f != nil {
				f.Close()
			}
		}
	}
}

// copyAll drains r into w; a read error (the pipe closed under it) ends it like EOF.
func copyAll(w io.Writer, r io.Reader) { _, _ = io.Copy(w, r) }
