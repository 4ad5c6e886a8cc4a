package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"agentrl/engine/batch"
	"agentrl/engine/device"
	"agentrl/engine/event"
	"agentrl/engine/model"
	"agentrl/engine/play"
	"agentrl/engine/tokenizer"
	"agentrl/engine/train"
	"agentrl/envs"
	"agentrl/envs/external"
	"agentrl/recipes"
	"agentrl/store"
)

// These tests run env.name external for real: the built-in model behind the controller's own
// engine/serve endpoint, the example agent (Node on the official openai package, its code run by
// a freshly built agentrl-tui's `tool run`) or a faulty agent program, one process per trajectory.

var (
	benchOnce sync.Once
	benchDir  string // the folder benchBin is built in; TestMain removes it
	benchBin  string
	benchErr  error
)

// TestMain removes the agentrl-tui binary that workbenchBinary built (some 40 MB in the OS temp
// dir) once the package's tests are done: a t.Cleanup cannot, as the binary is shared by tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		if err := os.RemoveAll(benchDir); err != nil {
			fmt.Fprintf(os.Stderr, "removing the test's agentrl-tui build: %v\n", err)
		}
	}
	os.Exit(code)
}

// workbenchBinary builds agentrl-tui once per test binary: the example agent runs its code with
// its `tool run` (AGENTRL_BIN), as it does under the real binary.
func workbenchBinary(t *testing.T) string {
	t.Helper()
	benchOnce.Do(func() {
		if benchDir, benchErr = os.MkdirTemp("", fmt.Sprintf("agentrl-engine-test-%d-", os.Getpid())); benchErr != nil {
			return
		}
		benchBin = filepath.Join(benchDir, "agentrl-tui")
		if out, err := exec.Command("go", "build", "-o", benchBin, "agentrl").CombinedOutput(); err != nil {
			benchErr = fmt.Errorf("building agentrl-tui for the agent's tool runs: %v\n%s", err, out)
		}
	})
	if benchErr != nil {
		t.Fatal(benchErr)
	}
	return benchBin
}

// exampleAgentDir returns examples/retool-agent when npm ci has installed its pinned openai
// package there, else a temporary copy where this installs it; without node or npm the test
// fails and says what to install.
func exampleAgentDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: the example agent needs Node.js 20 or later (Debian: apt-get install nodejs npm)")
	}
	src, err := filepath.Abs(filepath.Join("..", "examples", "retool-agent"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	var installed struct{ Version string }
	data, err := os.ReadFile(filepath.Join(src, "package.json"))
	if err == nil {
		err = json.Unmarshal(data, &pkg)
	}
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(src, "node_modules", "openai", "package.json")); err == nil && json.Unmarshal(data, &installed) == nil && installed.Version == pkg.Dependencies["openai"] {
		return src
	}
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "agent.mjs"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f), data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the example agent needs its openai package and npm ci failed (%v):\n%s\nrun npm ci in examples/retool-agent", err, out)
	}
	return dir
}

// externalRun builds a controller for a short agent-retool.yaml run on the built-in model (tiny
// sizes: two tasks of two samples, one step) with the overrides given, storing into a fresh store.
func externalRun(t *testing.T, extra map[string]string) (*Controller, chan event.Event) {
	t.Helper()
	dir := filepath.Join("..", model.BuiltinSourceDir)
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	backend, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := model.Load(backend, dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reference, err := model.Load(backend, dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	over := map[string]string{
		"run.max_steps": "1", "rollout.tasks_per_step": "2", "rollout.group_size": "2", "eval.at_start": "false", "eval.every": "0",
		"eval.validation_tasks": "0", "checkpoint.every": "0", "env.tasks.train_size": "8", "env.tasks.heldout_size": "4",
		"early_stop.patience": "0", "early_stop.max_drop": "0", "env.external.dir": exampleAgentDir(t), "env.external.timeout": "2m",
		"eval.heldout_tasks": "2", "eval.n_samples": "2", "eval.ks": "1,2", "checkpoint.keep_best": "0",
	}
	for k, v := range extra {
		over[k] = v
	}
	r, err := recipes.Load(filepath.Join("..", "recipes", "agent-retool.yaml"), recipes.Options{IgnoreEnv: true, Overrides: over})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan event.Event, 4096)
	c, err := New(Options{Recipe: r, RecipePath: "agent-retool.yaml", RunID: "agent-run", Policy: policy, Reference: reference, Tokenizer: tok,
		Store: st, Events: events, Backend: "go", ModelFiles: map[string][]byte{"config.json": []byte("{}")}, AgentBin: workbenchBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, events
}

// runToEnd runs c and returns its events; the run must end without an error.
func runToEnd(t *testing.T, c *Controller, events chan event.Event) []event.Event {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()); close(events) }()
	var all []event.Event
	for e := range events {
		all = append(all, e)
	}
	if err := <-errc; err != nil {
		t.Fatalf("the run failed: %v", err)
	}
	return all
}

// transcriptFile is what the example agent writes to AGENTRL_TRANSCRIPT_DIR.
type transcriptFile struct {
	Key      string `json:"key"`
	Messages []struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Replies []struct {
		Content      string `json:"content"`
		FinishReason string `json:"finish_reason"`
	} `json:"replies"`
}

// TestExternalTrainsSampledTokens runs one step of agent-retool.yaml with the example agent and
// the built-in model, and checks, for every trajectory, that the sequences the trainer gets are
// the server's recorded segments, and that they are exactly the tokens sampled plus the agent's
// messages as the chat template renders them: rebuilt independently from the agent's own
// transcript (what it sent, what it got back), the prompt and each added message tokenised,
// each reply's sampled tokens decoding to what the agent received (plus the stop string the
// reply was cut at). The log-prob probe covers those tokens and stays under the alarm threshold.
func TestExternalTrainsSampledTokens(t *testing.T) {
	tdir := t.TempDir()
	c, events := externalRun(t, map[string]string{
		"env.external.env": "AGENTRL_AGENT_TOOLS=none,AGENTRL_MAX_TURNS=3,AGENTRL_MAX_TOKENS=96,AGENTRL_AGENT_EXECUTOR=starlark,AGENTRL_TRANSCRIPT_DIR=" + tdir,
	})
	tok := c.opts.Tokenizer
	type trained struct {
		t    *batch.Trajectory
		seqs []train.Sequence
	}
	var got []trained
	c.opts.hooks.onTrain = func(step int, trajs []*batch.Trajectory, seqs []train.Sequence) {
		for i, tr := range trajs {
			if tr.IsLaterSegment() {
				continue
			}
			g := trained{t: tr, seqs: []train.Sequence{seqs[i]}}
			for j, s := range trajs {
				if s.SegmentOf == tr {
					g.seqs = append(g.seqs, seqs[j])
				}
			}
			got = append(got, g)
		}
	}
	all := runToEnd(t, c, events)
	if len(got) != 4 {
		t.Fatalf("the update trained %d trajectories; want the step's 4", len(got))
	}
	files, _ := filepath.Glob(filepath.Join(tdir, "*.json"))
	byKey := map[string]transcriptFile{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tf transcriptFile
		if err := json.Unmarshal(data, &tf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		byKey[tf.Key] = tf
	}
	imEnd, _ := tok.TokenID("<|im_end|>")
	for _, g := range got {
		x := play.AgentRunOf(g.t)
		name := fmt.Sprintf("%s#%d", g.t.Task.ID, g.t.Sample)
		// The trainer's sequences are the server's segments, token for token.
		if len(g.seqs) != len(x.Record.Segments) {
			t.Fatalf("%s: %d sequences trained for %d segments", name, len(g.seqs), len(x.Record.Segments))
		}
		for i, s := range x.Record.Segments {
			q := g.seqs[i]
			if !slices.Equal(q.Tokens, s.Tokens) || !slices.Equal(q.LossMask, s.Mask) || !slices.Equal(q.OldLogProbs, s.LogProbs) {
				t.Errorf("%s: sequence %d is not the server's segment %d", name, i, i)
			}
		}
		// …and they are the agent's conversation: rebuilt from its transcript alone.
		tf, ok := byKey[x.Key]
		if !ok {
			t.Fatalf("%s: the agent wrote no transcript for its key", name)
		}
		if len(x.Record.Segments) != 1 {
			t.Fatalf("%s: %d segments; the example agent always extends its conversation", name, len(x.Record.Segments))
		}
		seq := g.seqs[0]
		var msgs []envs.Message
		for _, m := range tf.Messages {
			msgs = append(msgs, envs.Message{Role: m.Role, Content: m.Content})
		}
		// The first request: the system prompt and the problem, rendered.
		opening, err := tokenizer.RenderChat(msgs[:2], nil, true)
		if err != nil {
			t.Fatal(err)
		}
		want := tok.Encode(opening)
		if len(seq.Tokens) < len(want) || !slices.Equal(seq.Tokens[:len(want)], want) || x.Record.Segments[0].PromptLen != len(want) {
			t.Fatalf("%s: the trained sequence does not start with the agent's rendered opening messages", name)
		}
		at := len(want)
		next := 2 // the agent's next message: its copy of a reply, then what it added
		for k, reply := range tf.Replies {
			// The sampled run: mask true, the model's log-probs, decoding to what the agent got.
			end := at
			for end < len(seq.Tokens) && seq.LossMask[end] {
				end++
			}
			if end == at {
				t.Fatalf("%s: reply %d has no sampled tokens at %d", name, k, at)
			}
			for j := at; j < end; j++ {
				if seq.OldLogProbs[j] >= 0 || seq.OldLogProbs[j] < -50 {
					t.Errorf("%s: sampled token %d has log-prob %g", name, j, seq.OldLogProbs[j])
				}
			}
			// What the client got: the text without the end-of-turn token, cut at the agent's stop
			// string (OpenAI leaves it out).
			text := tok.Decode(seq.Tokens[at:end], false)
			body := strings.TrimSuffix(text, "<|im_end|>")
			if i := strings.Index(body, "</code>"); i >= 0 && reply.FinishReason == "stop" {
				body = body[:i]
			}
			if body != reply.Content {
				t.Errorf("%s: reply %d: the sampled tokens read %q; the agent received %q", name, k, text, reply.Content)
			}
			at = end
			if next >= len(tf.Messages) || tf.Messages[next].Role != "assistant" {
				t.Fatalf("%s: the transcript has no copy of reply %d", name, k)
			}
			next++
			var added []envs.Message
			for next < len(tf.Messages) && tf.Messages[next].Role != "assistant" {
				added = append(added, msgs[next])
				next++
			}
			if len(added) == 0 {
				if at != len(seq.Tokens) {
					t.Errorf("%s: %d tokens follow the last reply", name, len(seq.Tokens)-at)
				}
				break
			}
			// What the agent added after the reply: the turn closed, the messages rendered.
			var add []int32
			if seq.Tokens[at-1] != imEnd {
				add = append(add, imEnd)
			}
			rendered, err := tokenizer.RenderChat(added, nil, true)
			if err != nil {
				t.Fatal(err)
			}
			add = append(add, tok.Encode("\n"+rendered)...)
			if at+len(add) > len(seq.Tokens) || !slices.Equal(seq.Tokens[at:at+len(add)], add) {
				t.Fatalf("%s: after reply %d the sequence does not hold the agent's next messages %q, tokenised", name, k, rendered)
			}
			for j := at; j < at+len(add); j++ {
				if seq.LossMask[j] || seq.OldLogProbs[j] != 0 {
					t.Fatalf("%s: token %d of the agent's messages is trained on", name, j)
				}
			}
			at += len(add)
		}
		if at != len(seq.Tokens) {
			t.Errorf("%s: the sequence has %d tokens; the transcript accounts for %d", name, len(seq.Tokens), at)
		}
		t.Logf("%s: %d replies, %d tokens, %d sampled, as the agent's transcript renders", name, len(tf.Replies), len(seq.Tokens), sampledCount(seq.LossMask))
	}
	var metrics map[event.Metric]float64
	for _, e := range all {
		switch v := e.(type) {
		case event.StepMetrics:
			metrics = v.Metrics
		case event.Alarm:
			t.Errorf("alarm %s: %s", v.Kind, v.Message)
		}
	}
	if metrics == nil {
		t.Fatal("no step metrics")
	}
	if d := metrics["logprob_diff_max"]; !(d <= c.opts.LogProbAlarm) {
		t.Errorf("logprob_diff_max = %g; want at most the alarm threshold %g", d, c.opts.LogProbAlarm)
	}
	if metrics["dropped"] != 0 {
		t.Errorf("dropped = %v; want 0 with the example agent", metrics["dropped"])
	}
	if st := c.gen.Stats(); st.Busy != 0 {
		t.Errorf("%d KV slots still held after the run", st.Busy)
	}
}

// TestExternalFaults runs a step whose agents crash, hang past their timeout, print no result
// and print an unparsable one, beside ones that work and ones that rewrite their history: each
// faulty trajectory is dropped with its reason in its event (a crash with its stderr tail) and
// counted in the step's metrics, the others are trained (a group is normalised over the samples
// it has left; a rewritten history trains as two sequences with one reward and advantage),
// every process the agents started is gone, no KV slot is held, and the run goes on to its
// evaluation and end. It trains the Hybrid recipe (rules hints and process scores read from the
// agents' transcripts, the teacher on an agent's own prompt with the hint before the problem).
func TestExternalFaults(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	script, err := filepath.Abs(filepath.Join("testdata", "faulty-agent.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	modes := "train-0000=crash-first;train-0001=hang-first;train-0002=silent-first;train-0003=rewrite"
	c, events := externalRun(t, map[string]string{
		"rollout.tasks_per_step": "4", "env.external.timeout": "20s", "env.external.command": "node," + script,
		"env.external.env": "AGENTRL_AGENT_TOOLS=none,AGENTRL_MAX_TOKENS=96,AGENTRL_AGENT_EXECUTOR=starlark,FAULTY_PIDS=" + pids + ",FAULTY_DIR=" + dir +
			",FAULTY_MODES=" + modes,
		"eval.every": "1", "eval.heldout_tasks": "2", "eval.n_samples": "2", "eval.ks": "1,2",
		// Hybrid with the rules hinter and PRM: hints and process scores from agents' transcripts.
		"algorithm.name": "hybrid", "hinter.kind": "rules", "prm.kind": "rules", "reward.process": "0.1",
	})
	var trainedTasks []string
	hinted := 0
	c.opts.hooks.onTrain = func(_ int, trajs []*batch.Trajectory, seqs []train.Sequence) {
		for _, tr := range trajs {
			if tr.Hint != "" && tr.TeacherLogProbs != nil {
				hinted++
			}
			if tr.IsLaterSegment() {
				lead := tr.SegmentOf
				// Without a teacher, a sequence's advantage is its trajectory's (with one, the
				// trajectory's first segment adds the OPD term: TestAgentGroupStatistics).
				if lead.Task.ID != "train-0003" || tr.Reward != lead.Reward || tr.TeacherLogProbs != nil ||
					lead.TeacherLogProbs == nil && tr.Advantages[len(tr.Advantages)-1] != lead.Advantages[len(lead.Advantages)-1] {
					t.Errorf("%s#%d's later segment: reward %+v, advantage %g; want its trajectory's %+v, %g", lead.Task.ID, lead.Sample,
						tr.Reward, tr.Advantages[len(tr.Advantages)-1], lead.Reward, lead.Advantages[len(lead.Advantages)-1])
				}
				continue
			}
			trainedTasks = append(trainedTasks, tr.Task.ID)
			if x := play.AgentRunOf(tr); x.Drop != "" {
				t.Errorf("%s#%d is trained though dropped (%s)", tr.Task.ID, tr.Sample, x.Why)
			}
			if (tr.Task.ID == "train-0000" || tr.Task.ID == "train-0001") && tr.TeacherLogProbs == nil {
				for j, m := range tr.Mask {
					if m && tr.Advantages[j] != 0 {
						t.Errorf("%s#%d: advantage %g; want 0, its group's only sample left", tr.Task.ID, tr.Sample, tr.Advantages[j])
						break
					}
				}
			}
		}
	}
	all := runToEnd(t, c, events)
	drops := map[string]event.Trajectory{}
	var metrics map[event.Metric]float64
	var ended, evaluated bool
	evalTrajs := 0
	for _, e := range all {
		switch v := e.(type) {
		case event.Trajectory:
			if v.Eval {
				evalTrajs++
				if v.Agent == nil {
					t.Errorf("evaluation trajectory %s#%d has no agent run", v.TaskID, v.Sample)
				}
				continue
			}
			if v.IsDropped() {
				drops[v.Agent.Drop] = v
			}
			if v.TaskID == "train-0003" && (v.Agent.Segments != 2 || len(v.Turns) != 2 || !v.Turns[1].NewSegment) {
				t.Errorf("%s#%d: %d segments, turns %+v; want 2 segments, the second turn starting one", v.TaskID, v.Sample, v.Agent.Segments, v.Turns)
			}
		case event.StepMetrics:
			metrics = v.Metrics
		case event.Eval:
			evaluated = v.Step == 1
		case event.RunEnd:
			ended = true
		}
	}
	slices.Sort(trainedTasks)
	if want := []string{"train-0000", "train-0001", "train-0003", "train-0003"}; !slices.Equal(trainedTasks, want) {
		t.Errorf("trained %v; want %v", trainedTasks, want)
	}
	for kind, want := range map[string]string{"crashed": "exit status 3", "timeout": "timed out after 20s", "no_result": "printed no result", "bad_result": "unparsable result line"} {
		v, ok := drops[kind]
		switch {
		case !ok:
			t.Errorf("no trajectory dropped as %s; drops: %v", kind, drops)
		case !strings.Contains(v.Agent.Dropped, want):
			t.Errorf("%s: the reason reads %q; want it to say %q", kind, v.Agent.Dropped, want)
		case v.Correct || v.Reward.Total != 0:
			t.Errorf("%s: a dropped trajectory reads correct %v, reward %g", kind, v.Correct, v.Reward.Total)
		}
	}
	if tail := drops["crashed"].Agent; tail == nil || !strings.Contains(tail.StderrTail, "giving up on purpose") {
		t.Errorf("the crashed agent's event has no stderr tail: %+v", tail)
	}
	for k, want := range map[event.Metric]float64{"dropped": 4, "dropped_crashed": 1, "dropped_timeout": 1, "dropped_no_result": 1, "dropped_bad_result": 1, "dropped_no_requests": 0} {
		if got, ok := metrics[k]; !ok || got != want {
			t.Errorf("metric %s = %v (%v); want %v", k, got, ok, want)
		}
	}
	if hinted == 0 {
		t.Errorf("no trajectory had a hint and a teacher; the rewriting agent's wrong answers each need one")
	}
	if !evaluated || evalTrajs != 4 || !ended {
		t.Errorf("after the faults: evaluated %v with %d trajectories, run ended %v; want an evaluation of 4 and the run's end", evaluated, evalTrajs, ended)
	}
	if st := c.gen.Stats(); st.Busy != 0 {
		t.Errorf("%d KV slots still held after the run", st.Busy)
	}
	// No process an agent started outlives it.
	data, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(data))
	if len(lines) < 9 { // 8 agents, the examples they ran, the hung agent's child
		t.Errorf("only %d processes noted: %v", len(lines), lines)
	}
	for _, l := range lines {
		var pid int
		fmt.Sscan(l, &pid)
		if alive(pid) {
			t.Errorf("process %d, started by an agent, is still running", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// alive reports whether pid is a running process (a zombie, dead but not reaped by its new
// parent, is not).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

func sampledCount(mask []bool) int {
	n := 0
	for _, m := range mask {
		if m {
			n++
		}
	}
	return n
}

// TestAgentGroupStatistics: a dropped trajectory is left out of its group's statistics and an
// agent's later segment counts once, with its trajectory: the advantages are GRPO's over the
// trajectories that remain, one reward each, and the later segment gets its trajectory's.
func TestAgentGroupStatistics(t *testing.T) {
	r, err := recipes.Load(filepath.Join("..", "recipes", "retool-baseline.yaml"), recipes.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	c := &Controller{recipe: r}
	mk := func(group int, reward float64, drop external.Drop) *batch.Trajectory {
		return &batch.Trajectory{Group: group, Tokens: []int32{1, 2, 3}, Mask: []bool{false, true, true}, LogProbs: []float32{0, -1, -1},
			Reward: envs.Reward{Total: reward}, Agent: &play.AgentRun{Drop: drop}}
	}
	rewrote := mk(0, 1, "")
	rewrote.LaterSegments = []*batch.Trajectory{{Group: 0, Tokens: []int32{4, 5}, Mask: []bool{false, true}, LogProbs: []float32{0, -2}, SegmentOf: rewrote}}
	trajs := []*batch.Trajectory{rewrote, mk(0, 0, ""), mk(0, 0, external.DropCrashed), mk(0, 0, ""), mk(1, 1, ""), mk(1, 0, external.DropTimeout)}
	usable, dropped, err := play.SplitDropped(1, 0, trajs)
	if err != nil || len(usable) != 4 || len(dropped) != 2 {
		t.Fatalf("SplitDropped: %d usable, %d dropped, %v; want 4, 2, nil", len(usable), len(dropped), err)
	}
	seqs := batch.ExpandSegments(usable)
	if len(seqs) != 5 || seqs[4] != rewrote.LaterSegments[0] || seqs[4].Reward != rewrote.Reward {
		t.Fatalf("ExpandSegments: %d sequences; want the 4 trajectories and the later segment, with its trajectory's reward", len(seqs))
	}
	if _, err := c.advantages(seqs); err != nil {
		t.Fatal(err)
	}
	want, err := train.GRPO([]float64{1, 0, 0, 1}, []int{0, 0, 0, 1}, r.Algorithm.StdNormalize, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range append(usable, seqs[4]) {
		w := want[min(i, 3)]
		if i == 4 {
			w = want[0] // the later segment: its trajectory's
		}
		if got := float64(tr.Advantages[len(tr.Advantages)-1]); math.Abs(got-w) > 1e-5 {
			t.Errorf("sequence %d: advantage %g; want %g", i, got, w)
		}
	}
	if got := batch.CollapseSegments(seqs); len(got) != 4 {
		t.Errorf("CollapseSegments left %d sequences; want the 4 trajectories", len(got))
	}
}
