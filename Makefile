# The README's commands. Each target first installs missing Debian packages.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)

# ccache shares objects between checkouts (CI clones into a new folder each run).
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
export CCACHE_MAXSIZE ?= 5G

.PHONY: all deps configure build test fuzz bench demo clean format package soak
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 120
all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@ninja -C $(BUILD) -j $(JOBS)

# Builds once, runs every ctest label (unit, integration, vm, then e2e four at a
# time in the background), and meanwhile at nice 5 the unit tests under
# AddressSanitizer + UndefinedBehaviorSanitizer, the tsan label under
# ThreadSanitizer and the fuzz targets (scripts/run-tests).
test: deps
	@BUILD=$(BUILD) ASAN_BUILD=$(ASAN_BUILD) FUZZ_BUILD=$(FUZZ_BUILD) JOBS=$(JOBS) scripts/run-tests

# Every libFuzzer target for FUZZ_SECONDS each (make test runs them for 5 s).
# Crashers are kept under tests/fuzz/corpus/NAME/ as regression inputs.
fuzz: deps
	@CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DROCETUNE_FUZZ=ON \
	  -DROCETUNE_FUZZ_SECONDS=$(FUZZ_SECONDS) >/dev/null
	@ninja -C $(FUZZ_BUILD) -j $(JOBS) fuzz_targets
	@cd $(FUZZ_BUILD) && ctest -L fuzz --output-on-failure --timeout 0

# Debian packages of the built binaries (CPack, no second build) in $(BUILD)/packages/.
package: build
	@rm -rf $(BUILD)/packages
	@cd $(BUILD) && cpack -B $(CURDIR)/$(BUILD)/packages >packages.log 2>&1 || { cat packages.log; exit 1; }
	@rm -rf $(BUILD)/packages/_CPack_Packages
	@ls -1 $(BUILD)/packages/*.deb

# The controller soak of tests/e2e/controller_soak_e2e_test: SOAK_SECONDS (10
# minutes) at SOAK_RATE Reports/s over SOAK_STREAMS streams, by default twice
# the benchmark's paced target (40,000 Reports/s over 10,000 streams). A
# 2-core machine does not sustain that (about 51-65 µs of controller CPU per
# Report): pass a lower SOAK_RATE there. Prints a FAULT soak line with the
# rate achieved, RSS growth and the telemetry-window and host maps.
SOAK_SECONDS ?= 600
SOAK_RATE ?= 40000
SOAK_STREAMS ?= 10000
soak: configure
	@ninja -C $(BUILD) -j $(JOBS) controller_soak_e2e_test
	@ROCETUNE_SOAK_SECONDS=$(SOAK_SECONDS) ROCETUNE_SOAK_STREAMS=$(SOAK_STREAMS) \
	  ROCETUNE_SOAK_RATE=$(SOAK_RATE) $(BUILD)/tests/e2e/controller_soak_e2e_test

bench: build
	@scripts/run-benches $(BUILD)

demo: build
	@scripts/demo $(BUILD)

format:
	@git ls-files '*.cc' '*.h' '*.proto' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) build-tsan
