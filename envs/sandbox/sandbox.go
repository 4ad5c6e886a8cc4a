package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Isolation levels of the python executor (recipe env.sandbox.isolation).
const (
	// IsolationStrict runs each session in its own user, mount, PID, network, IPC and UTS
	// namespaces (see the file comment of sandbox_linux.go) and refuses to start without them.
	IsolationStrict = "strict"
	// IsolationNone runs the code with resource limits, a temporary folder and a minimal
	// environment only: it can read what the user can read and reach the network.
	IsolationNone = "none"
)

// DefaultModules are the third-party modules model-written code may import when the sandbox
// names none: the ones math code written by instruction-tuned models commonly starts with.
var DefaultModules = []string{"numpy", "sympy"}

// Config configures the python executor's isolation (the recipe's env.sandbox section).
type Config struct {
	// Isolation is IsolationStrict (the default when empty) or IsolationNone.
	Isolation string
	// Python is the interpreter; empty means the system python3 (/usr/bin/python3, else
	// /usr/local/bin/python3, else python3 on PATH).
	Python string
	// Modules are the third-party modules (besides the standard library) the code may import;
	// nil means DefaultModules. Under strict isolation only these packages (and what they import
	// themselves) are visible in the interpreter's site-packages folders; one the interpreter
	// lacks is listed as missing in Isolation, not an error.
	Modules []string
	// Workers is the number of executions at once; ≤ 0 means the machine's cores.
	Workers int

	// probe replaces the kernel check of strict isolation (tests simulate a machine without it).
	probe func() error
}

// WorkerCount is the number of executions that may run at once: Workers, or the machine's cores.
func (s Config) WorkerCount() int {
	if s.Workers > 0 {
		return s.Workers
	}
	return runtime.NumCPU()
}

func (s Config) withDefaults() Config {
	if s.Isolation == "" {
		s.Isolation = IsolationStrict
	}
	if s.Modules == nil {
		s.Modules = DefaultModules
	}
	return s
}

// interpreter finds the python the sandbox runs: the configured one, else the system python3.
func (s Config) interpreter() (string, error) {
	if s.Python != "" {
		path, err := exec.LookPath(s.Python)
		if err != nil {
			return "", fmt.Errorf("executor python: env.sandbox.python %q: %w", s.Python, err)
		}
		return filepath.Abs(path)
	}
	for _, c := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if st, err := os.Stat(c); err == nil && st.Mode()&0o001 != 0 {
			return c, nil
		}
	}
	path, err := exec.LookPath("python3")
	if err != nil {
		return "", errors.New("executor python: no python3 found (install it, e.g. apt-get install python3, or use executor: starlark)")
	}
	return path, nil
}

// pyInfo is what the interpreter says about itself and the allowed modules, asked on the host
// (the interpreter is the user's, not the model's).
type pyInfo struct {
	Version  string            `json:"version"`
	Prefixes []string          `json:"prefixes"` // sys.prefix, base_prefix, exec_prefix
	Path     []string          `json:"path"`     // sys.path without site
	Sites    []string          `json:"sites"`    // site-packages / dist-packages folders
	Allow    []string          `json:"allow"`    // files and folders of the allowed modules and their imports
	OK       []string          `json:"ok"`       // allowed modules that import
	Missing  map[string]string `json:"missing"`  // allowed modules that do not, with why
}

const infoScript = `
import sys, os, json, importlib
mods = json.loads(sys.argv[1])
sites = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
ok, missing = [], {}
for m in mods:
    try:
        importlib.import_module(m); ok.append(m)
    except BaseException as e:
        missing[m] = "%s: %s" % (type(e).__name__, e)
allow = set()
for mod in list(sys.modules.values()):
    files = [getattr(mod, "__file__", None) or ""] + list(getattr(mod, "__path__", None) or [])
    for f in files:
        for s in sites:
            if f.startswith(s + os.sep):
                top = f[len(s) + 1:].split(os.sep)[0]
                allow.add(os.path.join(s, top))
                name = top.split(".")[0]
                for extra in (name + ".libs", name + "_libs"):
                    if os.path.isdir(os.path.join(s, extra)):
                        allow.add(os.path.join(s, extra))
print(json.dumps({"version": sys.version.split()[0], "prefixes": [sys.prefix, sys.base_prefix, sys.exec_prefix],
    "path": [p for p in sys.path if p not in sites], "sites": sites, "allow": sorted(allow), "ok": ok, "missing": missing}))
`

func interpreterInfo(python string, modules []string) (pyInfo, error) {
	mods, _ := json.Marshal(modules)
	cmd := exec.Command(python, "-I", "-c", infoScript, string(mods))
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, lastLines(string(ee.Stderr), 3))
		}
		return pyInfo{}, fmt.Errorf("executor python: %s does not run: %w", python, err)
	}
	var info pyInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return pyInfo{}, fmt.Errorf("executor python: %s: %w", python, err)
	}
	return info, nil
}

// moduleNote says which allowed modules import and which are missing.
func (i pyInfo) moduleNote() string {
	var parts []string
	if len(i.OK) > 0 {
		parts = append(parts, "modules "+strings.Join(i.OK, ", "))
	}
	var missing []string
	for m := range i.Missing {
		missing = append(missing, m)
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		parts = append(parts, "missing modules "+strings.Join(missing, ", ")+" (install e.g. python3-"+missing[0]+")")
	}
	return strings.Join(parts, ", ")
}

// isolationRefused is the error of a machine that cannot give strict isolation: what failed,
// what is likely missing and how to enable it, and the way out.
func isolationRefused(cause error) error {
	return fmt.Errorf("executor python: env.sandbox.isolation strict needs Linux user, mount, PID and network namespaces, and this machine refused them: %w; %s; "+
		"or write env.sandbox.isolation: none in the recipe to run model-written code with resource limits only (it can then read every file you can and reach the network)", cause, isolationHint())
}

// CheckIsolation reports whether the python executor can run under sb on this machine: nil, or
// the error a run would refuse to start with (what is missing and how to enable it). Under
// isolation none it only checks that the interpreter runs.
func CheckIsolation(sb Config) error {
	_, err := NewPythonWith(Limits{}, false, sb)
	return err
}
