# Remit developer entry points. Everything real lives in CMake; this file only names the build
# trees and the order of steps. Every target first runs scripts/install-deps, which installs
# missing Debian packages and is silent and fast when nothing is missing.
#
#   make demo          build, then check and format-check examples/hello
#   make test          build, then run every test (ctest)
#   make sanitize      Debug build with ASan+UBSan in build/asan, then ctest
#   make fuzz          libFuzzer harnesses with clang in build/fuzz
#   make bench         build, then run the benchmarks, the side-by-side comparison with Lua, LuaJIT and CPython,
#                      the fleet's throughput and latencies on a private PostgreSQL (bench/fleet/run.py),
#                      and the load driver (a minute per scenario; docs/testing.md, "Load")
#   make clean         remove the build trees this file creates
#
# Variables: WERROR=ON turns warnings into errors (.ci/run sets it); JOBS=N (default 2).

WERROR ?= OFF
JOBS ?= 2

COMMA := ,

RELEASE_DIR := build/release
ASAN_DIR := build/asan
FUZZ_DIR := build/fuzz

# --log-level=WARNING keeps configure quiet unless something is wrong.
CMAKE_CONFIGURE := cmake -S . -G Ninja --log-level=WARNING -DREMIT_WERROR=$(WERROR)

# $(call configure,DIR,DESCRIPTION,COMMAND): runs COMMAND (which configures DIR) only when DIR has
# no build.ninja yet or was last configured with a different command (say, another WERROR). Ninja
# itself re-runs CMake when a CMakeLists.txt changes.
define configure
	@stamp='$(1)/.make-configure'; cmd='$(strip $(3))'; \
	if [ ! -f '$(1)/build.ninja' ] || [ "$$(cat "$$stamp" 2>/dev/null)" != "$$cmd" ]; then \
	    echo "==> configure $(1) ($(2))"; \
	    eval "$$cmd" && echo "$$cmd" > "$$stamp"; \
	fi
endef

CTEST := ctest --output-on-failure -j$(JOBS)

# Sanitizer reports must be readable and must fail the test that triggered them.
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:check_initialization_order=1 \
                 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.DEFAULT_GOAL := build
.PHONY: deps build test demo sanitize fuzz bench clean

deps:
	@scripts/install-deps

build: deps
	$(call configure,$(RELEASE_DIR),Release$(COMMA) WERROR=$(WERROR),$(CMAKE_CONFIGURE) -B $(RELEASE_DIR) -DCMAKE_BUILD_TYPE=Release)
	@echo "==> build $(RELEASE_DIR)"
	@cmake --build $(RELEASE_DIR) -j$(JOBS)

test: deps build
	@echo "==> test $(RELEASE_DIR)"
	@$(CTEST) --test-dir $(RELEASE_DIR)

demo: deps build
	@echo "==> demo"
	@scripts/demo

sanitize: deps
	$(call configure,$(ASAN_DIR),Debug$(COMMA) ASan+UBSan$(COMMA) WERROR=$(WERROR),$(CMAKE_CONFIGURE) -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DREMIT_SANITIZE=ON)
	@echo "==> build $(ASAN_DIR)"
	@cmake --build $(ASAN_DIR) -j$(JOBS)
	@echo "==> test $(ASAN_DIR)"
	@$(SANITIZER_ENV) $(CTEST) --test-dir $(ASAN_DIR)

fuzz: deps
	$(call configure,$(FUZZ_DIR),clang$(COMMA) libFuzzer$(COMMA) WERROR=$(WERROR),CC=clang CXX=clang++ $(CMAKE_CONFIGURE) -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREMIT_FUZZ=ON -DREMIT_BUILD_TESTS=OFF -DREMIT_BUILD_BENCH=OFF)
	@echo "==> build $(FUZZ_DIR)"
	@cmake --build $(FUZZ_DIR) -j$(JOBS)
	@echo "fuzz harnesses are in $(FUZZ_DIR)/tests/fuzz"

bench: deps build
	@echo "==> bench"
	@$(RELEASE_DIR)/bench/remit_bench_frontend
	@$(RELEASE_DIR)/bench/remit_bench_vm
	@$(RELEASE_DIR)/bench/remit_bench_broker
	@$(RELEASE_DIR)/bench/remit_bench_sha256
	@python3 bench/compare/run.py --remitvm $(RELEASE_DIR)/cli/remitvm --remitc $(RELEASE_DIR)/cli/remitc
	@$(RELEASE_DIR)/bench/remit_bench_load --remitvm $(RELEASE_DIR)/cli/remitvm
	@python3 bench/fleet/run.py --remitvm $(RELEASE_DIR)/cli/remitvm

clean:
	rm -rf $(RELEASE_DIR) $(ASAN_DIR) $(FUZZ_DIR)
