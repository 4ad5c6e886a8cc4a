package external

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// resultExample is what the messages show a result line should look like.
const resultExample = `{"answer": "42"} or {"reward": 1}`

// nonFiniteRE finds the NaN and Infinity that Python's json.dumps writes for non-finite floats
// (not JSON, so the line does not parse).
var nonFiniteRE = regexp.MustCompile(`"reward"\s*:\s*[-+]?(NaN|Infinity|inf|nan)\b`)

// parseResult fills res from the agent's last non-empty stdout line, or says why it is dropped.
func parseResult(res *Result, line string) {
	bad := func(format string, args ...any) {
		res.Drop, res.Dropped = DropBadResult, fmt.Sprintf(format, args...)
	}
	if line == "" {
		res.Drop, res.Dropped = DropNoResult, "printed no result: its last non-empty stdout line must be a JSON object such as "+resultExample
		return
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &fields); err != nil || fields == nil {
		if m := nonFiniteRE.FindStringSubmatch(line); m != nil {
			bad("non-finite reward %s in result line %s; want a finite number", m[1], quote(line))
			return
		}
		bad("unparsable result line %s: want one JSON object such as %s", quote(line), resultExample)
		return
	}
	reward, hasReward := fields["reward"]
	answer, hasAnswer := fields["answer"]
	switch {
	case hasReward && hasAnswer:
		bad(`result line %s has both "reward" and "answer"; give one: a reward the agent computed, or an answer for the verifier`, quote(line))
		return
	case !hasReward && !hasAnswer:
		bad(`result line %s has neither "reward" nor "answer"; want one JSON object such as %s`, quote(line), resultExample)
		return
	}
	if info, ok := fields["info"]; ok {
		if info = bytes.TrimSpace(info); len(info) == 0 || info[0] != '{' {
			bad(`"info" in result line %s is not a JSON object; want e.g. "info": {"turns": 3}`, quote(line))
			return
		}
		res.Info = info
	}
	if hasReward {
		r, err := number(reward)
		switch {
		case errors.Is(err, strconv.ErrRange) || err == nil && (math.IsInf(r, 0) || math.IsNaN(r)):
			bad("non-finite reward %s in result line %s; want a finite number", reward, quote(line))
		case err != nil:
			bad(`"reward" in result line %s is not a number`, quote(line))
		default:
			res.Reward = &r
		}
		return
	}
	var s string
	if err := json.Unmarshal(answer, &s); err == nil {
		res.Answer = &s
		return
	}
	if _, err := number(answer); err == nil || errors.Is(err, strconv.ErrRange) {
		s = string(answer) // a number answer is kept as written
		res.Answer = &s
		return
	}
	bad(`"answer" in result line %s is not a string`, quote(line))
}

// number parses a JSON number literal (not a string holding one).
func number(raw json.RawMessage) (float64, error) {
	var n json.Number
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		return 0, errors.New("not a number")
	}
	return strconv.ParseFloat(n.String(), 64)
}

// lastLine returns the last line of s with text on it, trimmed.
func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// quote quotes s for a message, clipped to 200 bytes.
func quote(s string) string {
	const most = 200
	if len(s) <= most {
		return strconv.Quote(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// tail keeps the last max bytes written to it.
type tail struct {
	buf []byte
	max int
}

func newTail(max int) *tail { return &tail{max: max} }

// Write keeps the end of what it is given; it never fails.
func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > t.max {
		p = p[len(p)-t.max:]
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max { // move only now and then, so writing stays linear
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return n, nil
}

// String returns the kept bytes, from the first whole UTF-8 character.
func (t *tail) String() string {
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	for k := 0; k < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); k++ {
		b = b[1:]
	}
	return string(b)
}
