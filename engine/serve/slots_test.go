package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"agentrl/engine/rollout"
	"agentrl/envs"
)

// TestConcurrentTrajectories runs 20 agents at once on 4 slots (later ones wait for a slot that
// a finished one gives back), each a two-request conversation with its own question and tool
// output, and checks every trajectory against its own transcript: its prompt is its own
// question, its added turn its own tool output, each sampled run reads as the reply its client
// got, and nothing of another agent is in it.
func TestConcurrentTrajectories(t *testing.T) {
	_, tok := builtin(t)
	s, base := newServer(t, rollout.Config{Slots: 4}, Options{Sampling: Sampling{Temperature: 1}})
	const agents = 20
	type seen struct {
		question, added string
		replies         [2]chatReply
		traj            *Trajectory
	}
	got := make([]seen, agents)
	var wg sync.WaitGroup
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := s.Begin(fmt.Sprintf("agent-%d", i), TrajectoryOptions{Seed: uint64(i)})
			g := &got[i]
			g.question = fmt.Sprintf("What is %d + %d?", 10+i, 30+2*i)
			body := task(g.question, map[string]any{"tools": []json.RawMessage{json.RawMessage(pythonTool)}, "max_tokens": 40})
			g.replies[0] = chatOK(t, base, key, body)
			m := g.replies[0].Choices[0].Message
			reply := map[string]any{"role": "assistant", "content": g.replies[0].content(), "tool_calls": m.ToolCalls}
			next := map[string]any{"role": "user", "content": fmt.Sprintf("Agent %d says: try again.", i)}
			g.added = "\n<|im_start|>user\n" + next["content"].(string) + "<|im_end|>\n<|im_start|>assistant\n"
			if len(m.ToolCalls) > 0 {
				next = map[string]any{"role": "tool", "tool_call_id": m.ToolCalls[0].ID, "content": fmt.Sprintf("OUT-%d", i)}
				g.added = toolTurn(fmt.Sprintf("OUT-%d", i))
			}
			body["messages"] = append(body["messages"].([]map[string]any), reply, next)
			body["max_tokens"] = 30
			g.replies[1] = chatOK(t, base, key, body)
			var err error
			if g.traj, err = s.Finish(key); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, g := range got {
		tr := g.traj
		if tr.ID != fmt.Sprintf("agent-%d", i) || len(tr.Segments) != 1 || len(tr.Turns) != 2 || tr.Drift != "" {
			t.Errorf("agent %d: trajectory %q with %d segments, %d turns, drift %q; want its own, 1, 2, none", i, tr.ID, len(tr.Segments), len(tr.Turns), tr.Drift)
			continue
		}
		runs, sampled := segmentRuns(tr.Segments[0])
		if !slices.Equal(sampled, []bool{false, true, false, true}) {
			t.Errorf("agent %d: runs sampled %v; want prompt, reply, added turn, reply", i, sampled)
			continue
		}
		if p := tok.Decode(runs[0], false); p != templateStart(retoolSystem, g.question) {
			t.Errorf("agent %d: prompt %q; want its own question %q", i, p, g.question)
		}
		added := tok.Decode(runs[2], false)
		if !strings.HasSuffix(added, g.added) || added != g.added && added != "<|im_end|>"+g.added {
			t.Errorf("agent %d: added turn %q; want its own %q", i, added, g.added)
		}
		for k, run := range [][]int32{runs[1], runs[3]} {
			p := replyParse{stopIDs: s.o.StopIDs, tools: true, codeTool: "python"}
			calls, content := parseCalls(s.body(run, p), "python")
			m := g.replies[k].Choices[0].Message
			var wantCalls []envs.ToolCall
			for _, c := range m.ToolCalls {
				wantCalls = append(wantCalls, envs.ToolCall{Name: c.Function.Name, Arguments: envs.TextArguments(c.Function.Arguments)})
			}
			for j := range calls {
				calls[j].ID = ""
			}
			if content != g.replies[k].content() || !reflect.DeepEqual(calls, wantCalls) || len(run) != g.replies[k].Usage.CompletionTokens {
				t.Errorf("agent %d reply %d: the kept tokens read %q with calls %+v (%d tokens); its client got %q, %+v (%d tokens)",
					i, k, content, calls, len(run), g.replies[k].content(), wantCalls, g.replies[k].Usage.CompletionTokens)
			}
		}
	}
}

// TestQueueWhenSlotsFull: with every slot held by a live trajectory, a new trajectory's request
// waits for a slot (no preemption), and gets the one Finish gives back.
func TestQueueWhenSlotsFull(t *testing.T) {
	s, base := newServer(t, rollout.Config{Slots: 1}, Options{})
	holder := s.Begin("holder", TrajectoryOptions{})
	chatOK(t, base, holder, task("What is 1 + 2?", map[string]any{"max_tokens": 4}))
	waiter := s.Begin("waiter", TrajectoryOptions{})
	done := make(chan chatReply, 1)
	go func() { done <- chatOK(t, base, waiter, task("What is 3 + 4?", map[string]any{"max_tokens": 4})) }()
	waitFor(t, "the second trajectory to queue for the slot", func() bool { return s.gen.Stats().Queued == 1 })
	select {
	case r := <-done:
		t.Fatalf("the waiting trajectory was answered (%q) while the slot was held", r.content())
	default:
	}
	if _, err := s.Finish(holder); err != nil {
		t.Fatal(err)
	}
	<-done
	if st := s.gen.Stats(); st.Busy != 1 || st.Queued != 0 {
		t.Errorf("generator %+v; want the waiter holding the one slot", st)
	}
}

// TestFinishCancelsWaitingRequest: Finish on a trajectory whose request waits for a slot ends
// that request (401 to its client), records nothing of it and leaves no waiter behind.
func TestFinishCancelsWaitingRequest(t *testing.T) {
	s, base := newServer(t, rollout.Config{Slots: 1}, Options{})
	holder := s.Begin("holder", TrajectoryOptions{})
	chatOK(t, base, holder, task("What is 1 + 2?", map[string]any{"max_tokens": 4}))
	victim := s.Begin("victim", TrajectoryOptions{})
	type answer struct {
		status int
		body   []byte
	}
	done := make(chan answer, 1)
	go func() {
		st, b := call(t, http.MethodPost, base+"/chat/completions", victim, task("What is 3 + 4?", nil))
		done <- answer{st, b}
	}()
	waitFor(t, "the request to queue for the slot", func() bool { return s.gen.Stats().Queued == 1 })
	traj, err := s.Finish(victim)
	if err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.status != http.StatusUnauthorized || !strings.Contains(string(a.body), "revoked") || !strings.Contains(string(a.body), "invalid_api_key") {
		t.Errorf("the cancelled request got %d %s; want 401 invalid_api_key saying the key was revoked", a.status, a.body)
	}
	if len(traj.Turns) != 0 || len(traj.Segments) != 0 || traj.Requests != 1 {
		t.Errorf("trajectory %+v; want one request and nothing recorded", traj)
	}
	if st := s.gen.Stats(); st.Queued != 0 || st.Busy != 1 {
		t.Errorf("generator %+v; want no waiter and only the holder's slot", st)
	}
	if _, err := s.Finish(victim); err == nil || !strings.Contains(err.Error(), "already finished") {
		t.Errorf("second Finish: %v; want an error saying it already finished", err)
	}
	if status, body := call(t, http.MethodPost, base+"/chat/completions", victim, task("Hi", nil)); status != http.StatusUnauthorized || !strings.Contains(string(body), "revoked") {
		t.Errorf("request with the finished key: %d %s; want 401 revoked", status, body)
	}
}

// TestFinishDuringGeneration: Finish while a streamed reply is being sampled either cancels it
// (the stream ends with an invalid_api_key error event, nothing recorded) or, had the reply
// already ended, records it whole; the trajectory's record agrees with what the client saw, and
// the slot is free afterwards.
func TestFinishDuringGeneration(t *testing.T) {
	s, base := newServer(t, rollout.Config{Slots: 1}, Options{Sampling: Sampling{Temperature: 1}})
	key := s.Begin("long", TrajectoryOptions{})
	type result struct{ events []map[string]any }
	done := make(chan result, 1)
	go func() {
		done <- result{sseEvents(t, base+"/chat/completions", key, task("What is 3 + 4?", map[string]any{"ignore_eos": true}))}
	}()
	waitFor(t, "generation to start", func() bool { return s.gen.Stats().Busy == 1 })
	traj, err := s.Finish(key)
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	last := r.events[len(r.events)-1]
	e, cancelled := last["error"].(map[string]any)
	switch {
	case cancelled && (e["code"] != "invalid_api_key" || len(traj.Turns) != 0):
		t.Errorf("cancelled stream ended with %v and %d turns recorded; want invalid_api_key and none", e, len(traj.Turns))
	case !cancelled && len(traj.Turns) != 1:
		t.Errorf("the stream finished but %d turns were recorded", len(traj.Turns))
	}
	t.Logf("cancelled mid-reply: %v (%d events)", cancelled, len(r.events))
	if st := s.gen.Stats(); st.Busy != 0 {
		t.Errorf("generator %+v; want the slot free after Finish", st)
	}
}

// TestPreemptIdleTrajectory: an open server with one slot answers a second key by taking the
// idle first key's slot; the first key's next request continues its segment on a fresh slot,
// prefilling its kept tokens again (nothing cached), with its tokens unchanged.
func TestPreemptIdleTrajectory(t *testing.T) {
	s, base := newServer(t, rollout.Config{Slots: 1}, Options{Open: true, Preempt: true})
	body := task("What is 14 + 75?", map[string]any{"max_tokens": 30})
	r1 := chatOK(t, base, "key-a", body)
	chatOK(t, base, "key-b", task("What is 2 + 2?", map[string]any{"max_tokens": 4}))
	chatOK(t, base, "", task("What is 5 + 5?", map[string]any{"max_tokens": 4})) // no key: a trajectory too
	s.mu.Lock()
	a := s.keys["key-a"]
	n := len(s.keys)
	s.mu.Unlock()
	a.lock <- struct{}{}
	kept := slices.Clone(a.rec.Segments[0].Tokens)
	a.release()
	body["messages"] = append(body["messages"].([]map[string]any), map[string]any{"role": "assistant", "content": r1.content()},
		map[string]any{"role": "user", "content": "Again."})
	r2 := chatOK(t, base, "key-a", body)
	if u := r2.Usage; u.PromptTokensDetails.CachedTokens != 0 || u.PromptTokens <= len(kept) {
		t.Errorf("usage %+v; want nothing cached (the slot was taken) and a prompt longer than the %d kept tokens", u, len(kept))
	}
	a.lock <- struct{}{}
	defer a.release()
	g := a.rec.Segments
	if n != 3 || len(g) != 1 || !slices.Equal(g[0].Tokens[:len(kept)], kept) {
		t.Errorf("%d trajectories, key-a's segments %d; want 3 and one segment that starts with its kept tokens", n, len(g))
	}
}

// TestLockstepRefused: a lockstep generator cannot serve agents that hold slots while they
// think; New says so.
func TestLockstepRefused(t *testing.T) {
	_, tok := builtin(t)
	g := newGenerator(t, rollout.Config{Slots: 1, Lockstep: true})
	if _, err := New(g, tok, Options{ModelName: "x"}); err == nil || !strings.Contains(err.Error(), "lockstep") {
		t.Errorf("New on a lockstep generator: %v; want an error about lockstep", err)
	}
}

// TestCloseThenFinish: Close ends serving and gives every slot back; Finish still returns what a
// trajectory recorded before.
func TestCloseThenFinish(t *testing.T) {
	s, base := newServer(t, rollout.Config{Slots: 1}, Options{})
	key := s.Begin("closing", TrajectoryOptions{})
	chatOK(t, base, key, task("What is 1 + 2?", map[string]any{"max_tokens": 4}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s.gen.Stats(); st.Busy != 0 {
		t.Errorf("generator %+v after Close; want every slot free", st)
	}
	traj, err := s.Finish(key)
	if err != nil || len(traj.Turns) != 1 || len(traj.Segments) != 1 {
		t.Errorf("Finish after Close: %+v, %v; want the one answered request", traj, err)
	}
	if _, err := http.Get(base + "/models"); err == nil {
		t.Error("the server answers after Close")
	}
}
