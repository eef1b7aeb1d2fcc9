# Convenience front end over CMake. `make test` is what CI runs.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)

.PHONY: all build test test-asan test-tsan test-arm64 test-x86-levels demo bench clean fuzz fuzz-build fuzz-smoke install

all: build

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# ctest shows a passing test's output only with -V: pytest's closing line (python_tests)
# is echoed from ctest's log so every run shows what the Python suite ran and skipped.
test: build
	cd $(BUILD) && { ctest --output-on-failure -j $(JOBS); rc=$$?; \
	  grep -hE '^=+ .*(passed|failed|skipped|error).* in [0-9.]+s' Testing/Temporary/LastTest.log | sed 's/^/python_tests: /'; \
	  exit $$rc; }

test-asan:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DAF_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

# The thread-safety promises of include/aneforge.h (and the pool, GEMM and training
# paths that use threads) under ThreadSanitizer.
test-tsan:
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DAF_SANITIZE_THREAD=ON >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -R '^(test_threads|test_pool|test_gemm|test_ops|test_train|test_lifetime)$$'

# The arm64 build (NEON GEMM kernels, arm64 feature detection, GCC's arm64 code) cross-
# compiled and its tests run under qemu-aarch64, on an x86-64 machine. Needs
# `apt-get install -y gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user` and an arm64
# zlib where the toolchain file's find root sees it (zlib1g-dev:arm64 is multiarch, under
# /usr/lib/aarch64-linux-gnu: not checked here since zlib became required); the tests
# that run the CLI also need qemu-aarch64 in binfmt_misc (tests/qemu_binfmt.sh, root).
# About 5 minutes to build and 20 to test on 2 cores (cli_train_ane alone 15).
test-arm64:
	@cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build-arm64 -j $(JOBS)
	@sh tests/qemu_binfmt.sh
	cd build-arm64 && QEMU_LD_PREFIX=/usr/aarch64-linux-gnu ctest --output-on-failure -j $(JOBS)

# The suite's programs on older x86-64 CPUs under qemu-x86_64 (needs qemu-user): Haswell
# (AVX2+FMA kernels and clones) and Nehalem (no AVX: the baseline paths); the machine's
# own CPU only ever runs its own kernels. About 10 minutes each on 2 cores.
test-x86-levels: build
	python3 tests/qemu_cpu.py $(BUILD) Haswell $(JOBS)
	python3 tests/qemu_cpu.py $(BUILD) Nehalem $(JOBS)

# Trains the MLP for 5 epochs on MNIST: the copy shipped in data/mnist/ (gzip'd,
# verified by SHA-256 as it is read), so no network is needed; `data info` says where
# the data comes from.
demo: build
	./$(BUILD)/aneforge data info | sed -n '1,4p'
	./$(BUILD)/aneforge train mlp --data mnist --epochs 5

bench: build
	./$(BUILD)/aneforge bench ops

# libFuzzer targets, one per reader of untrusted bytes (needs clang with libFuzzer):
# fuzz/fuzz_<name>.c, seeds in tests/corpus/<name>/, an optional fuzz/<name>.dict.
# `make fuzz` runs each for FUZZ_TIME seconds, one after another, growing
# build-fuzz/corpus-<name>; `make fuzz-smoke` only replays the seed corpora.
FUZZ_TIME ?= 600
FUZZ_TARGETS = $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_FLAGS = -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined

fuzz-build:
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DAF_USE_BLAS=OFF \
	  -DCMAKE_C_FLAGS="$(FUZZ_FLAGS) -fsanitize=fuzzer-no-link" >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target aneforge_static
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzz_$$t"; \
	  clang $(FUZZ_FLAGS) -fsanitize=fuzzer -Iinclude -Isrc fuzz/fuzz_$$t.c build-fuzz/libaneforge.a -lz -lm -lpthread \
	    -o build-fuzz/fuzz_$$t || exit 1; \
	done

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus-$$t; \
	  dict=; [ -f fuzz/$$t.dict ] && dict=-dict=fuzz/$$t.dict; \
	  echo "./build-fuzz/fuzz_$$t -max_total_time=$(FUZZ_TIME) $$dict build-fuzz/corpus-$$t tests/corpus/$$t"; \
	  ./build-fuzz/fuzz_$$t -max_total_time=$(FUZZ_TIME) $$dict build-fuzz/corpus-$$t tests/corpus/$$t || exit 1; \
	done

# Every seed once through every target (seconds), for CI where clang is there; `make
# test` replays the same seeds through the same targets with any compiler (fuzz_seeds_*).
fuzz-smoke: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  ./build-fuzz/fuzz_$$t -runs=0 tests/corpus/$$t >build-fuzz/smoke-$$t.log 2>&1 \
	    && echo "fuzz_$$t: $$(ls tests/corpus/$$t | wc -l) seeds pass" \
	    || { cat build-fuzz/smoke-$$t.log; echo "fuzz_$$t: FAILED on its seeds"; exit 1; }; \
	done

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz build-arm64 build-clang

# Installs the header, libraries, CLI, pkg-config file and CMake package under PREFIX.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)
