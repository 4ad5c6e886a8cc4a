//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os/exec"
)

// Strict isolation needs Linux namespaces; elsewhere only isolation: none runs.

type nsSpec struct {
	Base, Links, Hide, Allow []string
	SizeMB                   int
	Argv, Env                []string
}

type nsCommand struct {
	cmd *exec.Cmd
	exe interface{ Close() error }
}

var errNotLinux = errors.New("strict isolation is built on Linux namespaces, and this is not Linux")

func newNSCommand(context.Context, nsSpec, int) (*nsCommand, error) { return nil, errNotLinux }

func nsOf(int) string { return "" }

func nsProcs(string) map[int]int { return nil }

func probeNamespaces(nsSpec, int) error { return errNotLinux }

func isolationHint() string { return "run on Linux" }

const (
	exitSetup   = 125
	exitSignal  = 128
	sandboxWork = "/work"
	sandboxTmp  = "/tmp"
)
