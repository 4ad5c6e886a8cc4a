package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"

	"agentrl/engine/device"
)

func TestParity(t *testing.T) {
	b, err := device.NewGo(device.GoConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	fixtures := filepath.Join("..", "..", "testdata", "fixtures")
	broken := t.TempDir()
	for _, f := range []string{"config.json", "golden.json"} {
		data, err := os.ReadFile(filepath.Join(fixtures, "qwen3-tiny", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(broken, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		dir     string
		dt      dtypes.DType
		wantOK  bool
		wantErr string
	}{
		{name: "qwen3 float32", dir: filepath.Join(fixtures, "qwen3-tiny"), dt: dtypes.Float32, wantOK: true},
		{name: "qwen2 float32", dir: filepath.Join(fixtures, "qwen2-tiny"), dt: dtypes.Float32, wantOK: true},
		{name: "no weights", dir: broken, dt: dtypes.Float32, wantErr: "safetensors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := Parity(context.Background(), b, []string{tc.dir}, []dtypes.DType{tc.dt})
			if len(rows) != 1 {
				t.Fatalf("%d rows; want 1", len(rows))
			}
			r := rows[0]
			if r.OK != tc.wantOK || (tc.wantErr != "" && !strings.Contains(r.Error, tc.wantErr)) || (tc.wantErr == "" && r.Error != "") {
				t.Fatalf("row %+v; want ok %v, error containing %q", r, tc.wantOK, tc.wantErr)
			}
			if tc.wantOK && (r.Cases != 3 || r.MaxLogProbErr > TolF32 || r.ArgmaxAgree != 1 || r.ScoreGreedy != 3 || r.Generate != 3) {
				t.Errorf("row %+v; want 3 cases within %g, every argmax and continuation equal", r, TolF32)
			}
		})
	}
}

func TestFixtures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		root    string
		want    []string
		wantErr bool
	}{
		{name: "the repository's", root: filepath.Join("..", "..", "testdata", "fixtures"), want: []string{"qwen2-tiny", "qwen3-tiny", "qwen3-tiny-untied"}},
		{name: "none", root: t.TempDir(), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirs, err := Fixtures(tc.root)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v; want error %v", err, tc.wantErr)
			}
			var got []string
			for _, d := range dirs {
				got = append(got, filepath.Base(d))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v; want %v", got, tc.want)
			}
		})
	}
}
