#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer) of the module's pure layers, bounded in time.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
#   SECONDS   time per target (default 60; env FUZZ_SECONDS overrides)
#   TARGET    any of: state_decode token_parse algorithms cell_throttle (default: all)
#
# Env: FUZZ_SANITIZER=address also builds with AddressSanitizer (needs the unstable
# -Zsanitizer flag: allowed here through RUSTC_BOOTSTRAP=1 on the stable toolchain).
#
# Works on the stable toolchain: it passes the same instrumentation flags cargo-fuzz does
# (sanitizer coverage, `--cfg fuzzing`) plus debug assertions and overflow checks, so an
# arithmetic overflow in the algorithms is a finding. The corpus grows in fuzz/corpus/<t>
# (kept between runs, not committed; fuzz/seeds/<t> are the committed seeds). A finding is
# saved in fuzz/artifacts/<t>/ and this script exits non-zero, printing how to replay it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT/fuzz"

ALL=(state_decode token_parse algorithms cell_throttle)
SECS=${FUZZ_SECONDS:-60}
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
    SECS=$1
    shift
fi
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${ALL[@]}")
for t in "${TARGETS[@]}"; do
    [[ " ${ALL[*]} " == *" $t "* ]] || { echo "fuzz: unknown target $t (have: ${ALL[*]})" >&2; exit 2; }
done

if ! command -v cargo >/dev/null 2>&1 && [[ -x $HOME/.cargo/bin/cargo ]]; then
    export PATH=$HOME/.cargo/bin:$PATH
fi
if ! command -v c++ >/dev/null 2>&1; then
    echo "fuzz: a C++ compiler is needed to build libFuzzer (apt-get install -y g++)" >&2
    exit 1
fi

TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
FLAGS=(
    -Cpasses=sancov-module
    -Cllvm-args=-sanitizer-coverage-level=4
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
    -Cllvm-args=-sanitizer-coverage-pc-table
    -Cllvm-args=-sanitizer-coverage-trace-compares
    --cfg fuzzing
    -Cdebug-assertions
    -Coverflow-checks
    -Cforce-frame-pointers
)
# Inside the main build directory, so the cached CI build slot keeps it between runs.
TARGET_DIR=$ROOT/target/fuzz
if [[ ${FUZZ_SANITIZER:-} == address ]]; then
    export RUSTC_BOOTSTRAP=1
    FLAGS+=(-Zsanitizer=address)
    TARGET_DIR=$ROOT/target/fuzz-asan
fi
# --target keeps the flags off build scripts and proc macros (as cargo-fuzz does).
echo "==> fuzz: building ${TARGETS[*]} (${FUZZ_SANITIZER:-no sanitizer})"
build_start=$(date +%s)
RUSTFLAGS="${FLAGS[*]}" cargo build --release --target "$TRIPLE" --target-dir "$TARGET_DIR" \
    $(printf -- '--bin %s ' "${TARGETS[@]}")
echo "==> fuzz: built in $(( $(date +%s) - build_start )) s"

run_one() {
    local t=$1 bin="$TARGET_DIR/$TRIPLE/release/$1" log="artifacts/$1/last-run.log"
    mkdir -p "corpus/$t" "artifacts/$t"
    local start rc=0
    start=$(date +%s)
    # -timeout: a single input taking 10 s is a finding (a hang in a command would block
    # the server); -rss_limit_mb: so is an input that makes the code allocate without bound.
    "$bin" "corpus/$t" "seeds/$t" \
        -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"$log" 2>&1 || rc=$?
    local execs cov
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    if [[ $rc -ne 0 ]]; then
        echo "FAIL $t after $(( $(date +%s) - start )) s (exit $rc); log: fuzz/$log"
        grep -E -A30 'panicked|ERROR: libFuzzer|SUMMARY|Test unit written' "$log" | head -60
        local art
        art=$(grep -o "artifacts/$t/[a-z]*-[0-9a-f]*" "$log" | tail -1 || true)
        [[ -n $art ]] && echo "replay: fuzz/$bin fuzz/$art"
        return 1
    fi
    echo "ok   $t: ${execs:-?} runs in $(( $(date +%s) - start )) s, coverage ${cov:-?}, corpus $(ls "corpus/$t" | wc -l)"
}

failed=0
for t in "${TARGETS[@]}"; do
    echo "==> fuzz: $t for $SECS s"
    run_one "$t" || failed=1
done
if [[ $failed -ne 0 ]]; then
    echo "==> fuzz: FINDINGS (see above)" >&2
    exit 1
fi
echo "==> fuzz: no finding"
