# agentrl-tui — see README.md. Everything runs on the CPU (GoMLX "go" backend) unless a GPU is found.
GO        ?= go
BIN       ?= bin/agentrl-tui
RECIPE    ?= recipes/retool.yaml
# The whole suite must stay well inside CI's budget on a 2-core machine.
TEST_TIMEOUT ?= 14m
# GoMLX's Go backend has AVX2/AVX-512 matmul kernels behind Go's simd experiment, with a portable
# fallback; the binary measures which set is fastest on the CPU it runs on and restarts itself with
# it (see `agentrl-tui kernels`): ~3x faster training on an AVX-512 EPYC, while on an AVX-512 Intel
# Xeon the SIMD kernels decoded 2.6x and trained 1.4x slower than the portable ones.
export GOEXPERIMENT := simd

.PHONY: build run test bench lint fuzz clean builtin builtin-check

build:
	CGO_ENABLED=1 $(GO) build -o $(BIN) .

run: build
	./$(BIN) $(RECIPE)

# The tests run the CPU matrix kernels the binary chooses for this machine (`agentrl-tui kernels`:
# measured once per CPU model and cached in the user's cache folder): on some CPUs the SIMD kernels
# make every step several times slower. If choosing fails, the tests run the backend's default.
test: build
	$(GO) vet ./...
	@kenv=$$($(abspath $(BIN)) kernels --env) || { echo "make test: warning: choosing the CPU kernels failed; running the backend's default ones"; kenv=; }; \
	echo "$$kenv" | sed -n 's/^# /make test: kernels: /p'; \
	eval "$$kenv"; \
	echo "$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./..."; \
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	cd third_party/compute && $(GO) test -count=1 -run 'Transpose|BroadcastRuns|ReduceSumRuns|DotGeneral|AsmKernel|AsmDot|AVX2HalfSmall|SIMDBinary|ExpSlice|LogisticSlice|SoftmaxLastAxis|VectorState|VectorLoops|FeedWorkItems|LargeSplit|SmallHalfStays|TestClear|SliceRuns|PadRuns|HeldBytes|BucketLen|SaturateFromFullPool|PanelToOutput|LargePool|FreedLargeBuffers|ParallelElementwise|AVX2RouterAVX512GEMM|RowMaxVector' ./internal/gobackend/ ./internal/gobackend/ops/ ./internal/gobackend/workerspool/ ./internal/vectorstate/ ./internal/gobackend/dot/ ./internal/gobackend/dot/matmul/ ./internal/fastmath/ ./internal/gobackend/fusedops/
	# third_party/compute must be gomlx/compute as published plus the recorded patch series.
	third_party/patches.sh check

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Runs every fuzz target for FUZZTIME each (the issue asks for at least a minute).
FUZZTIME ?= 60s
fuzz:
	$(GO) test ./engine/tokenizer -run '^$$' -fuzz FuzzRoundTrip -fuzztime $(FUZZTIME)
	$(GO) test ./store/safetensors -run '^$$' -fuzz FuzzParseHeader -fuzztime $(FUZZTIME)

# Rebuilds the built-in model shipped in testdata/builtin, in six SFT stages (22 min on 2 cores): a
# BPE tokenizer and a 4-layer Qwen3-shaped model trained on executed tool-use demonstrations of task
# levels 0-1; then three continuations of it (same tokenizer) in which 30 %, then 50 %, of the
# demonstrations carry in their prompt the bridge thought the rules hinter writes for a flawed first
# attempt, so that the reference model reads hints (docs/experiments.md); then one on the
# recipe's levels, which adds the named operations (level 6): the taught words without a hint, and
# made-up words whose meaning only the hint's program gives; then one that teaches the model PRM's task
# beside solving (half of the examples judge an attempt played through the environment: a verdict per
# step as the environment checked it, the rules hinter's bridge thought or \boxed{-1}; the folder keeps
# the prompt, recipes/prm-builtin.txt, as prm_prompt.txt). Every stage is a function of its seed and
# the stage before: the same commands write the same weights (TestSFTIsReproducible). The CPU
# kernels are pinned because the sets sum in different orders: the AVX2 set, or on an AVX-512 CPU
# the same set with its large products on the AVX-512 kernel, which gives the same bits
# (device.AVX512GEMM); a CPU without AVX2 (or not x86) runs the portable kernels and writes a sibling,
# not the same bits. `make builtin-check` rebuilds into BUILTIN_TMP and compares it with the shipped
# folder byte for byte.
BUILTIN_TMP ?= $(or $(TMPDIR),/tmp)/agentrl-builtin
BUILTIN_OUT ?= testdata/builtin
BUILTIN_KERNELS = GOMLX_SIMD_AVX512=false GOMLX_SIMD_AVX512_GEMM=true GOMLX_SIMD_AVX2=true
BUILTIN_SFT = $(BUILTIN_KERNELS) ./$(BIN) sft --recipe $(RECIPE) --examples 4000 --backend go
builtin: build
	$(BUILTIN_SFT) --levels 0,1 --out $(BUILTIN_TMP)/base --steps 600
	$(BUILTIN_SFT) --levels 0,1 --init $(BUILTIN_TMP)/base --out $(BUILTIN_TMP)/hinted1 --steps 300 --lr 2e-3 --hint-share 0.3
	$(BUILTIN_SFT) --levels 0,1 --init $(BUILTIN_TMP)/hinted1 --out $(BUILTIN_TMP)/hinted2 --steps 300 --lr 1e-3 --hint-share 0.5 --seed 2
	$(BUILTIN_SFT) --levels 0,1 --init $(BUILTIN_TMP)/hinted2 --out $(BUILTIN_TMP)/hinted3 --steps 200 --lr 1e-3 --hint-share 0.5 --seed 3
	$(BUILTIN_SFT) --init $(BUILTIN_TMP)/hinted3 --out $(BUILTIN_TMP)/solver --steps 600 --lr 1e-3 --hint-share 0.5 --seed 4
	$(BUILTIN_SFT) --init $(BUILTIN_TMP)/solver --out $(BUILTIN_OUT) --steps 900 --lr 1e-3 --hint-share 0.5 --judge-share 0.5 --prm-prompt recipes/prm-builtin.txt --seed 5

builtin-check:
	$(MAKE) builtin BUILTIN_OUT=$(BUILTIN_TMP)/final
	@for f in model.safetensors tokenizer.json tokenizer_config.json config.json prm_prompt.txt; do \
		cmp $(BUILTIN_TMP)/final/$$f testdata/builtin/$$f || exit 1; done
	sha256sum testdata/builtin/model.safetensors $(BUILTIN_TMP)/final/model.safetensors

clean:
	rm -rf bin

# The GPU self-check (scripts/gpu-check.sh, not part of CI): on a machine with a GPU and JAX's CUDA
# plugin, every GPU figure of docs/ in one report, runs/gpu-check/<UTC time>/report.{json,md},
# in at most 10 minutes; exit code 2 at once, with doctor's explanation, where the GPU path is not ready.
.PHONY: gpu-check
gpu-check: build
	BIN=$(BIN) scripts/gpu-check.sh

# The GPU benchmarks of issue #49 (scripts/gpu-bench.sh, not part of CI): decode at batch 64 and 256
# on the 0.6B and 4B shapes against transformers' generate and the roofline, the second start through
# the compilation cache, one step of the seed's recipe at the 4B shape, the 4B update against PyTorch
# eager, then parity; runs/gpu-bench/<UTC time>/report.{json,md} in at most 10 minutes.
.PHONY: gpu-bench
gpu-bench: build
	BIN=$(BIN) scripts/gpu-bench.sh

# The AVX-512 paths of the vendored backend on an emulated AVX-512 CPU (scripts/test-avx512.sh, under
# scripts/avx512-emu.sh: Bochs's Tiger Lake model), for machines without one; not part of `make test`
# (the first run builds a small guest kernel, about 7 minutes; later runs take about 7 minutes).
.PHONY: test-avx512
test-avx512:
	scripts/test-avx512.sh

# This machine's CPU figures against PyTorch eager, both pinned to two cores (scripts/cpu-bench.sh:
# the kernel sets, RUNS × bench train and bench rollout), report in runs/cpu-bench/<UTC time>/.
.PHONY: cpu-bench
cpu-bench: build
	BIN=$(BIN) scripts/cpu-bench.sh
