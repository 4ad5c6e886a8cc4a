package serve

import (
	"fmt"
	"slices"
	"strings"

	"agentrl/engine/tokenizer"
	"agentrl/envs"
)

// segState is the conversation of a trajectory's current segment as its last request left it:
// what the next request must repeat to continue the segment.
type segState struct {
	index int    // the segment's place in Trajectory.Segments
	kind  string // "chat", "text" (a completion's prompt text) or "ids" (a prompt of token ids)
	// chat: the last request's messages and tools, and the conversation the drift probe renders
	// (each earlier reply as the model wrote it)
	msgs     []envs.Message
	toolsKey string
	tools    []tokenizer.Tool
	chat     []envs.Message
	reply    reply
	// text: the last prompt and the completion returned for it
	text string
}

// plan is a request's prompt against its trajectory: whether it continues the current segment,
// the tokens it adds, and the segment's state once the reply is in.
type plan struct {
	extend bool
	kept   []int32 // the current segment's tokens, when extend
	add    []int32 // the tokens this request adds (its whole prompt for a new segment)
	next   segState
	added  []envs.Message // what the turn records as the request's new messages
	want   string         // what the context must decode to (the drift probe); "" = no probe
}

// planChat plans a chat request: when its messages are the previous request's, then that
// request's reply, then new messages (with the same tools), the prompt is the kept tokens, an
// <|im_end|> if the reply did not end with one, and the new messages' turns as the template
// renders them after an assistant turn; otherwise the whole conversation, rendered, starts a
// new segment. t.lock held.
func (s *Server) planChat(t *trajectory, msgs []envs.Message, ts tools) (*plan, error) {
	if cur := t.cur; cur != nil && cur.kind == "chat" && cur.toolsKey == ts.key && extendsChat(cur, msgs) {
		kept := t.rec.Segments[cur.index].Tokens
		tail := msgs[len(cur.msgs)+1:]
		text := "<|im_start|>assistant\n"
		if len(tail) > 0 {
			var err error
			if text, err = tokenizer.RenderChat(chatMessages(tail, s.o.CodeTool), nil, true); err != nil {
				return nil, badRequest("messages", "%v", err)
			}
		}
		var add []int32
		if n := len(kept); n == 0 || kept[n-1] != s.imEnd {
			add = append(add, s.imEnd)
		}
		add = append(add, s.tok.Encode("\n"+text)...)
		chat := append(slices.Clone(cur.chat), envs.Message{Role: "assistant", Content: cur.reply.text})
		chat = append(chat, chatMessages(tail, s.o.CodeTool)...)
		want, err := tokenizer.RenderChat(chat, ts.rendered, true)
		if err != nil {
			return nil, badRequest("messages", "%v", err)
		}
		return &plan{extend: true, kept: kept, add: add, added: tail, want: want,
			next: segState{index: cur.index, kind: "chat", msgs: msgs, toolsKey: ts.key, tools: ts.rendered, chat: chat}}, nil
	}
	chat := chatMessages(msgs, s.o.CodeTool)
	text, err := tokenizer.RenderChat(chat, ts.rendered, true)
	if err != nil {
		return nil, badRequest("messages", "%v", err)
	}
	return &plan{add: s.tok.Encode(text), added: msgs,
		next: segState{kind: "chat", msgs: msgs, toolsKey: ts.key, tools: ts.rendered, chat: chat}}, nil
}

// extendsChat says whether msgs are cur's messages, then cur's reply, then (maybe) more.
func extendsChat(cur *segState, msgs []envs.Message) bool {
	if len(msgs) <= len(cur.msgs) {
		return false
	}
	for i, m := range cur.msgs {
		if !sameMessage(m, msgs[i]) {
			return false
		}
	}
	return echoes(msgs[len(cur.msgs)], &cur.reply)
}

// textPrompt is a completion's prompt: text, or token ids.
type textPrompt struct {
	text  string
	ids   []int32
	isIDs bool
}

// planText plans a completion: a prompt that starts with the previous prompt and the completion
// returned for it (text), or with the segment's tokens (ids), continues the segment with the
// rest; anything else starts a new one. t.lock held.
func (s *Server) planText(t *trajectory, p textPrompt) (*plan, error) {
	cur := t.cur
	if p.isIDs {
		if cur != nil && cur.kind == "ids" {
			kept := t.rec.Segments[cur.index].Tokens
			if len(p.ids) >= len(kept) && slices.Equal(p.ids[:len(kept)], kept) {
				return &plan{extend: true, kept: kept, add: slices.Clone(p.ids[len(kept):]), next: segState{index: cur.index, kind: "ids"}}, nil
			}
		}
		return &plan{add: slices.Clone(p.ids), next: segState{kind: "ids"}}, nil
	}
	if cur != nil && cur.kind == "text" && strings.HasPrefix(p.text, cur.text) {
		kept := t.rec.Segments[cur.index].Tokens
		rest := p.text[len(cur.text):]
		return &plan{extend: true, kept: kept, add: s.tok.Encode(rest), want: p.text,
			added: []envs.Message{{Role: "user", Content: rest}}, next: segState{index: cur.index, kind: "text", text: p.text}}, nil
	}
	return &plan{add: s.tok.Encode(p.text), added: []envs.Message{{Role: "user", Content: p.text}}, next: segState{kind: "text", text: p.text}}, nil
}

// driftFinding compares the context a plan leaves with what it must read as: "" when equal,
// else where they part.
func (s *Server) driftFinding(p *plan) string {
	if p.want == "" {
		return ""
	}
	got := s.tok.Decode(append(slices.Clone(p.kept), p.add...), false)
	if got == p.want {
		return ""
	}
	i := 0
	for i < len(got) && i < len(p.want) && got[i] == p.want[i] {
		i++
	}
	from := max(0, i-24)
	return fmt.Sprintf("at character %d the kept tokens read %q where the chat template renders %q", i, excerpt(got, from), excerpt(p.want, from))
}

// excerpt is up to 48 bytes of s from byte from.
func excerpt(s string, from int) string {
	return strings.ToValidUTF8(s[from:min(len(s), from+48)], "")
}
