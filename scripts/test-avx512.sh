#!/usr/bin/env bash
# The AVX-512 code paths of the vendored backend (third_party/compute), tested on an emulated
# AVX-512 CPU (scripts/avx512-emu.sh: Bochs 2.7's Tiger Lake model) for machines without one,
# as every dev and CI machine here is. `make test-avx512` runs it; `make test` does not (the first
# run builds a small guest kernel, about 7 minutes; later runs take about 7 minutes).
#
# Each test binary is built static (CGO_ENABLED=0) and run in the guest with -test.v; a test named
# below passes only when it PASSed there: a SKIP (the guest without AVX-512F, or without XGETBV's
# XINUSE) fails this script, so it never passes by not testing.
#
# GOEXPERIMENT=simd,nogreenteagc: Go 1.26's default garbage collector scans with AVX-512 where the
# CPU has it, and under Bochs 2.7 that corrupts the heap ("fatal error: found pointer to free
# object" in GoMLX's TestAVX512, a hang in another test; with the older collector the same tests
# pass). The same runtime runs on real AVX-512 Xeons (the GPU host's CPU); this is the emulator's,
# and the tests are about the backend's kernels, not the collector.
#
#   matmul       TestAVX512AsmKernel (patch 15's kernel bit for bit against GoMLX's Go one, and
#                against float64 sums), TestAVX512SmallTransposed, and GoMLX's own TestAVX512
#                (packing, kernels and products in float32, float64, bfloat16 and float16;
#                about 2.5 minutes of the emulator)
#   vectorstate  TestClear: XINUSE's YMM and ZMM upper bits dirty after 256-bit code, clean after
#                vectorstate.Clear (patch 13)
#   ops          TestExecuteLeavesVectorStateClean on the avx512 kernel set
#   model        TestFixtureParity and TestBF16Compute: agentrl's model against HF's fixtures in
#                float32 and bf16 on the avx512 kernel set
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/test-avx512.XXXXXX")}
mkdir -p "$OUT"
failed=0

# check NAME DIR PACKAGE TESTS...: builds PACKAGE's test binary (in the module at DIR) and runs
# TESTS (exact names) under the emulator; each must report PASS. BUILD (an array) holds the
# build's environment and flags, EMU_ENV the emulator's.
check() {
	local name=$1 dir=$2 pkg=$3
	shift 3
	local regex
	regex="^($(
		IFS='|'
		echo "$*"
	))\$"
	echo "test-avx512: $name ($pkg): $*"
	# (a static cgo link warns about glibc's dlopen and user lookups, which these tests never call)
	if ! (cd "$dir" && env "${BUILD[@]}" go test -c -o "$OUT/$name.test" "${BUILD_FLAGS[@]}" "$pkg") > "$OUT/$name.build.log" 2>&1; then
		cat "$OUT/$name.build.log"
		echo "test-avx512: building $pkg's tests failed"
		failed=1
		return
	fi
	env "${EMU_ENV[@]}" scripts/avx512-emu.sh "$OUT/$name.test" -test.run "$regex" -test.v -test.count=1 > "$OUT/$name.out" 2>&1
	local rc=$?
	grep -E '^(--- |\s+\S+_test\.go:|PASS|FAIL|ok)' "$OUT/$name.out" | sed 's/^/  /'
	if [ "$rc" -ne 0 ]; then
		echo "test-avx512: $name exited $rc under the emulator (output: $OUT/$name.out)"
		failed=1
	fi
	local t
	for t in "$@"; do
		if ! grep -q -- "^--- PASS: $t " "$OUT/$name.out"; then
			echo "test-avx512: $t did not pass (a skip counts as a failure here)"
			failed=1
		fi
	done
}

# The vendored backend's tests: pure Go, built static without cgo.
BUILD=(GOEXPERIMENT=simd,nogreenteagc CGO_ENABLED=0)
BUILD_FLAGS=()
EMU_ENV=()
check matmul third_party/compute ./internal/gobackend/dot/matmul/ TestAVX512AsmKernel TestAVX512SmallTransposed TestAVX512
check vectorstate third_party/compute ./internal/vectorstate/ TestClear
check ops third_party/compute ./internal/gobackend/ops/ TestExecuteLeavesVectorStateClean

# The model against HuggingFace's fixtures, in float32 and bf16, on the avx512 kernel set (the
# backend registers it where the CPU has AVX-512): agentrl's engine/model links go-xla's PJRT
# loader, which needs cgo, so it is linked static through the C linker; the fixtures go in the
# guest at /testdata (the test reads ../../testdata from /prog). About 5 minutes of emulation.
BUILD=(GOEXPERIMENT=simd,nogreenteagc CGO_ENABLED=1)
BUILD_FLAGS=(-ldflags '-linkmode external -extldflags -static')
EMU_ENV=(AVX512_EMU_FILES=testdata/fixtures=/testdata/fixtures)
check model . ./engine/model/ TestFixtureParity TestBF16Compute

if [ "$failed" -eq 0 ]; then
	echo "test-avx512: every AVX-512 test passed on the emulated CPU (outputs in $OUT)"
fi
exit "$failed"
