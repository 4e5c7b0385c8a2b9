# redis-ratelimit: build, run and test.
#
#   make run     build the module and start redis-server with it (foreground, Ctrl-C stops)
#   make test    everything CI runs: fmt, clippy, unit + integration tests, redis-cli suite
#
# Both install what is missing on a fresh Debian/Ubuntu machine (scripts/deps.sh).
# `make help` lists every target.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build
# Steps run one after another even under `make -j` (two apt-get runs would fight over the lock).
.NOTPARALLEL:

CARGO  ?= cargo
MODULE := target/release/libredis_ratelimit.so
# Port for `make run` (redis.conf says 6379; `make run PORT=6380` overrides it).
PORT   ?= 6379

# rustup installs into ~/.cargo/bin, which a non-login shell (CI, sudo) may not have on PATH.
ifeq ($(shell command -v $(CARGO) 2>/dev/null),)
  ifneq ($(wildcard $(HOME)/.cargo/bin/cargo),)
    export PATH := $(HOME)/.cargo/bin:$(PATH)
  endif
endif

TEST_START := $(shell date +%s)

.PHONY: all help deps test-deps build run test fmt-check clippy cargo-test cli-test clean compare

all: build

help:
	@echo "make deps       install missing system packages (libclang-dev, redis-server, redis-tools)"
	@echo "make build      deps + cargo build --release  ->  $(MODULE)"
	@echo "make run        build, then redis-server redis.conf in the foreground (PORT=$(PORT))"
	@echo "make check      the everyday loop: fmt, clippy, unit tests, fuzz crate, integration + redis-cli suites on one server (< 5 min warm)"
	@echo "make test       deps, build, fmt --check, clippy, unit tests, a short fuzz run, the server matrix (integration + redis-cli suites on 12 servers), examples"
	@echo "make matrix     build, then the server matrix only (SERVERS=\"redis-8.6.3 valkey-8.1.1\" for some)"
	@echo "make cli-test   build, then only the redis-cli suite (tests/cli/run.sh)"
	@echo "make valkey-test  build, then the integration tests and redis-cli suite against Valkey 9.1.2 only"
	@echo "make clients-test   build, then the Python and Node client packages' suites"
	@echo "make examples-test  build, then only the examples' suites (scripts/examples-test.sh)"
	@echo "make bench      build, then the benchmark: timings, memory, instructions, growth (bench/bench.py; QUICK=1 short, CELL_SO=/path/libredis_cell.so adds redis-cell)"
	@echo "make instructions  build, then instructions per call under callgrind (bench/instructions.sh; CELL_SO as for bench)"
	@echo "make growth     build, then the growth table: RL.LOG/RL.ACQUIRE at limits 10..10,000, AOF, replica (bench/growth.py)"
	@echo "make fuzz       build, then libFuzzer on the pure layers + the command fuzzer (FUZZ_SECONDS=$(FUZZ_SECONDS) each)"
	@echo "make fuzz-ci    the short libFuzzer run for CI (8 s per target)"
	@echo "make valgrind   the module under valgrind in redis-server, driven by the tests; long churn run"
	@echo "make dist       build, then dist/: the stripped module, its sha256, the supported servers"
	@echo "make clean      cargo clean"

deps:
	@echo "==> deps: checking system packages and the Rust toolchain"
	@bash scripts/deps.sh

test-deps:
	@echo "==> deps: checking system packages, the Rust toolchain, rustfmt and clippy"
	@bash scripts/deps.sh --test

build: deps
	@echo "==> build: $(CARGO) build --release"
	$(CARGO) build --release
	@test -f $(MODULE) || { echo "build: error: $(MODULE) was not produced" >&2; exit 1; }

run: build
	@echo "==> run: checking that 127.0.0.1:$(PORT) is free"
	@bash scripts/check-port.sh $(PORT)
	@echo "==> run: redis-server redis.conf --port $(PORT)   (Ctrl-C to stop; try: redis-cli -p $(PORT) RL.GCRA user:1 5 1 1000)"
	redis-server redis.conf --port $(PORT)

# The test steps run in this order (each needs the release build first: a plain
# `cargo test` does not rebuild the cdylib the integration tests load). Tests build with
# the `itest` profile (Cargo.toml: release without LTO, several times faster to build).
test: test-deps build
	@echo "==> test: $(CARGO) fmt --check"
	$(CARGO) fmt --check
	@echo "==> test: $(CARGO) clippy --workspace --all-targets -- -D warnings"
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	@echo "==> test: $(CARGO) test --profile itest --lib (unit and property tests)"
	$(CARGO) test --profile itest --lib
	@echo "==> test: libFuzzer on the pure layers, 8 s per target (scripts/fuzz.sh: the state codec's closure under every write, tokens, algorithms, CL.THROTTLE)"
	bash scripts/fuzz.sh 8
	@echo "==> test: server matrix (scripts/matrix.sh: integration tests + redis-cli suite on Redis 7.0 to 8.6, Valkey 8.0 to 9.1)"
	bash scripts/matrix.sh
	@echo "==> test: client packages (scripts/clients-test-python.sh, scripts/clients-test-node.sh)"
	bash scripts/clients-test-python.sh
	bash scripts/clients-test-node.sh
	@echo "==> test: examples (scripts/examples-test.sh: apps on the client packages)"
	bash scripts/examples-test.sh
	bash scripts/other-clients-test.sh
	@echo "==> test: all passed in $$(( $$(date +%s) - $(TEST_START) )) s"

# The everyday loop (issue 25): fmt, clippy, unit and property tests, the fuzz crate built
# and run briefly, then the integration tests and the redis-cli suite on one server (the
# system's redis-server, or RL_SERVER=...). Under 5 minutes on 2 cores with a warm build;
# `make test` is CI (every server of the matrix).
.PHONY: check
check: test-deps build
	@echo "==> check: fmt, clippy"
	$(CARGO) fmt --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	@echo "==> check: the fuzz crate builds and runs (2 s per target)"
	bash scripts/fuzz.sh 2
	@echo "==> check: unit, property and integration tests, redis-cli suite on $${RL_SERVER:-redis-server}"
	$(CARGO) test --profile itest --tests
	bash tests/cli/run.sh
	@echo "==> check: all passed in $$(( $$(date +%s) - $(TEST_START) )) s"

# Single steps, for iterating (the same commands as in `test`).
fmt-check: test-deps
	$(CARGO) fmt --check

clippy: test-deps
	$(CARGO) clippy --workspace --all-targets -- -D warnings

cargo-test: build
	$(CARGO) test --profile itest

cli-test: build
	@echo "==> test: redis-cli suite (tests/cli/run.sh)"
	bash tests/cli/run.sh

# The integration tests and the redis-cli suite against chosen servers of the matrix only,
# e.g. `make matrix SERVERS="redis-8.6.3 valkey-8.1.1"` (default: all of them).
.PHONY: matrix valkey-test
matrix: test-deps build
	bash scripts/matrix.sh $(SERVERS)

# The integration tests and the redis-cli suite against Valkey 9 only.
valkey-test: test-deps build
	bash scripts/matrix.sh valkey-9.1.2

# The examples' suites (examples/python, examples/node) against a real server with the
# module; installs their dependencies (venv, npm ci) on first run.
.PHONY: clients-test examples-test
clients-test: build
	bash scripts/clients-test-python.sh
	bash scripts/clients-test-node.sh

.PHONY: examples-test
examples-test: build
	@echo "==> test: examples (scripts/examples-test.sh: Python and Node middleware)"
	bash scripts/examples-test.sh
	bash scripts/other-clients-test.sh

# Identical traffic through every algorithm on a live redis-server with the test clock;
# prints a table of what each admitted (examples/compare.rs).
compare: build
	@echo "==> compare: $(CARGO) run --release --example compare"
	$(CARGO) run --release --example compare

# Benchmark (issues 5 and 15): its own redis-server on a free 127.0.0.1 port; INCR, SET,
# SET PX, the floor module (bench/floor/floor.c), every RL.* rate command, CL.THROTTLE and
# the Lua scripts of bench/lua/ (admitted and refused path), redis-cell's CL.THROTTLE when
# CELL_SO=/path/libredis_cell.so is given; memory per caller on Redis 7.0 and Valkey 9;
# then bench/instructions.sh (with bench/issue25.py) and bench/growth.py, whose tables end
# the report.
# Measured on this 2-core machine shared with other work (load 8 to 16): 39 min, of which
# memory 19, timings 10, instructions 6.5, growth 3.5; `make bench QUICK=1` 15 min.
# Writes bench/results/<date>-<server>.{txt,json}, bench.png, instructions.txt, growth.txt
# (QUICK: -quick suffixes).
QUICK_FLAG = $(if $(filter-out 0 no,$(QUICK)), --quick)
CELL_FLAG  = $(if $(CELL_SO), --cell-so $(CELL_SO))

# Instructions per call under callgrind, each command vs INCR, SET PX, the floor and its Lua
# script: stable on a noisy machine (~6 min here under load). Writes bench/results/instructions.txt.
# Then issue 25's hot-path ratios against their targets (bench/issue25.py, ~1 min idle; alone:
# python3 bench/issue25.py [--quick]), written to bench/results/issue25.txt, and issue 26's
# policy figures (bench/issue26.py [--quick], ~1.5 min) to bench/results/issue26.txt.
.PHONY: instructions
instructions: build
	CELL_SO="$(CELL_SO)" bash bench/instructions.sh

# The growth table (issue 15): RL.LOG and RL.ACQUIRE at limits 10, 100, 1,000, 10,000 against
# the Lua scripts: instructions per call with the AOF off and on, bytes replicated and
# appended to the AOF per request (~3.5 min, QUICK=1 as long). Writes bench/results/growth.txt.
.PHONY: growth
growth: build
	python3 bench/growth.py$(QUICK_FLAG)

.PHONY: bench
bench: build
	@echo "==> bench: python3 bench/bench.py$(QUICK_FLAG)$(CELL_FLAG)"
	python3 bench/bench.py$(QUICK_FLAG)$(CELL_FLAG)

# Fuzzing (issue 6). `make fuzz`: every libFuzzer target of fuzz/ (scripts/fuzz.sh: state
# codec, lease tokens, algorithms, CL.THROTTLE) for FUZZ_SECONDS each, then the command
# fuzzer against a live server (tests/fuzz_commands.rs) for FUZZ_SECONDS. `make fuzz-ci`:
# the short libFuzzer run (about 35 s plus the first build); the command fuzzer already runs
# for 20 s inside `cargo test`.
FUZZ_SECONDS ?= 60
.PHONY: fuzz fuzz-ci valgrind
fuzz: build
	@echo "==> fuzz: libFuzzer targets, $(FUZZ_SECONDS) s each (scripts/fuzz.sh)"
	bash scripts/fuzz.sh $(FUZZ_SECONDS)
	@echo "==> fuzz: command fuzzer against redis-server, $(FUZZ_SECONDS) s (tests/fuzz_commands.rs)"
	RL_FUZZ_SECONDS=$(FUZZ_SECONDS) RL_FUZZ_SEED=$${RL_FUZZ_SEED:-random} $(CARGO) test --release --test fuzz_commands -- --nocapture

fuzz-ci: build
	@echo "==> fuzz-ci: libFuzzer targets, 8 s each (scripts/fuzz.sh)"
	bash scripts/fuzz.sh 8

# redis-server under valgrind with the module, driven by integration tests; then a churn
# of millions of calls (scripts/valgrind.sh; about 20 min).
valgrind: build
	@echo "==> valgrind: scripts/valgrind.sh"
	bash scripts/valgrind.sh

# A release for users: the stripped module, its SHA-256 and the servers it is tested on.
# dist/libredis_ratelimit.so, dist/libredis_ratelimit.so.sha256, dist/SUPPORTED.md.
.PHONY: dist
dist: build
	@echo "==> dist: strip $(MODULE) -> dist/libredis_ratelimit.so"
	mkdir -p dist
	strip --strip-all -o dist/libredis_ratelimit.so $(MODULE)
	cd dist && sha256sum libredis_ratelimit.so > libredis_ratelimit.so.sha256
	{ echo "# redis-ratelimit $$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1): supported servers"; echo; \
	  if [ -f target/matrix/compat.md ]; then echo "Tested by make test on this build's source:"; echo; cat target/matrix/compat.md; \
	  else echo "Redis 7.0 to 8.6 and Valkey 8.0 to 9.1 (run make test to produce the tested table)."; fi; } > dist/SUPPORTED.md
	@ls -l dist/libredis_ratelimit.so | awk '{print "dist: " $$5 " bytes"}'
	@cat dist/libredis_ratelimit.so.sha256

clean:
	@echo "==> clean: $(CARGO) clean"
	$(CARGO) clean
