package stablehlo

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/go-xla/types/shapes"
	"github.com/gomlx/go-xla/types/shardy"
)

func must1[T any](value T, err error) T {
	if err != nil {
		panic(err)
	}
	return value
}

func TestBuilder(t *testing.T) {
	t.Run("no inputs", func(t *testing.T) {
		b := New(t.Name())
		fn := b.Main()
		c1 := must1(fn.ConstantFromScalar(1.0))
		c2 := must1(fn.ConstantFromScalar(2.0))
		sum := must1(Add(c1, c2))
		if err := fn.Return(sum); err != nil {
			t.Fatalf("expected no error, got %v", err)
		}
		program := string(must1(b.Build()))
		fmt.Printf("%s program:\n%s", t.Name(), program)
		want := `module @TestBuilder_no_inputs {
  func.func @main() -> tensor<f64> {
    %0 = "stablehlo.constant"() { value = dense<1.0> : tensor<f64> } : () -> tensor<f64>
    %1 = "stablehlo.constant"() { value = dense<2.0> : tensor<f64> } : () -> tensor<f64>
    %2 = "stablehlo.add"(%0, %1) : (tensor<f64>, tensor<f64>) -> tensor<f64>
    "stablehlo.return"(%2) : (tensor<f64>) -> ()
  }
}
`
		if program != want {
			fmt.Printf("  Failed. Wanted the following program:\n%s", want)
			t.Fatal("programs don't match")
		}
	})

	t.Run("Sharding", func(t *testing.T) {
		b := New(t.Name())
		mesh, err := shardy.NewDeviceMesh("mesh", []int{4, 2}, []string{"data", "model"})
		if err != nil {
			t.Fatalf("expected no error, got %v", err)
		}
		err = mesh.SetLogicalDeviceAssignment(7, 6, 5, 4, 3, 2, 1, 0)
		if err != nil {
			t.Fatalf("expected no error, got %v", err)
		}
		b.WithShardy(mesh)
		fn := b.Main()

		arg0 := must1(fn.NamedInputWithShardingAndAttributes(
			"arg0",
			shapes.Make(dtypes.F32, 16, 128),
			b.NewShardingSpec().AddShardedAxis("data"),
			nil,
		))
		arg1 := must1(fn.NamedInputWithSharding(
			"arg1",
			shapes.Make(dtypes.F32, 128, 256),
			b.NewShardingSpec().AddShardedAxis("model"),
		))

		tanh := must1(Tanh(arg0))
		dot := must1(Dot(tanh, arg1))
		err = fn.ReturnWithShardingAndAttributes(
			[]*Value{dot},
			[]*shardy.ShardingSpec{
				b.NewShardingSpec().AddShardedAxis("data"),
			},
			[]map[string]any{
				{"jax.result_info": "result"},
			})
		if err != nil {
			t.Fatalf("expected no error, got %v", err)
		}

		program := string(must1(b.Build()))
		fmt.Printf("%s program:\n%s", t.Name(), program)
		want := `module @TestBuilder_Sharding attributes {stablehlo.num_replicas = 1,  stablehlo.num_partitions = 8} {
  sdy.mesh @mesh = <["data"=4, "model"=2], device_ids=[7, 6, 5, 4, 3, 2, 1, 0]>
  func.func @main(%arg0: tensor<16x128xf32> { sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]> }, %arg1: tensor<128x256xf32> { sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]> }) -> (tensor<16x256xf32> {
    jax.result_info = "result",
    sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>
  }) {
    %0 = "stablehlo.tanh"(%arg0) : (tensor<16x128xf32>) -> tensor<16x128xf32>
    %1 = "stablehlo.dot_general"(%0, %arg1) {
      dot_dimension_numbers = #stablehlo.dot<
  lhs_batching_dimensions = [],
  rhs_batching_dimensions = [],
  lhs_contracting_dimensions = [1],
  rhs_contracting_dimensions = [0]
>,
      precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]
    } : (tensor<16x128xf32>, tensor<128x256xf32>) -> tensor<16x256xf32>
    "stablehlo.return"(%1) : (tensor<16x256xf32>) -> ()
  }
}
`
		if want != program {
			t.Fatalf("programs don't match.\nWant:\n%s\nGot:\n%s", want, program)
		}
	})

	t.Run("with inputs", func(t *testing.T) {
		builder := New(t.Name())
		shape := shapes.Make(dtypes.Float64)
		// lhs is provided during the Main function creation, and rhs is added later.
		fn := builder.Main()
		lhs := must1(fn.NamedInput("lhs", shape))
		rhs := must1(fn.NamedInput("rhs", shape))
		sum := must1(Add(lhs, rhs))
		if err := fn.Return(sum); err != nil {
			t.Fatalf("expected no error, got %v", err)
		}
		program := string(must1(builder.Build()))
		fmt.Printf("%s program:\n%s", t.Name(), program)
		want := `module @TestBuilder_with_inputs {
  func.func @main(%lhs: tensor<f64>, %rhs: tensor<f64>) -> tensor<f64> {
    %0 = "stablehlo.add"(%lhs, %rhs) : (tensor<f64>, tensor<f64>) -> tensor<f64>
    "stablehlo.return"(%0) : (tensor<f64>) -> ()
  }
}
`
		if program != want {
			fmt.Printf("  Failed. Wanted the following program:\n%s", want)
			t.Fatal("programs don't match")
		}
	})

	t.Run("quantization", func(t *testing.T) {
		builder := New(t.Name())
		fn := builder.Main()
		// Create two constants
		c1 := must1(fn.ConstantFromScalar(float32(2.0)))
		c2 := must1(fn.ConstantFromScalar(float32(3.0)))
		// Multiply them
		product := must1(Multiply(c1, c2))
		// Change quantization on the output
		quantization := shapes.UniformQuantization(dtypes.Int8, dtypes.Float32, 0.025, 0)
		product, err := product.WithQuantization(quantization)
		if err != nil {
			t.Fatalf("expected no error from WithQuantization, got %v", err)
		}
		if err := fn.Return(product); err != nil {
			t.Fatalf("expected no error, got %v", err)
		}
		program := string(must1(builder.Build()))
		fmt.Printf("%s program:\n%s", t.Name(), program)
		want := `module @TestBuilder_quantization {
  func.func @main() -> tensor<!quant.uniform<i8:f32, 0.025:0>> {
    %0 = "stablehlo.constant"() { value = dense<2.0> : tensor<f32> } : () -> tensor<f32>
    %1 = "stablehlo.constant"() { value = dense<3.0> : tensor<f32> } : () -> tensor<f32>
    %2 = "stablehlo.multiply"(%0, %1) : (tensor<f32>, tensor<f32>) -> tensor<!quant.uniform<i8:f32, 0.025:0>>
    "stablehlo.return"(%2) : (tensor<!quant.uniform<i8:f32, 0.025:0>>) -> ()
  }
}
`
		if program != want {
			fmt.Printf("  Failed. Wanted the following program:\n%s", want)
			t.Fatal("programs don't match")
		}
	})
}

func TestBuilder_Errors(t *testing.T) {
	t.Run("no main", func(t *testing.T) {
		b := New("test_program")
		fn := b.NewFunction("not_main", nil)
		c1 := must1(fn.ConstantFromScalar(1.0))
		if err := fn.Return(c1); err != nil {
			t.Fatalf("expected no error, got %v", err)
		}
		_, err := b.Build()
		if err == nil {
			t.Fatal("expected error, got nil")
		}
		if !strings.Contains(err.Error(), "program must have a main function") {
			t.Fatalf("error message %q does not contain expected substring", err.Error())
		}
	})
}

func TestNormalizeIdentifier(t *testing.T) {
	testCases := []struct {
		input, want string
	}{
		{"abc123", "abc123"},
		{"arg#2", "arg_2"},
		{"0abc", "_0abc"},
	}
	for _, tc := range testCases {
		got := NormalizeIdentifier(tc.input)
		if got != tc.want {
			t.Errorf("NormalizeIdentifier(%q) = %q, want %q", tc.input, got, tc.want)
		}
	}
}

func TestDynamicOperations(t *testing.T) {
	t.Run("GetDimensionSize", func(t *testing.T) {
		b := New(t.Name())
		fn := b.Main()

		// Create a tensor with shape [3, ?, 5] where the second dimension is dynamic
		operand := must1(fn.NamedInput("operand", shapes.Make(dtypes.Float32, 3, shapes.DimUnknown, 5)))

		// Get size of dynamic dimension 1 (value only known at runtime)
		dimSize := must1(GetDimensionSize(operand, 1))

		if err := fn.Return(dimSize); err != nil {
			t.Fatalf("expected no error, got %v", err)
		}

		program := string(must1(b.Build()))
		fmt.Printf("%s program:\n%s\n", t.Name(), program)

		// Verify the operation is present in the program
		if !strings.Contains(program, "stablehlo.get_dimension_size") {
			t.Fatal("expected program to contain get_dimension_size operation")
		}
		if !strings.Contains(program, `dimension = 1`) {
			t.Fatal("expected program to specify dimension = 1")
		}
	})

	t.Run("DynamicReshape", func(t *testing.T) {
		b := New(t.Name())
		fn := b.Main()

		// Create input tensor [2, 3] = 6 elements
		operand := must1(fn.NamedInput("operand", shapes.Make(dtypes.Float32, 2, 3)))

		// Create shape tensor specifying new shape [3, 2] - a 1D tensor with 2 elements
		newShape := must1(fn.ConstantFromFlatAndDimensions([]int64{3, 2}, 2))

		// Dynamic reshape with bounds
		reshaped := must1(DynamicReshape(operand, newShape, []int{3, 2}))

		if err := fn.Return(reshaped); err != nil {
			t.Fatalf("expected no error, got %v", err)
		}

		program := string(must1(b.Build()))
		fmt.Printf("%s program:\n%s\n", t.Name(), program)

		if !strings.Contains(program, "stablehlo.dynamic_reshape") {
			t.Fatal("expected program to contain dynamic_reshape operation")
		}
		// Check for bounded dynamic shape encoding
		if !strings.Contains(program, "#stablehlo.bounds") {
			t.Fatal("expected program to contain bounds encoding")
		}
	})

	t.Run("DynamicBroadcastInDim", func(t *testing.T) {
		b := New(t.Name())
		fn := b.Main()

		// Create input tensor [3]
		operand := must1(fn.NamedInput("operand", shapes.Make(dtypes.Float32, 3)))

		// Create output dimensions tensor [2, 3] - a 1D tensor with 2 elements
		outputDims := must1(fn.ConstantFromFlatAndDimensions([]int64{2, 3}, 2))

		// Broadcast with dimension mapping: input dim 0 -> output dim 1
		broadcasted := must1(DynamicBroadcastInDim(operand, outputDims, []int{1}, []int{2, 3}))

		if err := fn.Return(broadcasted); err != nil {
			t.Fatalf("expected no error, got %v", err)
		}

		program := string(must1(b.Build()))
		fmt.Printf("%s program:\n%s\n", t.Name(), program)

		if !strings.Contains(program, "stablehlo.dynamic_broadcast_in_dim") {
			t.Fatal("expected program to contain dynamic_broadcast_in_dim operation")
		}
		if !strings.Contains(program, "broadcast_dimensions") {
			t.Fatal("expected program to contain broadcast_dimensions attribute")
		}
	})

	t.Run("DynamicIota", func(t *testing.T) {
		b := New(t.Name())
		fn := b.Main()

		// Create shape tensor [4, 3] - a 1D tensor with 2 elements
		outputShape := must1(fn.ConstantFromFlatAndDimensions([]int64{4, 3}, 2))

		// Create iota along dimension 0
		iota := must1(DynamicIota(fn, dtypes.Int32, outputShape, 0, []int{4, 3}))

		if err := fn.Return(iota); err != nil {
			t.Fatalf("expected no error, got %v", err)
		}

		program := string(must1(b.Build()))
		fmt.Printf("%s program:\n%s\n", t.Name(), program)

		if !strings.Contains(program, "stablehlo.dynamic_iota") {
			t.Fatal("expected program to contain dynamic_iota operation")
		}
		if !strings.Contains(program, "iota_dimension = 0") {
			t.Fatal("expected program to contain iota_dimension attribute")
		}
	})

	t.Run("DynamicGather", func(t *testing.T) {
		b := New(t.Name())
		fn := b.Main()

		// Create operand [3, 4, 2]
		operand := must1(fn.NamedInput("operand", shapes.Make(dtypes.Float32, 3, 4, 2)))

		// Create start indices [2, 3, 2] - 2 batches of 3 indices, each index has 2 elements
		startIndices := must1(fn.NamedInput("indices", shapes.Make(dtypes.Int64, 2, 3, 2)))

		// Create dynamic slice sizes [1, 1, 2] - a 1D tensor with 3 elements
		sliceSizes := must1(fn.ConstantFromFlatAndDimensions([]int64{1, 1, 2}, 3))

		// Gather with dimension configuration
		gathered := must1(DynamicGather(operand, startIndices, sliceSizes,
			2,               // indexVectorAxis
			[]int{2},        // offsetOutputAxes
			[]int{0, 1},     // collapsedSliceAxes
			[]int{},         // operandBatchingAxes
			[]int{},         // startIndicesBatchingAxes
			[]int{0, 1},     // startIndexMap
			false,           // indicesAreSorted
			[]int{2, 3, 2})) // bounds

		if err := fn.Return(gathered); err != nil {
			t.Fatalf("expected no error, got %v", err)
		}

		program := string(must1(b.Build()))
		fmt.Printf("%s program:\n%s\n", t.Name(), program)

		if !strings.Contains(program, "stablehlo.dynamic_gather") {
			t.Fatal("expected program to contain dynamic_gather operation")
		}
		if !strings.Contains(program, "#stablehlo.gather") {
			t.Fatal("expected program to contain gather dimension_numbers")
		}
	})

	t.Run("DynamicPad", func(t *testing.T) {
		b := New(t.Name())
		fn := b.Main()

		// Create operand [2, 3]
		operand := must1(fn.NamedInput("operand", shapes.Make(dtypes.Float32, 2, 3)))

		// Create padding value
		padValue := must1(fn.ConstantFromScalar(float32(0)))

		// Create padding tensors - 1D tensors with 2 elements each
		edgeLow := must1(fn.ConstantFromFlatAndDimensions([]int64{1, 2}, 2))
		edgeHigh := must1(fn.ConstantFromFlatAndDimensions([]int64{1, 2}, 2))
		interior := must1(fn.ConstantFromFlatAndDimensions([]int64{0, 0}, 2))

		// Dynamic pad with bounds for output shape [4, 7]
		padded := must1(DynamicPad(operand, padValue, edgeLow, edgeHigh, interior, []int{4, 7}))

		if err := fn.Return(padded); err != nil {
			t.Fatalf("expected no error, got %v", err)
		}

		program := string(must1(b.Build()))
		fmt.Printf("%s program:\n%s\n", t.Name(), program)

		if !strings.Contains(program, "stablehlo.dynamic_pad") {
			t.Fatal("expected program to contain dynamic_pad operation")
		}
	})

	t.Run("DynamicConv", func(t *testing.T) {
		b := New(t.Name())
		fn := b.Main()

		// Create input [1, 4, 4, 1] - NHWC format
		input := must1(fn.NamedInput("input", shapes.Make(dtypes.Float32, 1, 4, 4, 1)))

		// Create kernel [3, 3, 1, 1] - HWIO format
		kernel := must1(fn.NamedInput("kernel", shapes.Make(dtypes.Float32, 3, 3, 1, 1)))

		// Create dynamic padding tensor [2, 2] for 2 spatial dims with [low, high] each
		padding := must1(fn.ConstantFromFlatAndDimensions([]int64{1, 1, 1, 1}, 2, 2))

		// Dynamic conv with bounds
		convolved := must1(DynamicConv(input, kernel, padding,
			[]int{1, 1},       // strides
			[]int{1, 1},       // inputDilations
			[]int{1, 1},       // kernelDilations
			0, 3, []int{1, 2}, // input: batch=0, channels=3, spatial=[1,2]
			2, 3, []int{0, 1}, // kernel: inChannels=2, outChannels=3, spatial=[0,1]
			0, 3, []int{1, 2}, // output: batch=0, channels=3, spatial=[1,2]
			1, 1, // channelGroupCount, batchGroupCount
			0, 0, // precision (DEFAULT)
			[]int{1, 4, 4, 1})) // bounds

		if err := fn.Return(convolved); err != nil {
			t.Fatalf("expected no error, got %v", err)
		}

		program := string(must1(b.Build()))
		fmt.Printf("%s program:\n%s\n", t.Name(), program)

		if !strings.Contains(program, "stablehlo.dynamic_conv") {
			t.Fatal("expected program to contain dynamic_conv operation")
		}
		if !strings.Contains(program, "dimension_numbers") {
			t.Fatal("expected program to contain dimension_numbers attribute")
		}
	})

}
