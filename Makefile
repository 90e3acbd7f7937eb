# moerun — plain Makefile. Everything goes to $(BUILD) (build/ by default).
#   make                 library + CLI (build/moerun)
#   make test            unit tier, then the tests that read ../shared; ends with "N passed, N failed"
#   make test-unit       only the tests that need nothing but this checkout (tests/run.sh)
#   make test SANITIZE=1 the same suite under ASan+UBSan (objects in build/san)
#   make sanitize        shorthand for the line above
#   make tsan            the multi-threaded API tests under ThreadSanitizer (build/tsan)
#   make test-aarch64    cross-build for ARM64 (build/aarch64) and run the suite under qemu-aarch64
# Cross builds: make CROSS=aarch64-linux-gnu- (objects in build/aarch64 unless BUILD is given).
CROSS   ?=
ifneq ($(CROSS),)
CC      := $(CROSS)gcc
BUILD   ?= build/$(firstword $(subst -, ,$(CROSS)))
endif
CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
SANITIZE ?=

CFLAGS_COMMON := -std=c11 $(OPT) -g -Wall -Wextra -Werror -Wno-unused-function \
                 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -Isrc -pthread -MMD -MP
LDLIBS  := -lm -pthread -lpcre2-8

# make MPI=1: expert parallelism over MPI (mpirun -np N build/mpi/moerun ... --ep; docs/MULTIHOST.md).
# The default build has no MPI dependency (src/ep/ep_none.c refuses --ep).
MPI ?=
ifeq ($(MPI),1)
CC      := mpicc
BUILD   := build/mpi
EP_SKIP := src/ep/ep_none.c
else
EP_SKIP := src/ep/ep_mpi.c
endif

ifeq ($(SANITIZE),thread)
BUILD   := build/tsan
CFLAGS_COMMON += -O1 -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS += -fsanitize=thread
endif
ifeq ($(SANITIZE),1)
BUILD   := build/san
CFLAGS_COMMON += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

# One instruction set per file: *_avx2.c and *_avx512.c (x86-64), *_neon.c and *_dotprod.c (AArch64)
# get their ISA flags, nothing else does; a build compiles the ISA files of its target only.
ISA_AVX2   := -mavx2 -mfma -mf16c -mbmi2
ISA_AVX512 := $(ISA_AVX2) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16
ISA_NEON   := -march=armv8-a
ISA_DOTPROD := -march=armv8.2-a+dotprod
# the target triple; before scripts/deps.sh has installed the compiler (a fresh machine, or MPI=1's
# mpicc, or the cross gcc) from the CROSS prefix or this machine, so the ISA files are still picked
MACHINE   := $(or $(shell $(CC) -dumpmachine 2>/dev/null),$(notdir $(patsubst %-,%,$(CROSS))),$(shell uname -m))
ISA_ALL   := avx2 avx512 neon dotprod
ISA_HERE  := $(if $(filter x86_64%,$(MACHINE)),avx2 avx512,$(if $(filter aarch64%,$(MACHINE)),neon dotprod))
ISA_NOT_HERE := $(foreach i,$(filter-out $(ISA_HERE),$(ISA_ALL)),%_$(i).c)

LIB_SRC   := $(filter-out $(EP_SKIP) $(ISA_NOT_HERE),$(sort $(shell find src -name '*.c')))
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TEST_SRC  := $(sort $(wildcard tests/test_*.c))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
LIB       := $(BUILD)/libmoerun.a
FUZZ_REPLAY := $(patsubst tests/fuzz/fuzz_%.c,$(BUILD)/fuzz-replay/fuzz_%,$(wildcard tests/fuzz/fuzz_*.c))

.SECONDARY:
.PHONY: deps all test test-unit test-clients test-agents sanitize tsan alloc-walk clean fuzz fuzz-build bench bench-kernels bench-model bench-approx bench-mask bench-vs-llama bench-dot demo
all: $(BUILD)/moerun

# Missing Debian packages are installed (or the exact apt-get command printed) before anything is
# compiled: every object waits for this step. MOERUN_DEPS=skip turns it off (scripts/deps.sh).
# Groups: test when testing, mpi for MPI=1, fuzz when fuzzing, aarch64 for the ARM64 cross targets
# (asked by the top-level make before it starts the CROSS sub-make, and by that sub-make).
DEPS_GROUPS := build $(if $(filter test test-unit test-aarch64 sanitize,$(MAKECMDGOALS)),test) \
    $(if $(filter 1,$(MPI)),mpi) $(if $(filter fuzz fuzz-build,$(MAKECMDGOALS)),fuzz) \
    $(if $(or $(filter aarch64 test-aarch64 bench-aarch64-insn,$(MAKECMDGOALS)),$(filter aarch64-%,$(CROSS))),aarch64)
deps:
	@sh scripts/deps.sh $(DEPS_GROUPS)

$(BUILD)/obj/%_avx2.o: XFLAGS := $(ISA_AVX2)
$(BUILD)/obj/%_avx512.o: XFLAGS := $(ISA_AVX512)
$(BUILD)/obj/%_neon.o: XFLAGS := $(ISA_NEON)
$(BUILD)/obj/%_dotprod.o: XFLAGS := $(ISA_DOTPROD)

$(BUILD)/obj/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(XFLAGS) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/moerun: $(TOOL_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

test-bins: deps $(BUILD)/moerun $(TEST_BIN) $(FUZZ_REPLAY)

# the MPI build too when Open MPI is there (tests/cli_ep.sh; skipped otherwise)
test: test-bins
	@if [ "$(MPI)" != 1 ] && command -v mpicc >/dev/null 2>&1; then $(MAKE) --no-print-directory MPI=1 SANITIZE= build/mpi/moerun >/dev/null; fi
	@sh tests/run.sh $(BUILD)

test-unit: test-bins
	@sh tests/run.sh $(BUILD) unit

# Benchmarks (not tests): bench/*.c may use internal headers. Run on a quiet machine.
#   make bench-kernels BENCH_ARGS="--types q4_K,q8_0 --threads 2"
$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

bench-kernels: $(BUILD)/bench/bench_kernels
	nice -n 10 $(BUILD)/bench/bench_kernels $(BENCH_ARGS)

# single-thread in-cache kernel speed (ns per 256 weights), per ISA: BENCH_ARGS="--types iq3_s --isa avx2,avx512"
bench-dot: $(BUILD)/bench/bench_dot
	nice -n 10 $(BUILD)/bench/bench_dot $(BENCH_ARGS)

# mr_matmul vs llama.cpp's CPU MUL_MAT, side by side (bench/vs_llama.sh; LLAMA=llama.cpp build tree)
bench-vs-llama: $(BUILD)/bench/bench_mm
	sh bench/vs_llama.sh $(BUILD)

# a coding agent's conversation replayed against the server (bench/agent_replay.py; docs/SERVER.md
# "Prompt cache"): make bench-replay MODEL=../shared/models/tiny-deepseek4.gguf REPLAY_ARGS="--scale 0.5"
#   SERVER_ARGS="-c 16384 --parallel 2 --cache-ram 256M --cache-dir /tmp/replay-cache"
.PHONY: bench-replay
bench-replay: $(BUILD)/moerun
	python3 bench/agent_replay.py --moerun $(BUILD)/moerun --model $(MODEL) $(REPLAY_ARGS) -- $(SERVER_ARGS)

# the replay's bounds checked (--check: every request within its bound, the restart's first request
# reads only its new tokens and <= 5 % of its prompt, RAM and disk bounds) on tiny-deepseek4 and
# tiny-qwen3moe at --scale 1 (prompts of 8-16k tokens); about a minute on 2 idle cores
.PHONY: bench-replay-check
bench-replay-check: $(BUILD)/moerun
	for m in tiny-deepseek4 tiny-qwen3moe; do \
	  python3 bench/agent_replay.py --moerun $(BUILD)/moerun --model $(or $(MR_SHARED),../shared)/models/$$m.gguf --check -- \
	    -t 2 -c 32768 --parallel 2 --cache-ram 512M --cache-dir /tmp/moerun-replay-check.$$$$ --cache-disk 2G || exit 1; \
	  rm -rf /tmp/moerun-replay-check.$$$$; done

# paged inference on a V4-Flash-width model larger than the run's memory limit (bench/paged_scale.sh;
# docs/PAGING.md): make bench-paged MODEL=/work/models/ds4-12L.gguf ARENAS="4G 6G 10G 16G"
.PHONY: bench-paged
bench-paged: $(BUILD)/moerun $(BUILD)/bench/bench_io
	BUILD=$(BUILD) sh bench/paged_scale.sh

# whole models vs llama-bench, side by side (bench/compare_llama.sh; docs/PERFORMANCE.md):
#   make bench-model MODELS="/work/models/q30-12-q4_0.gguf" BENCH_ARGS="-p 512 -n 128 -t 2"
bench-model: $(BUILD)/moerun
	MOERUN=$(BUILD)/moerun sh bench/compare_llama.sh $(BENCH_ARGS) $(MODELS)

# MoE approximations: CPU ms/token of decode and prefill per setting (docs/APPROX.md)
bench-approx: $(BUILD)/bench/bench_approx
	nice -n 10 $(BUILD)/bench/bench_approx $(BENCH_ARGS)

# JSON masks (json_schema, forced tool calls): mask time per token vs a plain decode step (docs/SERVER.md)
bench-mask: $(BUILD)/bench/bench_mask
	nice -n 10 $(BUILD)/bench/bench_mask $(BENCH_ARGS)

# ARM64 on an x86-64 Debian machine: gcc-aarch64-linux-gnu, qemu-user, libpcre2-dev:arm64 (the
# deps.sh group aarch64 installs them, adding arm64 to dpkg's architectures; QEMU_AARCH64 below is
# expanded after that). AARCH64_TESTS picks the test binaries and CLI scripts run under the emulator: by default (all) every test of `make test` but AARCH64_SKIP: cli_ep.sh, whose MPI
# runs need an MPI build (build/mpi, x86 here: no arm64 MPI library is installed). The emulator is
# 10-50x slower than native: ~25 CPU-minutes for the suite (41 with AARCH64_FULL=1), hours of
# wall time on a loaded machine (README: what was run, how long it took). AARCH64_TESTS="test_simd test_logits" runs
# only those.
AARCH64_BUILD ?= build/aarch64
# without -L when the arm64 libc is installed (multiarch, as libpcre2-dev:arm64 brings it): the cross
# toolchain's loader with the multiarch libc.so (another build) hangs in pthread_create
QEMU_AARCH64  ?= qemu-aarch64 $(if $(wildcard /lib/ld-linux-aarch64.so.1),,-L /usr/aarch64-linux-gnu)
AARCH64_TESTS ?= all
AARCH64_SKIP  ?= cli_ep
# AARCH64_FULL=1: also the kjv-moe perplexity golden over all 224 chunks (cli_ppl.sh), ~16 more
# CPU-minutes of qemu; by default it runs 8 chunks there (crashes, memory) and reports a skip
AARCH64_FULL  ?=
.PHONY: test-bins aarch64 test-aarch64 bench-aarch64-insn
aarch64: deps
	$(MAKE) CROSS=aarch64-linux-gnu- BUILD=$(AARCH64_BUILD) $(AARCH64_BUILD)/moerun

test-aarch64: deps
	$(MAKE) CROSS=aarch64-linux-gnu- BUILD=$(AARCH64_BUILD) test-bins
	MR_RUNNER="$(QEMU_AARCH64)" MR_EMU_FULL="$(AARCH64_FULL)" MR_ONLY="$(filter-out all,$(AARCH64_TESTS))" MR_SKIP="$(AARCH64_SKIP)" sh tests/run.sh $(AARCH64_BUILD)

# executed AArch64 instructions per 256 weights of the MoE types' kernels (scalar, neon, dotprod),
# counted by the emulator, not timed (bench/aarch64_insn.sh): BENCH_TYPES="q4_0 iq3_s" for some
bench-aarch64-insn: deps
	$(MAKE) CROSS=aarch64-linux-gnu- BUILD=$(AARCH64_BUILD) $(AARCH64_BUILD)/bench/bench_insn
	QEMU_AARCH64="$(QEMU_AARCH64)" nice -n 10 sh bench/aarch64_insn.sh $(AARCH64_BUILD) "$(BENCH_TYPES)"

sanitize:
	$(MAKE) test SANITIZE=1

# ThreadSanitizer on the tests that use the library from several threads of their own (objects in
# build/tsan; not part of make test): a reported race fails the run (exit code 66).
TSAN_TESTS ?= test_approx_threads test_pager_faults test_batch_eval test_server_abuse
tsan:
	$(MAKE) SANITIZE=thread $(TSAN_TESTS:%=build/tsan/tests/%)
	for t in $(TSAN_TESTS); do TSAN_OPTIONS="halt_on_error=1 exitcode=66 $$TSAN_OPTIONS" \
	    MR_SHARED=$(or $(MR_SHARED),../shared) build/tsan/tests/$$t || exit 1; done

# Allocation-failure walk: every allocation of load, session, prefill and decode of a tiny model of
# every architecture (resident and paged) made to fail in turn, under ASan/LSan
# (tests/test_alloc_fail.c; `make test` runs a sample of the same walk).
alloc-walk:
	$(MAKE) SANITIZE=1 build/san/tests/test_alloc_fail
	MR_ALLOC_WALK=full MR_SHARED=$(or $(MR_SHARED),../shared) build/san/tests/test_alloc_fail

# constrained replies at scale: 100 forced tool calls and 100 json_schema replies per model (kjv-moe,
# tiny-deepseek4) through tests/cli_server_schema.sh (make test runs it with a few of each)
test-agents: $(BUILD)/moerun
	MOERUN=$(BUILD)/moerun MR_AGENT_N=100 MR_SHARED=$(or $(MR_SHARED),../shared) sh tests/cli_server_schema.sh

# the server test with the real npm clients (needs node, npm and the npm registry; installs outside the repo)
MR_NPM_DIR ?= /tmp/moerun-npm
test-clients: $(BUILD)/moerun
	@test -d $(MR_NPM_DIR)/node_modules/openai -a -d $(MR_NPM_DIR)/node_modules/@anthropic-ai/sdk || \
	    npm install --silent --no-audit --no-fund --prefix $(MR_NPM_DIR) openai @anthropic-ai/sdk
	MOERUN=$(BUILD)/moerun MR_NPM_DIR=$(MR_NPM_DIR) sh tests/cli_server_clients.sh

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- fuzzing every parser (clang libFuzzer + ASan/UBSan): make fuzz [FUZZ_SECONDS=600] [FUZZ_TARGETS=...] ----
# Library objects in build/fuzz; each target (tests/fuzz/fuzz_NAME.c) runs FUZZ_SECONDS with its working
# corpus in build/fuzz/corpus/NAME, seeds from tests/fuzz/corpus/NAME, crashes as build/fuzz/crash-NAME-*
# (tests/fuzz/run.sh). Keep a fixed crash in tests/fuzz/crashes/NAME: `make test` replays those and
# the seeds through the same targets built without libFuzzer (build/fuzz-replay, tests/cli_fuzz.sh).
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= gguf http json tokenizer chat sampler approx request jsonp schema
FUZZ_BUILD   := build/fuzz
FUZZ_CFLAGS  := -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
fuzz-build: deps $(LIB)
	$(MAKE) --no-print-directory CC=clang BUILD=$(FUZZ_BUILD) CFLAGS="$(FUZZ_CFLAGS)" $(FUZZ_BUILD)/libmoerun.a
	for t in $(FUZZ_TARGETS); do \
	    clang $(CFLAGS_COMMON) $(FUZZ_CFLAGS) -fsanitize=fuzzer tests/fuzz/fuzz_$$t.c $(FUZZ_BUILD)/libmoerun.a \
	        -o $(FUZZ_BUILD)/fuzz_$$t $(LDLIBS) || exit 1; done
	$(CC) $(CFLAGS_COMMON) tests/fuzz/make_seeds.c $(LIB) -o $(FUZZ_BUILD)/make_seeds $(LDLIBS)
	@mkdir -p $(FUZZ_BUILD)/seeds
	$(FUZZ_BUILD)/make_seeds $(FUZZ_BUILD)/seeds $(or $(MR_SHARED),../shared)
fuzz: fuzz-build
	MR_SHARED=$(or $(MR_SHARED),../shared) sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The fuzz targets linked with a plain main (tests/fuzz/replay.c) for `make test`.
$(BUILD)/fuzz-replay/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/obj/tests/fuzz/replay.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The main job on any machine, no download: synthesize a 343 MiB random-weight MoE model (qwen3moe
# layout, 6 layers x 64 experts) and generate with a 64 MiB expert budget (a fifth of its experts),
# printing the pager summary. The text is noise (random weights); the point is the paging.
DEMO_MODEL ?= $(BUILD)/demo-qwen3moe.gguf
demo: $(BUILD)/moerun
	@test -f $(DEMO_MODEL) || $(BUILD)/moerun synth -o $(DEMO_MODEL) --shape qwen3-small --layers 6 --mix q4_0
	$(BUILD)/moerun inspect $(DEMO_MODEL) | tail -n 2
	$(BUILD)/moerun run -m $(DEMO_MODEL) -p "Once upon a time" -n 64 --seed 1 --ram-budget 64M
