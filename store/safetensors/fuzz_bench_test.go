package safetensors

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func FuzzParseHeader(f *testing.F) {
	for _, name := range fixtures {
		data, err := os.ReadFile(fixturePath(name))
		if err != nil {
			f.Fatal(err)
		}
		n := binary.LittleEndian.Uint64(data)
		f.Add(data[:8+n])                              // header only: every tensor out of range
		f.Add(data[:8+n+256])                          // the first tensors' data
		f.Add(data[:8+n/2])                            // truncated header
		f.Add(append([]byte{0xff}, data[1:8+n+64]...)) // lying header length
	}
	u8 := `{"dtype":"U8","shape":[2],"data_offsets":[0,2]}`
	for _, h := range []string{
		`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`,
		`{"w":{"dtype":"BF16","shape":[1099511627776,1099511627776],"data_offsets":[0,2]}}`,
		`{"__metadata__":{"format":"pt"},"a":` + u8 + `,"b":` + u8 + `}`,
		`{"a":` + u8 + `,"a":` + u8 + `}`,
		`{"a":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}    `,
		`{"a":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}}{`,
	} {
		f.Add(encodeRaw(h, make([]byte, 16)))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, "fuzz")
		if err != nil {
			return
		}
		for _, tt := range file.Tensors {
			if err := tt.check(); err != nil {
				t.Fatalf("parsed an inconsistent tensor: %v", err)
			}
		}
		// Whatever parses must re-encode, parse to the same tensors, and re-encode identically.
		var b bytes.Buffer
		if err := Encode(&b, file.Metadata, file.Sorted()); err != nil {
			t.Fatalf("parsed but cannot re-encode: %v", err)
		}
		again, err := Parse(b.Bytes(), "re-encoded")
		if err != nil {
			t.Fatalf("re-encoded file does not parse: %v", err)
		}
		if !slices.Equal(file.Names(), again.Names()) || len(file.Metadata) != len(again.Metadata) {
			t.Fatalf("names or metadata changed: %v → %v", file.Names(), again.Names())
		}
		for _, n := range file.Names() {
			a, c := file.Tensors[n], again.Tensors[n]
			if !bytes.Equal(a.Data, c.Data) || a.DType != c.DType || !slices.Equal(a.Shape, c.Shape) {
				t.Fatalf("tensor %s changed: %v → %v", n, a, c)
			}
		}
		var b2 bytes.Buffer
		if err := Encode(&b2, again.Metadata, again.Sorted()); err != nil || !bytes.Equal(b.Bytes(), b2.Bytes()) {
			t.Fatalf("second encoding differs (err %v)", err)
		}
	})
}

// BenchmarkReadWrite100MB times safetensors WriteFile/ReadFile of ~100 MB against writing
// (with the same fsync) and reading the same bytes with the os package, alternating the two in
// every iteration so both see the same disk and machine load; it reports MB/s of each and the
// ratio safetensors/plain (1 = no overhead).
func BenchmarkReadWrite100MB(b *testing.B) {
	const per = 4 << 20
	var ts []*Tensor
	for i := range 25 {
		data := make([]byte, per)
		for j := range data {
			data[j] = byte(i + j*31)
		}
		ts = append(ts, &Tensor{Name: "layer." + string(rune('a'+i)), DType: F32, Shape: []int{per / 4}, Data: data})
	}
	var buf bytes.Buffer
	if err := Encode(&buf, map[string]string{"format": "pt"}, ts); err != nil {
		b.Fatal(err)
	}
	plain := buf.Bytes()
	dir := b.TempDir()
	stPath, plainPath := filepath.Join(dir, "m.safetensors"), filepath.Join(dir, "plain")
	plainWrite := func() error {
		f, err := os.Create(plainPath)
		if err != nil {
			return err
		}
		if _, err := f.Write(plain); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	ops := []struct {
		name      string
		st, plain func() error
	}{
		{"write", func() error { return WriteFile(stPath, map[string]string{"format": "pt"}, ts) }, plainWrite},
		{"read", func() error { _, err := ReadFile(stPath); return err }, func() error { _, err := os.ReadFile(plainPath); return err }},
	}
	// Both files exist before any timing, so the read benchmark can run alone.
	if err := ops[0].st(); err != nil {
		b.Fatal(err)
	}
	if err := plainWrite(); err != nil {
		b.Fatal(err)
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			var tSt, tPlain time.Duration
			for range b.N {
				start := time.Now()
				if err := op.st(); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := op.plain(); err != nil {
					b.Fatal(err)
				}
				tSt, tPlain = tSt+mid.Sub(start), tPlain+time.Since(mid)
			}
			mb := float64(len(plain)) * float64(b.N) / 1e6
			b.ReportMetric(mb/tSt.Seconds(), "st-MB/s")
			b.ReportMetric(mb/tPlain.Seconds(), "os-MB/s")
			b.ReportMetric(tPlain.Seconds()/tSt.Seconds(), "st/os-speed")
		})
	}
}
