package doctor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/device"
	"agentrl/engine/model"
	"agentrl/engine/remote"
	"agentrl/engine/torchref"
	"agentrl/envs/sandbox"
)

// SystemEnv is the real machine. builtin returns the built-in model's folder; kernels, when not
// nil, the CPU kernel set a run would choose (the caller decides whether it may measure).
func SystemEnv(builtin func() (string, error), kernels func() device.KernelChoice) Env {
	return Env{
		Device: device.SystemEnv(),
		CPU: func() CPUInfo {
			return CPUInfo{Model: device.CPUModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
		},
		Kernels: kernels,
		Memory:  func() (MemInfo, error) { return readMemInfo("/proc/meminfo") },
		GPU:     device.ReadGPU,
		Backend: openBackend,
		Python:  torchref.Find,
		Torch:   importTorch,
		Sandbox: systemSandbox,
		Builtin: builtin,
		Disk:    diskFree,
		Engine: func(ctx context.Context, ep remote.Endpoint, ids []int32) remote.Diagnosis {
			return remote.Diagnose(ctx, ep, ids, nil)
		},
	}
}

// diskFree is the space an unprivileged process may use (statfs f_bavail) on the file system of
// dir, or of its nearest existing parent when dir does not exist yet (a run creates it).
func diskFree(dir string) (int64, string, error) {
	at, err := filepath.Abs(dir)
	if err != nil {
		return 0, dir, err
	}
	for {
		if _, err := os.Stat(at); err == nil {
			break
		}
		up := filepath.Dir(at)
		if up == at {
			break
		}
		at = up
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(at, &st); err != nil {
		return 0, at, fmt.Errorf("statfs %s: %w", at, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), at, nil
}

// readMemInfo reads MemTotal and MemAvailable from a /proc/meminfo file.
func readMemInfo(path string) (MemInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return MemInfo{}, err
	}
	defer f.Close()
	var m MemInfo
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "MemTotal:":
			m.TotalBytes = kb << 10
		case "MemAvailable:":
			m.AvailableBytes = kb << 10
		}
	}
	if m.TotalBytes == 0 {
		return m, fmt.Errorf("%s has no MemTotal", path)
	}
	return m, sc.Err()
}

// openBackend opens the backend req names, as a run would, and checks bf16 on it.
func openBackend(req device.Request) BackendProbe {
	c, err := device.Open(req)
	if err != nil {
		return BackendProbe{Err: err}
	}
	defer c.Backend.Finalize()
	return BackendProbe{Kind: c.Kind, Reason: c.Reason, BF16: model.CheckComputeDType(c.Backend, dtypes.BFloat16)}
}

// importTorch imports torch with python: its version and whether it sees a CUDA device.
func importTorch(ctx context.Context, python string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-c", "import json, torch; print(json.dumps([torch.__version__, torch.cuda.is_available()]))").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			lines := strings.Split(strings.TrimSpace(string(ee.Stderr)), "\n")
			return "", false, fmt.Errorf("%s", lines[len(lines)-1])
		}
		return "", false, err
	}
	var v []any
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &v); err != nil || len(v) != 2 {
		return "", false, fmt.Errorf("torch printed %q", out)
	}
	ver, _ := v[0].(string)
	cuda, _ := v[1].(bool)
	return ver, cuda, nil
}

// systemSandbox probes the python executor as a run would create it (envs/sandbox).
func systemSandbox() SandboxInfo {
	s := SandboxInfo{Root: os.Geteuid() == 0}
	if data, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		if n, _ := strconv.Atoi(strings.TrimSpace(string(data))); n > 0 {
			s.UserNS = "max_user_namespaces " + strconv.Itoa(n)
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(data)) == "0" && !s.Root {
		s.UserNS = ""
	}
	// The strict sandbox is what a run gets; when the machine refuses it (the error says what is
	// missing and how to enable it), the interpreter and its modules are still worth reporting,
	// so they are looked up without isolation.
	p, err := sandbox.NewPythonWith(sandbox.Limits{}, false, sandbox.Config{})
	if err != nil {
		s.PythonErr = err
		if open, oerr := sandbox.NewPythonWith(sandbox.Limits{}, false, sandbox.Config{Isolation: sandbox.IsolationNone}); oerr == nil {
			s.Python = open.Interpreter
			s.Modules, s.Missing = open.Modules()
		}
		return s
	}
	s.Modules, s.Missing = p.Modules()
	s.Python, s.Isolation = p.Interpreter, p.Isolation()
	return s
}
