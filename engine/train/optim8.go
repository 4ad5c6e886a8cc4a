package train

import (
	"math"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
)

// 8-bit block-wise AdamW moments (Config.OptimizerBits 8). Each moment of a parameter of n values
// is stored as int8 [⌈n/MomentBlock⌉, MomentBlock + 4]: per block of MomentBlock values (the
// flattened parameter, zero-padded at the end), MomentBlock one-byte codes followed by the block's
// float32 scale in 4 bytes (bit-cast). A quarter of float32's memory, plus 4 bytes per 256 values.
// Every update dequantises the moments, runs the float32 AdamW step and quantises the result.
//
// Both codes are logarithmic, because Adam is scale-free: a weight whose gradients are 1000×
// smaller than its block neighbours' still moves by about lr a step, so its m and v must keep
// their relative precision — a linear code (round(127·m ÷ absmax)) reads such an m as 0 and the
// weight stops (measured: the 8-bit path then ends 40 % away from float32's on the test below).
//
//   - m (signed): sign × magnitude code c = clamp(round(127 + 8·log₂(|m| ÷ absmax)), 0, 127),
//     read back as absmax · 2^((c − 127) ÷ 8), and c = 0 as 0 (no step). Eight codes per octave:
//     within ±4.4 % for |m| down to absmax · 2⁻¹⁵·⁸; smaller values read as 0.
//   - v (non-negative) is stored as u = √v, the AdamW denominator: c = clamp(round(255 +
//     16·log₂(u ÷ absmax)), 0, 255), u = absmax · 2^((c − 255) ÷ 16). Sixteen codes per octave:
//     within ±2.2 % for u down to absmax · 2⁻¹⁵·⁹; code 0 reads back as that smallest step, never
//     as 0, so a tiny v cannot turn m ÷ (√v + ε) into m ÷ ε.
//
// Why not bitsandbytes' dynamic-tree map: it needs a 256-entry table lookup (a search per value),
// where the log code is two elementwise ops each way and is hand-checkable. Like any 8-bit v, an
// EMA step smaller than half a code (β₂ = 0.999 shrinks u by 0.05 % a step, 1/90 of a code) is
// lost: v follows rises of g² at once but decays only when g² pulls it down by a code or more, so
// 8-bit steps are at most as large as float32's there, never larger.

// MomentBlock is the number of values sharing one scale (ledger.MomentBlock must agree).
const MomentBlock = 256

// Resolution of the logarithmic codes: codes per octave of m's magnitude and of √v.
const (
	mCodesPerOctave = 8
	vCodesPerOctave = 16
)

// MomentShape is the storage shape of one AdamW moment of a parameter of shape param: param
// itself in float32, or int8 [⌈n/MomentBlock⌉, MomentBlock + 4] with 8-bit moments.
func MomentShape(bits int, param shapes.Shape) shapes.Shape {
	if bits != 8 {
		return shapes.Make(dtypes.Float32, param.Dimensions...)
	}
	return shapes.Make(dtypes.Int8, momentBlocks(param.Size()), MomentBlock+4)
}

func momentBlocks(n int) int { return max((n+MomentBlock-1)/MomentBlock, 1) }

// blocks flattens x and zero-pads it into [⌈n/MomentBlock⌉, MomentBlock].
func blocks(x *Node) *Node {
	n := x.Shape().Size()
	nb := momentBlocks(n)
	flat := Reshape(x, n)
	if pad := nb*MomentBlock - n; pad > 0 {
		flat = Concatenate([]*Node{flat, Zeros(x.Graph(), shapes.Make(x.DType(), pad))}, 0)
	}
	return Reshape(flat, nb, MomentBlock)
}

// unblocks is the inverse of blocks: the first n values, shaped like param.
func unblocks(b *Node, param shapes.Shape) *Node {
	flat := Reshape(b, b.Shape().Size())
	return Reshape(Slice(flat, AxisRange(0, param.Size())), param.Dimensions...)
}

// pack appends each block's float32 scale (bit-cast to 4 int8) to its int8 codes.
func pack(codes, scale *Node) *Node {
	return Concatenate([]*Node{codes, Bitcast(scale, dtypes.Int8)}, 1)
}

// unpack splits packed storage into float32 codes (signed, or unsigned when unsigned) and scales [nb, 1].
func unpack(p *Node, unsigned bool) (codes, scale *Node) {
	raw := Slice(p, AxisRange(), AxisRange(0, MomentBlock))
	if unsigned {
		raw = Bitcast(raw, dtypes.Uint8)
	}
	codes = ConvertDType(raw, dtypes.Float32)
	scale = Bitcast(Slice(p, AxisRange(), AxisRange(MomentBlock, MomentBlock+4)), dtypes.Float32)
	return codes, InsertAxes(scale, -1)
}

// logCode is clamp(round(top + perOctave·log₂(x ÷ absmax)), 0, top) for x ≥ 0 in blocks, with
// absmax the blocks' largest x ([nb]).
func logCode(x, absmax *Node, perOctave, top float64) *Node {
	r := Div(x, InsertAxes(Max(absmax, Scalar(x.Graph(), dtypes.Float32, math.SmallestNonzeroFloat32)), -1))
	return ClipScalar(Round(AddScalar(MulScalar(Log(r), perOctave/math.Ln2), top)), 0, top)
}

// logValue reads logCode's codes back: absmax · 2^((code − top) ÷ perOctave).
func logValue(codes, absmax *Node, perOctave, top float64) *Node {
	return Mul(absmax, Exp(MulScalar(AddScalar(codes, -top), math.Ln2/perOctave)))
}

// QuantizeSigned stores a float32 moment m as signed logarithmic int8 codes of |m| with a
// per-block absmax scale.
func QuantizeSigned(m *Node) *Node {
	b := blocks(m)
	absmax := ReduceMax(Abs(b), 1)
	codes := Mul(Sign(b), logCode(Abs(b), absmax, mCodesPerOctave, 127))
	return pack(ConvertDType(codes, dtypes.Int8), absmax)
}

// DequantizeSigned reads QuantizeSigned's storage back as float32 shaped param.
func DequantizeSigned(p *Node, param shapes.Shape) *Node {
	codes, absmax := unpack(p, false)
	mag := logValue(Abs(codes), absmax, mCodesPerOctave, 127)
	return unblocks(Where(Equal(codes, ZerosLike(codes)), ZerosLike(mag), Mul(Sign(codes), mag)), param)
}

// QuantizeSqrtLog stores a non-negative float32 moment v as logarithmic codes of √v with a
// per-block scale, the block's largest √v.
func QuantizeSqrtLog(v *Node) *Node {
	u := Sqrt(Max(blocks(v), ZerosLike(blocks(v))))
	absmax := ReduceMax(u, 1)
	codes := logCode(u, absmax, vCodesPerOctave, 255)
	return pack(Bitcast(ConvertDType(codes, dtypes.Uint8), dtypes.Int8), absmax)
}

// DequantizeSqrtLog reads QuantizeSqrtLog's storage back as v (float32, shaped param).
func DequantizeSqrtLog(p *Node, param shapes.Shape) *Node {
	codes, absmax := unpack(p, true)
	return unblocks(Square(logValue(codes, absmax, vCodesPerOctave, 255)), param)
}
