# The README's commands. Each target first installs missing Debian packages.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)

# ccache shares objects between checkouts (CI clones into a new folder each run).
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
export CCACHE_MAXSIZE ?= 5G

.PHONY: all deps configure build test bench demo clean format
all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@ninja -C $(BUILD) -j $(JOBS)

# Builds once, runs every ctest label (unit, integration, e2e, vm), then the unit
# tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
test: deps
	@BUILD=$(BUILD) ASAN_BUILD=$(ASAN_BUILD) JOBS=$(JOBS) scripts/run-tests

bench: build
	@scripts/run-benches $(BUILD)

demo: build
	@scripts/demo $(BUILD)

format:
	@git ls-files '*.cc' '*.h' '*.proto' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
