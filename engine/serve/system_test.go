package serve

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"agentrl/engine/rollout"
)

// TestDefaultSystem: with Options.DefaultSystem a plain chat (no system message) reaches the
// built-in model as the request with that system message does (the same prompt tokens, the same
// greedy reply: a <code> block returned as a python call that adds the numbers asked about),
// while a request's own system message is kept; without it the plain chat is rendered as sent.
func TestDefaultSystem(t *testing.T) {
	plain := []map[string]any{{"role": "user", "content": "What is 12 + 34?"}}
	explicit := []map[string]any{{"role": "system", "content": retoolSystem}, {"role": "user", "content": "What is 12 + 34?"}}
	own := []map[string]any{{"role": "developer", "content": "Answer in one word."}, {"role": "user", "content": "What is 12 + 34?"}}
	// reference is each request's reply from a server without a default system message.
	_, bare := newServer(t, rollout.Config{Slots: 1}, Options{Open: true, Preempt: true})
	_, withDefault := newServer(t, rollout.Config{Slots: 1}, Options{Open: true, Preempt: true, DefaultSystem: retoolSystem})
	ask := func(base, key string, msgs []map[string]any) chatReply {
		t.Helper()
		return chatOK(t, base, key, map[string]any{"model": "builtin", "max_tokens": 40, "messages": msgs, "tools": []json.RawMessage{json.RawMessage(pythonTool)}})
	}
	withSystem := ask(bare, "explicit", explicit)
	for _, tc := range []struct {
		name     string
		base     string
		msgs     []map[string]any
		want     chatReply // the reply it must equal
		wantCode bool      // the reply is one python call adding 12 and 34
	}{
		{name: "plain chat gets the default", base: withDefault, msgs: plain, want: withSystem, wantCode: true},
		{name: "own system message kept", base: withDefault, msgs: own, want: ask(bare, "own", own)},
		{name: "explicit system message unchanged", base: withDefault, msgs: explicit, want: withSystem, wantCode: true},
		{name: "no default: as sent", base: bare, msgs: plain, want: ask(bare, "plain", plain)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ask(tc.base, tc.name, tc.msgs)
			if got.Usage.PromptTokens != tc.want.Usage.PromptTokens || got.content() != tc.want.content() || !reflect.DeepEqual(got.functions(), tc.want.functions()) {
				t.Errorf("got %d prompt tokens, reply %q %+v; want %d, %q %+v", got.Usage.PromptTokens, got.content(), got.functions(),
					tc.want.Usage.PromptTokens, tc.want.content(), tc.want.functions())
			}
			if !tc.wantCode {
				return
			}
			calls := got.functions()
			var args struct{ Code string }
			if len(calls) != 1 || calls[0].Name != "python" || json.Unmarshal([]byte(calls[0].Arguments), &args) != nil || !strings.Contains(args.Code, "12 + 34") {
				t.Errorf("reply %q, calls %+v; want one python call whose code adds 12 + 34", got.content(), calls)
			}
		})
	}
	if p := ask(bare, "plain-bare", plain); p.Usage.PromptTokens >= withSystem.Usage.PromptTokens {
		t.Errorf("plain chat without a default: %d prompt tokens; want fewer than the %d with the system message (none was added)", p.Usage.PromptTokens, withSystem.Usage.PromptTokens)
	}
}

// functions are a reply's tool calls without their ids, which differ from reply to reply.
func (r chatReply) functions() []wireFunction {
	var fs []wireFunction
	for _, c := range r.Choices[0].Message.ToolCalls {
		fs = append(fs, c.Function)
	}
	return fs
}
