package external

import (
	"fmt"
	"regexp"
	"strings"
)

// errorLineRE finds a line that says what failed: "Error [ERR_MODULE_NOT_FOUND]: Cannot find
// package …", "TypeError: …", "ModuleNotFoundError: …", "panic: …", "error: …". A stack frame
// (indented) is not one.
var errorLineRE = regexp.MustCompile(`^(?:[\w$]+\.)*[\w$]*(?:Error|Exception)\b[^:]*:|^(?i:error|fatal|panic)\b[^:]*:`)

// missingPackageRE finds Node's word for a package that is not installed: ESM's "Cannot find
// package 'openai'" or CommonJS's "Cannot find module 'openai'" (a bare name: a missing file of
// the agent's own, './x.mjs', is not a package).
var missingPackageRE = regexp.MustCompile(`Cannot find (?:package|module) '([^'./][^']*)'`)

// StderrCause returns the line of an agent's stderr that says what failed: the first line that
// names an error, else the last line with text on it. The end of a crash's stderr is often not
// the cause: Node ends with its version ("Node.js v20.20.2") after the stack, Python's chained
// tracebacks end with the last exception.
func StderrCause(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		if line = strings.TrimRight(line, " \t\r"); errorLineRE.MatchString(line) {
			return strings.TrimSpace(line)
		}
	}
	return lastLine(stderr)
}

// StderrHint returns the fix for a failure that an agent's stderr names, "" when it names none
// this knows: a Node package that cannot be found (ERR_MODULE_NOT_FOUND) is not installed in the
// agent's folder dir ("" when the agent runs in the caller's).
func StderrHint(stderr, dir string) string {
	m := missingPackageRE.FindStringSubmatch(stderr)
	if m == nil {
		return ""
	}
	where := "the agent's folder (env.external.dir)"
	if dir != "" {
		where = fmt.Sprintf("the agent's folder (env.external.dir: %s)", dir)
	}
	return fmt.Sprintf("the package '%s' is not installed: run `npm ci` (or npm install) in %s", m[1], where)
}

// crashDetail is what a crash's Dropped adds after "crashed: exit status N": the stderr's line
// that says what failed and, when known, the fix.
func crashDetail(stderr, dir string) string {
	cause := StderrCause(stderr)
	if cause == "" {
		return ""
	}
	s := "; stderr ends " + quote(cause)
	if cause != lastLine(stderr) {
		s = "; stderr says " + quote(cause)
	}
	if hint := StderrHint(stderr, dir); hint != "" {
		s += "; " + hint
	}
	return s
}
