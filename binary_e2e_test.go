package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The agentrl-tui binary of this checkout, linked once per test process and shared by the
// end-to-end tests: each used to link its own, about twenty links of a 50 MB cgo binary per
// `make test`.
var e2eBinary struct {
	once      sync.Once
	dir, path string
	err       error
	out       []byte
}

// testBinary builds the binary on its first call and returns its path; the tests run it, never
// change it.
func testBinary(t *testing.T) string {
	t.Helper()
	e2eBinary.once.Do(func() {
		e2eBinary.dir, e2eBinary.err = os.MkdirTemp("", "agentrl-e2e-")
		if e2eBinary.err != nil {
			return
		}
		e2eBinary.path = filepath.Join(e2eBinary.dir, "agentrl-tui")
		e2eBinary.out, e2eBinary.err = exec.Command("go", "build", "-o", e2eBinary.path, ".").CombinedOutput()
	})
	if e2eBinary.err != nil {
		t.Fatalf("go build: %v\n%s", e2eBinary.err, e2eBinary.out)
	}
	return e2eBinary.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if e2eBinary.dir != "" {
		os.RemoveAll(e2eBinary.dir)
	}
	os.Exit(code)
}
