# Tessera's entry points. `make demo` and `make test` do all the set-up on a fresh Debian 12
# machine: they install missing packages (scripts/install-deps.sh), configure and build.
BUILD_DIR   ?= build
ASAN_DIR    ?= build-asan
JOBS        ?= $(shell nproc)
CMAKE_FLAGS ?=
# Expanded when a configure step runs, after `deps` has installed ccache (with `:=` a fresh
# machine's first configure ran without it).
LAUNCHER     = $(shell command -v ccache >/dev/null 2>&1 && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# ccache keys on paths relative to the checkout, so every clone (CI clones afresh) shares hits.
export CCACHE_BASEDIR   ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

.PHONY: all deps build demo test test-release test-asan format format-check bench clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: | deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(LAUNCHER) $(CMAKE_FLAGS)

# Release build of the library, the `tessera` command, tests, examples and benchmarks.
build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: train a small transformer (reverse 12-digit strings) with a live progress
# line; writes runs/demo/model.safetensors and runs/demo/curve.svg, then prints samples.
demo: build
	./$(BUILD_DIR)/tessera train --out runs/demo

# Everything CI checks: formatting, the Release test suite, and core+ops+gemm+autograd+nn+
# distributed under ASan+UBSan.
test: deps format-check test-release test-asan

test-release: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900

$(ASAN_DIR)/build.ninja: | deps
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTESSERA_SANITIZE=ON \
	  -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_EXAMPLES=OFF $(LAUNCHER) $(CMAKE_FLAGS)

test-asan: deps $(ASAN_DIR)/build.ninja
	cmake --build $(ASAN_DIR) -j $(JOBS) --target tessera_tests_core tessera_tests_ops tessera_tests_gemm \
	  tessera_tests_autograd tessera_tests_nn tessera_tests_distributed
	cd $(ASAN_DIR) && ctest --output-on-failure -j $(JOBS) -L 'core|ops|gemm|autograd|nn|distributed' --timeout 1800

format:
	@git ls-files '*.h' '*.cpp' | xargs clang-format -i

format-check:
	@git ls-files '*.h' '*.cpp' | xargs clang-format --dry-run --Werror
	@echo "format-check: ok"

bench: build
	./$(BUILD_DIR)/tessera bench ops --quick

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR)
