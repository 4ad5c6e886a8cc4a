package doctor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gomlx/compute"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // graph code reads like the math
	"github.com/gomlx/gomlx/core/tensors"
)

// OpRow is one float32 operation the model's forward pass is made of, run on a backend and
// compared with the same operation in float64 in Go: the largest error of an element, relative to
// the size of what the element sums (|reference| for element-wise ops, at least 1 for cos and sin,
// Σ|terms| for sums and dot products, so that cancellation does not count against the backend),
// in float32 steps at 1.0 (2⁻²³ ≈ 1.19e-7). A NaN or infinite error is the row's Error.
type OpRow struct {
	Op      string  `json:"op"`
	Shape   string  `json:"shape"`
	MaxRel  float64 `json:"max_rel_err"`
	Ulps    float64 `json:"ulps"`  // MaxRel ÷ 2⁻²³
	Worst   string  `json:"worst"` // the element with the largest error: input, value, reference
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// OpParityReport is dev op-parity's answer: which of the forward pass's operations a backend
// computes further from float64 than the Go backend does (on a GPU: what costs float32 parity).
type OpParityReport struct {
	Backend string  `json:"backend"`
	Rows    []OpRow `json:"rows"`
}

// opCase is one operation: its inputs (float32, flat, with their dimensions), the graph, and a
// float64 reference that returns each output element's value and scale.
type opCase struct {
	name   string
	inputs [][]float32
	dims   [][]int
	graph  func(in []*Node) *Node
	ref    func(in [][]float64) (val, scale []float64)
}

// OpParity runs every operation case on backend and compares it with float64.
func OpParity(backend compute.Backend) []OpRow {
	var rows []OpRow
	for _, c := range opCases() {
		t0 := time.Now()
		row := OpRow{Op: c.name, Shape: fmt.Sprint(c.dims)}
		got, err := runOp(backend, c)
		row.Seconds = time.Since(t0).Seconds()
		if err != nil {
			row.Error = err.Error()
			rows = append(rows, row)
			continue
		}
		in64 := make([][]float64, len(c.inputs))
		for i, x := range c.inputs {
			in64[i] = make([]float64, len(x))
			for j, v := range x {
				in64[i][j] = float64(v)
			}
		}
		val, scale := c.ref(in64)
		if len(val) != len(got) {
			row.Error = fmt.Sprintf("%d outputs; the reference has %d", len(got), len(val))
			rows = append(rows, row)
			continue
		}
		compareOp(&row, got, val, scale)
		rows = append(rows, row)
	}
	return rows
}

// compareOp fills row's error figures from the backend's outputs got and the float64 reference.
func compareOp(row *OpRow, got []float32, val, scale []float64) {
	for i := range val {
		e := math.Abs(float64(got[i])-val[i]) / math.Max(scale[i], 1e-30)
		if math.IsNaN(e) || math.IsInf(e, 0) { // JSON has no NaN or Inf: the row says it in words
			row.Error = fmt.Sprintf("element %d: %g where float64 gives %.9g", i, got[i], val[i])
			return
		}
		if e > row.MaxRel {
			row.MaxRel = e
			row.Worst = fmt.Sprintf("element %d: %.9g, float64 %.9g", i, got[i], val[i])
		}
	}
	row.Ulps = row.MaxRel / math.Ldexp(1, -23)
}

func runOp(backend compute.Backend, c opCase) ([]float32, error) {
	e, err := NewExec(backend, func(in []*Node) *Node { return c.graph(in) })
	if err != nil {
		return nil, err
	}
	defer e.Finalize()
	args := make([]any, len(c.inputs))
	for i, x := range c.inputs {
		args[i] = tensors.FromFlatDataAndDimensions(x, c.dims[i]...)
	}
	out, err := e.Call(args...)
	if err != nil {
		return nil, err
	}
	return tensors.MustCopyFlatData[float32](out[0]), nil
}

// opCases are the float32 operations of a Qwen3 forward pass and of the log-probs after it, at
// the built-in model's sizes (hidden 128, vocabulary 392) and positions up to 1,023.
func opCases() []opCase {
	rng := rand.New(rand.NewPCG(11, 12))
	uniform := func(n int, lo, hi float64) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(lo + (hi-lo)*rng.Float64())
		}
		return x
	}
	// floor is the least scale of an element: 0 for relative errors; 1 for cos and sin, whose
	// errors RoPE adds to values of order 1 (near a zero of cos a relative error means nothing).
	elementwise := func(name string, lo, hi, floor float64, g func(*Node) *Node, f func(float64) float64) opCase {
		return opCase{name: name, inputs: [][]float32{uniform(4096, lo, hi)}, dims: [][]int{{4096}},
			graph: func(in []*Node) *Node { return g(in[0]) },
			ref: func(in [][]float64) ([]float64, []float64) {
				val, scale := make([]float64, len(in[0])), make([]float64, len(in[0]))
				for i, x := range in[0] {
					val[i] = f(x)
					scale[i] = math.Max(math.Abs(val[i]), floor)
				}
				return val, scale
			}}
	}
	const rows, hidden, inter, vocab = 64, 128, 256, 392
	cases := []opCase{
		elementwise("exp", -20, 5, 0, Exp, math.Exp),
		elementwise("log", 1e-3, 400, 0, Log, math.Log),
		elementwise("sqrt", 1e-6, 10, 0, Sqrt, math.Sqrt),
		elementwise("logistic (SiLU's gate)", -12, 12, 0, Logistic, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }),
		// RoPE's tables: cos and sin of position × inverse frequency, up to 1,023 radians.
		elementwise("cos (RoPE, to 1023 rad)", 0, 1023, 1, Cos, math.Cos),
		elementwise("sin (RoPE, to 1023 rad)", 0, 1023, 1, Sin, math.Sin),
		{
			name: "dot [64,128]·[128,256]", inputs: [][]float32{uniform(rows*hidden, -1, 1), uniform(hidden*inter, -0.1, 0.1)},
			dims:  [][]int{{rows, hidden}, {hidden, inter}},
			graph: func(in []*Node) *Node { return Einsum("rk,kc->rc", in[0], in[1]) },
			ref: func(in [][]float64) ([]float64, []float64) {
				val, scale := make([]float64, rows*inter), make([]float64, rows*inter)
				for r := range rows {
					for c := range inter {
						for k := range hidden {
							t := in[0][r*hidden+k] * in[1][k*inter+c]
							val[r*inter+c] += t
							scale[r*inter+c] += math.Abs(t)
						}
					}
				}
				return val, scale
			},
		},
		{
			name: "rms norm (x / sqrt(mean(x²) + 1e-6))", inputs: [][]float32{uniform(rows*hidden, -3, 3)}, dims: [][]int{{rows, hidden}},
			graph: func(in []*Node) *Node {
				return Div(in[0], Sqrt(AddScalar(ReduceAndKeep(Square(in[0]), ReduceMean, -1), 1e-6)))
			},
			ref: func(in [][]float64) ([]float64, []float64) {
				val, scale := make([]float64, rows*hidden), make([]float64, rows*hidden)
				for r := range rows {
					var ms float64
					for k := range hidden {
						ms += in[0][r*hidden+k] * in[0][r*hidden+k]
					}
					d := math.Sqrt(ms/hidden + 1e-6)
					for k := range hidden {
						val[r*hidden+k] = in[0][r*hidden+k] / d
						scale[r*hidden+k] = math.Max(math.Abs(val[r*hidden+k]), 1e-3)
					}
				}
				return val, scale
			},
		},
		{
			name: "softmax (attention, last axis)", inputs: [][]float32{uniform(rows*256, -8, 8)}, dims: [][]int{{rows, 256}},
			graph: func(in []*Node) *Node { return Softmax(in[0], -1) },
			ref: func(in [][]float64) ([]float64, []float64) {
				val, scale := softmax64(in[0], 256)
				return val, scale
			},
		},
		{
			name: "log-probs (logits − max − log Σ exp)", inputs: [][]float32{uniform(rows*vocab, -15, 15)}, dims: [][]int{{rows, vocab}},
			graph: func(in []*Node) *Node {
				shifted := Sub(in[0], ReduceAndKeep(in[0], ReduceMax, -1))
				return Sub(shifted, Log(ReduceAndKeep(Exp(shifted), ReduceSum, -1)))
			},
			ref: func(in [][]float64) ([]float64, []float64) {
				val, scale := make([]float64, rows*vocab), make([]float64, rows*vocab)
				for r := range rows {
					x := in[0][r*vocab : (r+1)*vocab]
					m := math.Inf(-1)
					for _, v := range x {
						m = math.Max(m, v)
					}
					var s float64
					for _, v := range x {
						s += math.Exp(v - m)
					}
					for i, v := range x {
						val[r*vocab+i] = v - m - math.Log(s)
						scale[r*vocab+i] = math.Max(math.Abs(val[r*vocab+i]), 1)
					}
				}
				return val, scale
			},
		},
	}
	return cases
}

// softmax64 is the softmax of each row of n elements, with |value| as the scale (and 1e-7 at
// least, below which a float32 probability is noise to the log-probs after it).
func softmax64(x []float64, n int) (val, scale []float64) {
	val, scale = make([]float64, len(x)), make([]float64, len(x))
	for r := 0; r+n <= len(x); r += n {
		m := math.Inf(-1)
		for _, v := range x[r : r+n] {
			m = math.Max(m, v)
		}
		var s float64
		for _, v := range x[r : r+n] {
			s += math.Exp(v - m)
		}
		for i, v := range x[r : r+n] {
			val[r+i] = math.Exp(v-m) / s
			scale[r+i] = math.Max(val[r+i], 1e-7)
		}
	}
	return val, scale
}
