// Package rollout is the generator: continuous batching over a fixed pool of KV-cache slots, chunked
// prefill, on-device sampling with per-token log-probabilities, and stop conditions. Trajectories
// that wait for a tool keep their slot's cache while the other slots go on decoding.
package rollout

import (
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
)

// sampleFull draws one token per slot from the whole distribution softmax(logits/T) by inverse CDF
// (greedy where T ≤ 0); see sampleTokens. It avoids TopK, which the Go backend runs slowly.
func sampleFull(logits, temperature, u *Node) (ids, logp *Node) {
	s, v := logits.Shape().Dim(0), logits.Shape().Dim(1)
	greedy := LessOrEqual(temperature, ZerosLike(temperature))
	temp := Where(greedy, OnesLike(temperature), temperature)
	logpFull := LogSoftmax(Div(logits, ExpandAxes(temp, -1)), -1)
	cdf := CumSum(Exp(logpFull), -1)
	total := SliceAxis(cdf, -1, AxisRange(v-1, v))
	below := LessThan(cdf, Mul(ExpandAxes(u, -1), total))
	sampled := MinScalar(ReduceSum(ConvertDType(below, dtypes.Int32), -1), int32(v-1))
	argmax := ArgMax(logits, -1, dtypes.Int32)
	ids = Where(greedy, argmax, sampled)
	// For greedy slots temp is 1, so logpFull is the untempered log-softmax.
	rows := Iota(logits.Graph(), shapes.Make(dtypes.Int32, s), 0)
	logp = Gather(logpFull, Stack([]*Node{rows, ids}, -1))
	return ids, logp
}

// sampleTokens draws one token per slot from logits [S, V] (float32) on the device.
//
// Per-slot settings: temperature [S] (≤ 0 means greedy), topK [S] int32 (≤ 0: off), topP [S]
// (≥ 1: off), and u [S], a uniform number in [0, 1) from the host's per-request random stream, so
// that a trajectory's samples depend on its own seed and not on which slot or step it ran in.
//
// Without top-k/top-p the token is drawn by inverse CDF over the whole vocabulary and its log-prob is
// log softmax(logits/T)[token]: exactly what a teacher-forced pass at the same temperature computes.
// With top-k or top-p the candidates are the kMax most likely tokens, truncated and renormalised,
// and the log-prob is that of the truncated distribution actually sampled from. Greedy slots record
// the model's untempered log-prob of the argmax.
func sampleTokens(logits, temperature, topK, topP, u *Node, kMax int) (ids, logp *Node) {
	g := logits.Graph()
	s, v := logits.Shape().Dim(0), logits.Shape().Dim(1)
	f32 := dtypes.Float32
	one := OnesLike(temperature)
	greedy := LessOrEqual(temperature, ZerosLike(temperature)) // [S]
	temp := Where(greedy, one, temperature)
	scaled := Div(logits, ExpandAxes(temp, -1))
	logpFull := LogSoftmax(scaled, -1) // [S, V]

	// Full distribution: inverse CDF in vocabulary order.
	cdf := CumSum(Exp(logpFull), -1)
	total := SliceAxis(cdf, -1, AxisRange(v-1, v)) // [S, 1]
	below := LessThan(cdf, Mul(ExpandAxes(u, -1), total))
	idxFull := MinScalar(ReduceSum(ConvertDType(below, dtypes.Int32), -1), int32(v-1)) // [S]

	// Truncated: top kMax candidates, then per-slot top-k and top-p, renormalised.
	vals, inds := TopK(scaled, kMax, -1) // [S, K], sorted descending
	rank := Iota(g, shapes.Make(dtypes.Int32, s, kMax), 1)
	k := ExpandAxes(topK, -1)
	keepK := LogicalOr(LessOrEqual(k, ZerosLike(k)), LessThan(rank, k))
	pk := Softmax(vals, -1)
	before := Sub(CumSum(pk, -1), pk) // mass strictly before each candidate
	keepP := LessThan(before, ExpandAxes(topP, -1))
	keep := LogicalAnd(keepK, LogicalOr(keepP, Equal(rank, ZerosLike(rank)))) // the best token always stays
	pt := Where(keep, pk, ZerosLike(pk))
	pt = Div(pt, ReduceAndKeep(pt, ReduceSum, -1))
	cdfT := CumSum(pt, -1)
	totalT := SliceAxis(cdfT, -1, AxisRange(kMax-1, kMax))
	j := ReduceSum(ConvertDType(LessThan(cdfT, Mul(ExpandAxes(u, -1), totalT)), dtypes.Int32), -1)
	// Never step past the last kept candidate (rounding in the cumulative sum).
	lastKept := SubScalar(ReduceSum(ConvertDType(keep, dtypes.Int32), -1), int32(1))
	j = Min(j, lastKept)
	rows := Iota(g, shapes.Make(dtypes.Int32, s), 0)
	pick := Stack([]*Node{rows, j}, -1) // [S, 2]
	idxT := ConvertDType(Gather(inds, pick), dtypes.Int32)
	lpT := Log(Gather(pt, pick))

	truncated := LogicalOr(GreaterThan(topK, ZerosLike(topK)), LessThan(topP, OnesLike(topP)))
	sampled := Where(truncated, idxT, idxFull)
	sampledLP := Where(truncated, lpT, Gather(logpFull, Stack([]*Node{rows, sampled}, -1)))

	argmax := ArgMax(logits, -1, dtypes.Int32)
	greedyLP := Gather(LogSoftmax(logits, -1), Stack([]*Node{rows, argmax}, -1))
	ids = Where(greedy, argmax, sampled)
	logp = ConvertDType(Where(greedy, greedyLP, sampledLP), f32)
	return ids, logp
}
