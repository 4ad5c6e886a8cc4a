// Package devicetest holds an in-memory stand-in for the file probes of device.Env (Glob and
// Stat), shared by the tests of the device package and of doctor, which both describe a machine
// as the files it has.
package devicetest

import (
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Files is the set of paths a fake machine has: path → whether it is a folder.
type Files map[string]bool

// Glob is filepath.Glob over the set (its order is the map's: callers sort when it matters).
func (f Files) Glob(pattern string) ([]string, error) {
	var out []string
	for p := range f {
		if ok, _ := filepath.Match(pattern, p); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// Stat is os.Stat over the set: os.ErrNotExist for a path it lacks.
func (f Files) Stat(p string) (os.FileInfo, error) {
	if dir, ok := f[p]; ok {
		return info{filepath.Base(p), dir}, nil
	}
	return nil, os.ErrNotExist
}

type info struct {
	name string
	dir  bool
}

func (i info) Name() string       { return i.name }
func (i info) Size() int64        { return 0 }
func (i info) Mode() fs.FileMode  { return 0 }
func (i info) ModTime() time.Time { return time.Time{} }
func (i info) IsDir() bool        { return i.dir }
func (i info) Sys() any           { return nil }
