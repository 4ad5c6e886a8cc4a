package patches

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestVersionIsTheSeriesOnDisk: Version hashes every patch file of the folder (a file the embed
// pattern missed would change the series without changing the version), in name order.
func TestVersionIsTheSeriesOnDisk(t *testing.T) {
	up, err := os.ReadFile("compute/UPSTREAM")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("compute/[0-9][0-9][0-9][0-9]-*.patch")
	if err != nil || len(files) == 0 {
		t.Fatalf("no patches: %v", err)
	}
	all, _ := filepath.Glob("compute/*")
	if len(all) != len(files)+1 {
		t.Errorf("compute/ holds %d files, %d patches and UPSTREAM: %v", len(all), len(files), all)
	}
	h := sha256.New()
	release := strings.TrimSpace(string(up))
	h.Write([]byte(release + "\n"))
	for _, f := range files { // Glob returns names in order
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(f + "\n"))
		h.Write(b)
	}
	want := release + "+series." + strconv.Itoa(len(files)) + "." + hex.EncodeToString(h.Sum(nil))[:12]
	if got := Version(); got != want {
		t.Errorf("Version() = %q, the files on disk give %q", got, want)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+\+series\.\d+\.[0-9a-f]{12}$`).MatchString(want) {
		t.Errorf("version %q is not RELEASE+series.N.HASH", want)
	}
}
