// Package gobackend implements a native Go [compute.Backend]: very portable (including WASM) but not very fast.
//
// It only implements the most popular dtypes and operations.
// But generally, it's easy to add new ops: just open an issue in GoMLX.
//
// This package is simply a thin wrapper around internal/gobackend.
package gobackend

import (
	"sync"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/internal/gobackend"

	// Registers all the ops.
	_ "github.com/gomlx/compute/internal/gobackend/defaultpkgs"
)

// BackendName to be used in GOMLX_BACKEND to specify this backend.
const BackendName = "go"

// GetBackend returns a singleton Go backend, created with the default configuration.
// The backend is only created at the first call of the function.
//
// The singleton is never destroyed.
var GetBackend = sync.OnceValue(func() compute.Backend {
	backend, err := New("")
	if err != nil {
		panic(err)
	}
	return backend
})

// New constructs a new Go Backend.
// There are no configurations, the string is simply ignored.
func New(config string) (compute.Backend, error) {
	return gobackend.New(config)
}

// Held returns the bytes held by the buffers of a Go backend now and the most held at once since
// the last ResetHeldPeak (agentrl patch 20); ok is false for another backend.
func Held(b compute.Backend) (now, peak int64, ok bool) {
	g, ok := b.(*gobackend.Backend)
	if !ok {
		return 0, 0, false
	}
	return g.Held.Now(), g.Held.Peak(), true
}

// ResetHeldPeak starts a new peak of a Go backend's held bytes from what it holds now; it does
// nothing on another backend.
func ResetHeldPeak(b compute.Backend) {
	if g, ok := b.(*gobackend.Backend); ok {
		g.Held.ResetPeak()
	}
}

// DefaultLargePoolBytes is the most bytes of freed large buffers (16 MiB and up) a Go backend
// keeps for reuse unless SetLargePoolLimit changes it (agentrl patch 25).
const DefaultLargePoolBytes = gobackend.DefaultLargePoolBytes

// TrimPools drops the freed buffers a Go backend keeps for reuse, so that the garbage collector
// can free them (between phases whose buffers differ); it does nothing on another backend
// (agentrl patch 25).
func TrimPools(b compute.Backend) {
	if g, ok := b.(*gobackend.Backend); ok {
		g.TrimPools()
	}
}

// LargePoolFree is the bytes of freed large buffers (16 MiB and up) a Go backend keeps for
// reuse now, at most its bound (1 GiB unless SetLargePoolLimit changed it); ok is false for
// another backend (agentrl patch 25).
func LargePoolFree(b compute.Backend) (n int64, ok bool) {
	g, ok := b.(*gobackend.Backend)
	if !ok {
		return 0, false
	}
	return g.LargePoolFree(), true
}

// SetLargePoolLimit bounds the bytes of freed large buffers a Go backend keeps for reuse and
// returns the previous bound (0, false for another backend) (agentrl patch 25).
func SetLargePoolLimit(b compute.Backend, n int64) (int64, bool) {
	g, ok := b.(*gobackend.Backend)
	if !ok {
		return 0, false
	}
	return g.SetLargePoolLimit(n), true
}
