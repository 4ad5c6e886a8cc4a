package serve

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"agentrl/engine/rollout"
)

// templateStart is Qwen3's rendering of a system and a user message with the generation prompt,
// written out by hand: the independent rendering the server's tokens are checked against.
func templateStart(system, user string) string {
	return "<|im_start|>system\n" + system + "<|im_end|>\n<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n"
}

// toolTurn is the template's tool turn after a finished assistant turn, by hand.
func toolTurn(output string) string {
	return "\n<|im_start|>user\n<tool_response>\n" + output + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
}

// replay samples greedily from prompt on a fresh one-slot generator: the sampled ids a server
// must have kept, found without it.
func replay(t *testing.T, prompt []int32, maxNew int) rollout.Result {
	t.Helper()
	_, tok := builtin(t)
	g := newGenerator(t, rollout.Config{Slots: 1})
	imEnd, _ := tok.TokenID("<|im_end|>")
	eot, _ := tok.TokenID("<|endoftext|>")
	res, err := g.Generate(context.Background(), rollout.Request{Append: prompt, MaxNew: maxNew, StopIDs: []int32{imEnd, eot}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestTokenExactConversation drives a two-turn conversation with a tool call through the HTTP
// endpoint (greedy, the python code tool) and checks the trajectory token for token: the
// hand-rendered prompt, the ids a separate generator samples from it, the hand-rendered tool
// turn, the second reply's ids; mask and log-probs on the sampled ids only; one segment, no
// drift, the KV cache reused; and the client's view (tool call, usage) agreeing with it.
func TestTokenExactConversation(t *testing.T) {
	_, tok := builtin(t)
	s, base := newServer(t, rollout.Config{Slots: 2}, Options{})
	key := s.Begin("conversation", TrajectoryOptions{Seed: 1})
	const question = "What is 14 + 75?"
	body := task(question, map[string]any{"tools": []json.RawMessage{json.RawMessage(pythonTool)}, "max_tokens": 60})
	r1 := chatOK(t, base, key, body)
	calls := r1.Choices[0].Message.ToolCalls
	if r1.Choices[0].FinishReason != "tool_calls" || len(calls) != 1 || calls[0].Function.Name != "python" || calls[0].ID == "" {
		t.Fatalf("first reply %+v (content %q); want one python tool call with finish_reason tool_calls", r1.Choices[0], r1.content())
	}
	var args struct{ Code string }
	if err := json.Unmarshal([]byte(calls[0].Function.Arguments), &args); err != nil || args.Code == "" {
		t.Fatalf("tool call arguments %q: %v; want {\"code\": …}", calls[0].Function.Arguments, err)
	}
	// The agent echoes the reply with its own spacing (the kept tokens win), and adds the tool's output.
	msgs := body["messages"].([]map[string]any)
	quoted, _ := json.Marshal(args.Code)
	echoArgs := "{ \"code\" : " + string(quoted) + " }"
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": calls[0].ID, "type": "function",
			"function": map[string]any{"name": "python", "arguments": echoArgs}}}},
		map[string]any{"role": "tool", "tool_call_id": calls[0].ID, "content": "89"})
	body["messages"] = msgs
	r2 := chatOK(t, base, key, body)

	traj, err := s.Finish(key)
	if err != nil {
		t.Fatal(err)
	}
	if len(traj.Segments) != 1 || len(traj.Turns) != 2 || traj.Drift != "" || traj.Requests != 2 {
		t.Fatalf("%d segments, %d turns, drift %q, %d requests; want 1, 2, none, 2", len(traj.Segments), len(traj.Turns), traj.Drift, traj.Requests)
	}
	seg := traj.Segments[0]
	runs, sampled := segmentRuns(seg)
	if !slices.Equal(sampled, []bool{false, true, false, true}) {
		t.Fatalf("segment runs sampled %v; want prompt, reply, tool turn, reply", sampled)
	}
	p1 := tok.Encode(templateStart(retoolSystem, question))
	if !slices.Equal(runs[0], p1) || seg.PromptLen != len(p1) {
		t.Errorf("prompt tokens %v (PromptLen %d); want the hand-rendered prompt %v", runs[0], seg.PromptLen, p1)
	}
	want1 := replay(t, p1, 60)
	if !slices.Equal(runs[1], want1.IDs) {
		t.Errorf("first reply ids %v; a separate generator samples %v", runs[1], want1.IDs)
	}
	if got := tok.Decode(runs[1], false); got != "<code>\n"+args.Code+"\n</code><|im_end|>" {
		t.Errorf("first reply reads %q; the client got code %q", got, args.Code)
	}
	a2 := tok.Encode(toolTurn("89"))
	if !slices.Equal(runs[2], a2) {
		t.Errorf("tool turn tokens %v; want the hand-rendered %v", runs[2], a2)
	}
	ctx2 := slices.Concat(p1, runs[1], a2)
	want2 := replay(t, ctx2, 0)
	if !slices.Equal(runs[3], want2.IDs) {
		t.Errorf("second reply ids %v; a separate generator samples %v", runs[3], want2.IDs)
	}
	if !slices.Equal(seg.Tokens, slices.Concat(ctx2, want2.IDs)) {
		t.Errorf("segment tokens are not prompt + sampled + tool turn + sampled")
	}
	for i, m := range seg.Mask {
		if lp := seg.LogProbs[i]; m && (lp > 0 || math.IsNaN(float64(lp))) || !m && lp != 0 {
			t.Errorf("token %d: mask %v, log-prob %v; want a log-prob ≤ 0 on sampled tokens, 0 elsewhere", i, m, lp)
		}
	}
	for i, lp := range want1.LogProbs {
		if d := math.Abs(float64(lp - seg.LogProbs[len(p1)+i])); d > 1e-4 {
			t.Errorf("first reply token %d: log-prob %v; the separate generator's %v", i, seg.LogProbs[len(p1)+i], lp)
		}
	}
	if u := r2.Usage; u.PromptTokens != len(ctx2) || u.PromptTokensDetails.CachedTokens != len(p1)+len(runs[1]) || u.CompletionTokens != len(runs[3]) {
		t.Errorf("second usage %+v; want prompt %d, cached %d, completion %d", u, len(ctx2), len(p1)+len(runs[1]), len(runs[3]))
	}
	if tr := traj.Turns[1]; len(tr.Messages) != 1 || tr.Messages[0].Role != "tool" || tr.Messages[0].Content != "89" || tr.Reused != len(p1)+len(runs[1]) {
		t.Errorf("second turn %+v; want the tool message as its one added message, the first context reused", tr)
	}
	if tr := traj.Turns[0]; len(tr.ToolCalls) != 1 || tr.ToolCalls[0].ID != calls[0].ID || tr.Finish != "tool_calls" {
		t.Errorf("first turn %+v; want the python call %s, finish tool_calls", tr, calls[0].ID)
	}
}

// TestRewrittenHistoryStartsSegment: a request whose history is not the previous conversation
// plus its reply (an edited message, a changed reply, other tools) starts a new segment whose
// prompt is the whole conversation rendered afresh (by hand here: the code tool's call as the
// <code> block the model writes); one that extends it continues the segment.
func TestRewrittenHistoryStartsSegment(t *testing.T) {
	_, tok := builtin(t)
	s, base := newServer(t, rollout.Config{Slots: 1}, Options{})
	const q = "What is 14 + 75?"
	for _, tc := range []struct {
		name     string
		edit     func(msgs []map[string]any, body map[string]any)
		segments int
		user     string // the first user message after the edit
		reply    string // the reply's content after the edit ("" = as sent)
	}{
		{name: "extends", segments: 1, edit: func([]map[string]any, map[string]any) {}},
		{name: "user message edited", segments: 2, user: "What is 15 + 75?", edit: func(msgs []map[string]any, _ map[string]any) { msgs[1]["content"] = "What is 15 + 75?" }},
		{name: "reply changed", segments: 2, reply: "I would rather not.", edit: func(msgs []map[string]any, _ map[string]any) { msgs[2]["content"] = "I would rather not." }},
		{name: "tools changed", segments: 2, edit: func(_ []map[string]any, body map[string]any) { delete(body, "tools") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := s.Begin(tc.name, TrajectoryOptions{})
			body := task(q, map[string]any{"tools": []json.RawMessage{json.RawMessage(pythonTool)}, "max_tokens": 40})
			r1 := chatOK(t, base, key, body)
			calls := r1.Choices[0].Message.ToolCalls
			if len(calls) != 1 {
				t.Fatalf("first reply %q with %d tool calls; want one python call (greedy)", r1.content(), len(calls))
			}
			msgs := append(body["messages"].([]map[string]any), map[string]any{"role": "assistant", "content": r1.content(), "tool_calls": calls},
				map[string]any{"role": "user", "content": "Go on."})
			body["messages"] = msgs
			tc.edit(msgs, body)
			chatOK(t, base, key, body)
			traj, err := s.Finish(key)
			if err != nil {
				t.Fatal(err)
			}
			if len(traj.Segments) != tc.segments {
				t.Fatalf("%d segments; want %d", len(traj.Segments), tc.segments)
			}
			if tc.segments == 1 {
				return
			}
			var code struct{ Code string }
			if err := json.Unmarshal([]byte(calls[0].Function.Arguments), &code); err != nil {
				t.Fatal(err)
			}
			user, assistant := q, "<code>\n"+code.Code+"\n</code>"
			if tc.user != "" {
				user = tc.user
			}
			if tc.reply != "" {
				assistant = tc.reply + "\n" + assistant
			}
			want := strings.TrimSuffix(templateStart(retoolSystem, user), "<|im_start|>assistant\n") +
				"<|im_start|>assistant\n" + assistant + "<|im_end|>\n<|im_start|>user\nGo on.<|im_end|>\n<|im_start|>assistant\n"
			g := traj.Segments[1]
			if got := tok.Decode(g.Tokens[:g.PromptLen], false); got != want || !slices.Equal(g.Tokens[:g.PromptLen], tok.Encode(want)) {
				t.Errorf("new segment's prompt reads %q; want the conversation rendered afresh %q", got, want)
			}
			if traj.Turns[1].Segment != 1 || len(traj.Turns[1].Messages) != len(msgs) || traj.Turns[1].Reused != 0 {
				t.Errorf("second turn %+v; want segment 1 with all %d messages and nothing reused", traj.Turns[1], len(msgs))
			}
		})
	}
}

// TestCompletionContinues: a completion whose prompt is the previous prompt, the completion
// returned for it and more text continues the segment with exactly the added text's tokens; a
// prompt of token ids that starts with the segment's tokens continues it with the rest.
func TestCompletionContinues(t *testing.T) {
	_, tok := builtin(t)
	s, base := newServer(t, rollout.Config{Slots: 1}, Options{})
	complete := func(key string, prompt any) string {
		status, data := call(t, http.MethodPost, base+"/completions", key, map[string]any{"model": "builtin", "prompt": prompt, "max_tokens": 8, "temperature": 1})
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, data)
		}
		var c struct {
			Choices []struct{ Text string } `json:"choices"`
		}
		if err := json.Unmarshal(data, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("%s: %v", data, err)
		}
		return c.Choices[0].Text
	}
	key := s.Begin("text", TrajectoryOptions{Seed: 3})
	first := complete(key, "What is 2 + 2?")
	complete(key, "What is 2 + 2?"+first+" And 3 + 3?")
	traj, err := s.Finish(key)
	if err != nil {
		t.Fatal(err)
	}
	runs, sampled := segmentRuns(traj.Segments[0])
	if len(traj.Segments) != 1 || len(runs) != 4 || !slices.Equal(sampled, []bool{false, true, false, true}) || !slices.Equal(runs[2], tok.Encode(" And 3 + 3?")) {
		t.Errorf("%d segments, runs %v (sampled %v); want one: prompt, sampled, exactly the added text's tokens, sampled", len(traj.Segments), runs, sampled)
	}

	key = s.Begin("ids", TrajectoryOptions{Seed: 4})
	complete(key, []int32{5, 6, 7})
	s.mu.Lock()
	tr := s.keys[key]
	s.mu.Unlock()
	tr.lock <- struct{}{}
	kept := slices.Clone(tr.rec.Segments[0].Tokens)
	tr.release()
	complete(key, append(slices.Clone(kept), 8, 9))
	complete(key, []int32{5, 6})
	traj, err = s.Finish(key)
	if err != nil {
		t.Fatal(err)
	}
	if len(traj.Segments) != 2 || !slices.Equal(traj.Segments[0].Tokens[:len(kept)+2], append(kept, 8, 9)) || !slices.Equal(traj.Segments[1].Tokens[:2], []int32{5, 6}) {
		t.Errorf("segments %+v; want the ids prompt continued by [8 9], then a new segment from [5 6]", traj.Segments)
	}
}
