// Package patches is agentrl's patch series for gomlx/compute (compute/NNNN-*.patch on top of the
// release named in compute/UPSTREAM; third_party/patches.sh applies it and `make test` checks that
// third_party/compute is that release plus the series). The binary carries the series so that it
// can name the backend it was built with by the series itself: engine/device keys the CPU kernel
// choices it caches by Version, and a cached choice is measured again after any patch.
package patches

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync"
)

//go:embed compute/UPSTREAM compute/*.patch
var series embed.FS

// Version is "RELEASE+series.N.HASH": the upstream release, the number of patches and the first 12
// hex digits of the SHA-256 over the release's name and every patch, in order (hashed once per
// process).
var Version = sync.OnceValue(version)

func version() string {
	up, err := series.ReadFile("compute/UPSTREAM")
	if err != nil {
		return "unknown"
	}
	names, err := fs.Glob(series, "compute/*.patch")
	if err != nil {
		return "unknown"
	}
	sort.Strings(names)
	h := sha256.New()
	release := strings.TrimSpace(string(up))
	h.Write([]byte(release + "\n"))
	for _, n := range names {
		b, err := series.ReadFile(n)
		if err != nil {
			return "unknown"
		}
		h.Write([]byte(n + "\n"))
		h.Write(b)
	}
	return release + "+series." + strconv.Itoa(len(names)) + "." + hex.EncodeToString(h.Sum(nil))[:12]
}
