package safetensors

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestConversionBitPatterns(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   float32
		bf16 uint16
		f16  uint16
	}{
		{"one", 1, 0x3f80, 0x3c00},
		{"minus two", -2, 0xc000, 0xc000},
		{"zero", 0, 0x0000, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000, 0x8000},
		{"inf", float32(math.Inf(1)), 0x7f80, 0x7c00},
		{"-inf", float32(math.Inf(-1)), 0xff80, 0xfc00},
		// 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even → 1.0.
		{"bf16 tie to even down", 1 + 1.0/256, 0x3f80, 0x3c04},
		// 1 + 3·2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even) → up.
		{"bf16 tie to even up", 1 + 3.0/256, 0x3f82, 0x3c0c},
		// just above the tie rounds up even when the lower neighbour is even.
		{"bf16 above tie", math.Float32frombits(0x3f808001), 0x3f81, 0x3c04},
		// f16: 1 + 2^-11 is halfway between 1.0 and 1+2^-10: ties to even → 1.0.
		{"f16 tie to even", 1 + 1.0/2048, 0x3f80, 0x3c00},
		{"f16 tie to even up", 1 + 3.0/2048, 0x3f80, 0x3c02},
		{"f16 overflow", 70000, 0x4789, 0x7c00},
		{"f16 max", 65504, 0x4780, 0x7bff},
		// 65520 is halfway between 65504 (odd mantissa) and 65536 (overflow): rounds to inf.
		{"f16 tie into inf", 65520, 0x4780, 0x7c00},
		{"f16 just below inf tie", 65519.996, 0x4780, 0x7bff},
		{"bf16 max float32 rounds to inf", math.MaxFloat32, 0x7f80, 0x7c00},
		{"bf16 largest finite", math.Float32frombits(0x7f7f7fff), 0x7f7f, 0x7c00},
		{"f16 smallest normal", float32(math.Ldexp(1, -14)), 0x3880, 0x0400},
		// largest f16 subnormal plus half an ulp, ties to even: 0x3ff is odd → carries to 0x400.
		{"f16 subnormal rounds into normal", float32(math.Ldexp(2047, -25)), 0x3880, 0x0400},
		{"f16 smallest subnormal", float32(math.Ldexp(1, -24)), 0x3380, 0x0001},
		{"f16 half smallest subnormal ties to zero", float32(math.Ldexp(1, -25)), 0x3300, 0x0000},
		{"f16 just above half smallest subnormal", float32(math.Ldexp(1.5, -25)), 0x3340, 0x0001},
		{"f16 underflow to zero", float32(math.Ldexp(1, -26)), 0x3280, 0x0000},
		{"f16 negative underflow keeps sign", -float32(math.Ldexp(1, -26)), 0xb280, 0x8000},
		{"f16 subnormal", float32(math.Ldexp(3, -20)), 0x3640, 0x0030},
		{"float32 subnormal", math.Float32frombits(0x00000001), 0x0000, 0x0000},
		{"float32 subnormal to bf16 subnormal", math.Float32frombits(0x00018000), 0x0002, 0x0000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Float32ToBF16(tc.in); got != tc.bf16 {
				t.Errorf("Float32ToBF16(%v) = %#04x; want %#04x", tc.in, got, tc.bf16)
			}
			if got := Float32ToF16(tc.in); got != tc.f16 {
				t.Errorf("Float32ToF16(%v) = %#04x; want %#04x", tc.in, got, tc.f16)
			}
		})
	}
}

func TestWidenKnownValues(t *testing.T) {
	for _, tc := range []struct {
		bits      uint16
		bf16, f16 float64
	}{
		{0x3c00, 0.0078125, 1},
		{0x0001, math.Ldexp(1, -133), math.Ldexp(1, -24)},
		{0x03ff, math.Ldexp(255, -127), math.Ldexp(1023, -24)}, // bf16: exponent 7, mantissa 0x7f
		{0x7bff, math.Ldexp(255, 113), 65504},                  // bf16: exponent 247, mantissa 0x7f
		{0x8400, -math.Ldexp(1, -119), -math.Ldexp(1, -14)},
		{0x7c00, math.Ldexp(1, 121), math.Inf(1)},
		{0x7f80, math.Inf(1), math.NaN()},
		{0x4780, 65536, 7.5}, // f16: exponent 17, mantissa 896
	} {
		if got := float64(BF16ToFloat32(tc.bits)); got != tc.bf16 {
			t.Errorf("BF16ToFloat32(%#04x) = %v; want %v", tc.bits, got, tc.bf16)
		}
		if got := float64(F16ToFloat32(tc.bits)); got != tc.f16 && !(math.IsNaN(got) && math.IsNaN(tc.f16)) {
			t.Errorf("F16ToFloat32(%#04x) = %v; want %v", tc.bits, got, tc.f16)
		}
	}
	for _, b := range []uint16{0x7c01, 0x7e00, 0xfe00, 0x7fff} {
		if f := F16ToFloat32(b); !math.IsNaN(float64(f)) {
			t.Errorf("F16ToFloat32(%#04x) = %v; want NaN", b, f)
		}
	}
	for _, b := range []uint16{0x7f81, 0x7fc0, 0xffc0} {
		if f := BF16ToFloat32(b); !math.IsNaN(float64(f)) {
			t.Errorf("BF16ToFloat32(%#04x) = %v; want NaN", b, f)
		}
	}
}

// nearest is an independent oracle: the 16-bit pattern nearest to x among the sorted positive
// finite values of a format (ties to the even pattern; past the largest finite value the next
// step is infinity at pattern inf, as IEEE rounding defines it).
type nearest struct {
	vals []float64 // vals[i] is the value of pattern i, for i ≤ maxFinite
	inf  uint16
	next float64 // the value one ulp past the largest finite one
}

func newNearest(widen func(uint16) float32, maxFinite, inf uint16, next float64) *nearest {
	n := &nearest{inf: inf, next: next}
	for b := 0; b <= int(maxFinite); b++ {
		n.vals = append(n.vals, float64(widen(uint16(b))))
	}
	return n
}

func (n *nearest) round(x float32) uint16 {
	ax, sign := math.Abs(float64(x)), uint16(0)
	if math.Signbit(float64(x)) {
		sign = 0x8000
	}
	if math.IsInf(ax, 1) {
		return sign | n.inf
	}
	i := sort.SearchFloat64s(n.vals, ax) // first index with vals[i] ≥ ax
	if i < len(n.vals) && n.vals[i] == ax {
		return sign | uint16(i)
	}
	lo, loV := uint16(i-1), n.vals[i-1]
	hi, hiV := uint16(i), n.next
	if i < len(n.vals) {
		hiV = n.vals[i]
	} else {
		hi = n.inf
	}
	switch dl, dh := ax-loV, hiV-ax; {
	case dl < dh:
		return sign | lo
	case dh < dl:
		return sign | hi
	case lo&1 == 0:
		return sign | lo
	}
	return sign | hi
}

// TestConversionsAgainstOracle checks both narrowings at every tie point between adjacent
// 16-bit values, one float32 ulp either side of it, and on random float32 bit patterns.
func TestConversionsAgainstOracle(t *testing.T) {
	for _, tc := range []struct {
		name   string
		widen  func(uint16) float32
		narrow func(float32) uint16
		oracle *nearest
	}{
		{"bf16", BF16ToFloat32, Float32ToBF16, newNearest(BF16ToFloat32, 0x7f7f, 0x7f80, math.Ldexp(1, 128))},
		{"f16", F16ToFloat32, Float32ToF16, newNearest(F16ToFloat32, 0x7bff, 0x7c00, 65536)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(x float32) {
				if math.IsNaN(float64(x)) {
					return
				}
				if got, want := tc.narrow(x), tc.oracle.round(x); got != want {
					t.Fatalf("%s(%v = %#08x) = %#04x; want %#04x", tc.name, x, math.Float32bits(x), got, want)
				}
			}
			vals := append(tc.oracle.vals, tc.oracle.next)
			for i := 0; i+1 < len(vals); i++ {
				mid := float32((vals[i] + vals[i+1]) / 2) // exact: 16-bit formats have spare float32 bits
				for _, x := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1))), float32(vals[i])} {
					check(x)
					check(-x)
				}
			}
			r := rand.New(rand.NewPCG(1, 2))
			for range 200_000 {
				check(math.Float32frombits(r.Uint32()))
			}
			// Every 16-bit pattern widens and narrows back to itself; NaN stays NaN.
			for h := range 1 << 16 {
				b := uint16(h)
				f := tc.widen(b)
				if math.IsNaN(float64(f)) {
					if back := tc.widen(tc.narrow(f)); !math.IsNaN(float64(back)) {
						t.Fatalf("NaN %#04x came back as %v", b, back)
					}
					continue
				}
				if tc.narrow(f) != b {
					t.Fatalf("%#04x → %v → %#04x", b, f, tc.narrow(f))
				}
			}
			for _, nan := range []uint32{0x7fc00000, 0x7f800001, 0xff800001, 0x7f800100} {
				if f := tc.widen(tc.narrow(math.Float32frombits(nan))); !math.IsNaN(float64(f)) {
					t.Errorf("NaN %#08x became %v", nan, f)
				}
			}
		})
	}
}
