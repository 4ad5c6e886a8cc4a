package device

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gomlx/compute"
)

// GoBackend reports whether Open(req) would create the Go (CPU) backend, deciding as Open does
// but creating nothing: GOMLX_BACKEND first, then the kind asked for, where auto is the Go backend
// unless both a GPU and the PJRT CUDA plugin are found. An unknown kind is false (Open refuses it).
func GoBackend(req Request) bool { return goBackend(req, SystemEnv()) }

func goBackend(req Request, env Env) bool {
	if cfg := env.Getenv(compute.ConfigEnvVar); cfg != "" {
		return strings.HasPrefix(cfg, "go")
	}
	switch req.Kind {
	case Go:
		return true
	case "", Auto:
		if ok, _ := env.HasGPU(); !ok {
			return true
		}
		_, _, err := FindPlugin(req.PluginPath, env)
		return err != nil
	}
	return false
}

// KernelEnv is environ (KEY=VALUE pairs) for a process of this binary that runs set: set's
// GOMLX_SIMD_* variables in place of any there were, and carried (a KernelChoice as JSON) in
// AGENTRL_KERNELS when it is not empty, else no AGENTRL_KERNELS at all.
func KernelEnv(environ []string, set KernelSet, carried string) []string {
	out := make([]string, 0, len(environ)+len(kernelEnvs)+1)
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); k != EnvKernels && !slices.Contains(kernelEnvs, k) {
			out = append(out, kv)
		}
	}
	out = append(out, set.Env()...)
	if carried != "" {
		out = append(out, EnvKernels+"="+carried)
	}
	return out
}

// restartable is set by AllowRestart.
var restartable atomic.Bool

// AllowRestart lets this process start itself again with other kernels (Restart). The program's
// main calls it; a test binary does not, since its executable runs tests, not the program's
// commands.
func AllowRestart() { restartable.Store(true) }

// CanRestart reports whether this process can start itself again with other kernels: only after
// AllowRestart.
func CanRestart() bool { return restartable.Load() }

// Restart replaces this process with a new one of the same executable, arguments and
// environment, but for c's kernel set, with c carried in AGENTRL_KERNELS so that the new process
// takes it as it is (see ChooseKernels). It returns only when it cannot: ErrNoReexec in a test
// binary, else why the executable could not be started.
func Restart(c KernelChoice) error {
	if !CanRestart() {
		return ErrNoReexec
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("restarting with the %s kernels: %w", c.Set, err)
	}
	c.Reason += " (the process restarted itself with them)"
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := syscall.Exec(exe, os.Args, KernelEnv(os.Environ(), c.Set, string(data))); err != nil {
		return fmt.Errorf("restarting %s with the %s kernels: %w", exe, c.Set, err)
	}
	return nil // not reached: Exec returns only on failure
}

// ApplyKernels makes this process run c: when c's set is not the one it runs, it restarts the
// process with it (see Restart) and does not return; when it cannot, it returns the set this
// process runs, with a reason that names the choice and why it could not be applied.
func ApplyKernels(c KernelChoice) KernelChoice {
	active := ActiveKernels(os.Getenv)
	if c.Set == active {
		return c
	}
	err := Restart(c)
	return KernelChoice{Set: active, Reason: fmt.Sprintf("%s kernels, this process's own, not the chosen ones: %v; chosen: %s", active, err, c.Reason)}
}

// ProcessProbe is a KernelOptions.Probe that runs this process's executable with args (a probe
// command that prints one KernelTiming as JSON) in a process of its own, started with the set's
// environment and stopped after timeout. The probe runs the Go backend: a GOMLX_BACKEND that names
// another is left out of its environment. A process that cannot start itself again (a test
// binary) measures its own set in place with here, and no other (ErrNoReexec).
func ProcessProbe(args []string, timeout time.Duration, here func() (KernelTiming, error)) func(KernelSet) (KernelTiming, error) {
	return func(set KernelSet) (KernelTiming, error) {
		if !CanRestart() {
			if set == ActiveKernels(os.Getenv) && here != nil {
				return here()
			}
			return KernelTiming{}, ErrNoReexec
		}
		exe, err := os.Executable()
		if err != nil {
			return KernelTiming{}, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, exe, args...)
		environ := os.Environ()
		if b := os.Getenv(compute.ConfigEnvVar); b != "" && !strings.HasPrefix(b, "go") {
			environ = removeEnv(environ, compute.ConfigEnvVar)
		}
		cmd.Env = KernelEnv(environ, set, "")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("no answer within %s", timeout)
			}
			return KernelTiming{}, fmt.Errorf("%w: %s", err, lastLine(errb.String()))
		}
		var t KernelTiming
		if err := json.Unmarshal([]byte(lastLine(out.String())), &t); err != nil {
			return KernelTiming{}, fmt.Errorf("the probe printed %q: %w", lastLine(out.String()), err)
		}
		if t.Set != set {
			return KernelTiming{}, fmt.Errorf("the probe ran the %s kernels, not %s", t.Set, set)
		}
		return t, nil
	}
}

func removeEnv(environ []string, name string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return out
}

// lastLine is the last non-empty line of s, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
