#!/usr/bin/env bash
# The examples' test suites: examples/python (Flask + redis-py, pytest) and examples/node
# (Express + ioredis, node --test), each over real HTTP against a real redis-server with
# the module loaded with `test-clock yes`.
#
# Usage: scripts/examples-test.sh            (from anywhere; `make examples-test` runs it)
#
# Builds nothing: the module must exist (RL_MODULE, default target/release/libredis_ratelimit.so).
# Installs the examples' own dependencies: a venv in examples/python/.venv (pip, PyPI) and
# examples/node/node_modules (npm ci, from the committed package-lock.json). Starts one
# redis-server per suite on a free 127.0.0.1 port and stops it at the end.
# Prints each suite's output, then the line `N passed, M failed` summed over both suites
# (a suite that cannot run at all counts as 1 failed). Exits 1 if anything failed.
#
# Environment: RL_MODULE, RL_SERVER (default redis-server), PYTHON (default python3),
# NPM (default npm), NODE (default node).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODULE=${RL_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
SERVER=${RL_SERVER:-redis-server}
PYTHON=${PYTHON:-python3}
NPM=${NPM:-npm}
NODE=${NODE:-node}

say() { printf '==> examples: %s\n' "$*"; }
fatal() {
    printf 'examples: error: %s\n' "$*" >&2
    exit 2
}

[[ "$MODULE" == /* ]] || MODULE="$PWD/$MODULE"
[[ -f "$MODULE" ]] || fatal "module not built: $MODULE (run: make build, or cargo build --release)"
command -v "$SERVER" >/dev/null 2>&1 || fatal "$SERVER not found (make deps installs redis-server)"
command -v "$PYTHON" >/dev/null 2>&1 || fatal "$PYTHON not found"
command -v "$NODE" >/dev/null 2>&1 || fatal "$NODE not found"
command -v "$NPM" >/dev/null 2>&1 || fatal "$NPM not found"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rl-examples.XXXXXX") || fatal "mktemp failed"
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=module-server.sh
. "$ROOT/scripts/module-server.sh"

# start_server NAME: starts redis-server with the module and the test clock, sets PORT.
start_server() {
    start_module_server "$TMP/$1" || return 1
    PIDS+=("$SERVER_PID")
}

PASSED=0
FAILED=0
START=$(date +%s)

# ---------------------------------------------------------------------------- Python

python_suite() {
    local dir="$ROOT/examples/python" venv="$ROOT/examples/python/.venv" py out rc
    say "python: dependencies (venv examples/python/.venv, requirements-test.txt)"
    # Reuse the venv if its interpreter still runs (recreate it otherwise).
    "$venv/bin/python" -c '' 2>/dev/null || { rm -rf "$venv" && "$PYTHON" -m venv "$venv"; }
    if "$venv/bin/python" -c '' 2>/dev/null; then
        py="$venv/bin/python"
    else
        # No venv module (Debian without python3-venv): install for this user instead.
        echo "examples: python -m venv failed; installing with pip --user" >&2
        rm -rf "$venv"
        py=$PYTHON
    fi
    local user=()
    [[ "$py" == "$PYTHON" ]] && user=(--user)
    # From examples/python: its requirements install ../../clients/python (the package).
    (cd "$dir" && PIP_BREAK_SYSTEM_PACKAGES=1 "$py" -m pip install -q --disable-pip-version-check \
        "${user[@]}" --force-reinstall --no-deps ../../clients/python &&
        PIP_BREAK_SYSTEM_PACKAGES=1 "$py" -m pip install -q --disable-pip-version-check \
            "${user[@]}" -r requirements-test.txt) ||
        { echo "examples: error: pip install failed" >&2; return 2; }
    start_server python || return 2
    say "python: pytest examples/python/tests (redis-server on port $PORT)"
    out="$TMP/pytest.out"
    (cd "$dir" && RL_REDIS_PORT=$PORT "$py" -m pytest -p no:cacheprovider -v tests) | tee "$out"
    rc=${PIPESTATUS[0]}
    local p f e
    p=$(grep -Eo '[0-9]+ passed' "$out" | tail -1 | grep -Eo '[0-9]+')
    f=$(grep -Eo '[0-9]+ failed' "$out" | tail -1 | grep -Eo '[0-9]+')
    e=$(grep -Eo '[0-9]+ errors?' "$out" | tail -1 | grep -Eo '[0-9]+')
    p=${p:-0} f=$((${f:-0} + ${e:-0}))
    if ((rc != 0 && f == 0)); then f=1; fi # it could not run (or ran no test)
    PASSED=$((PASSED + p)) FAILED=$((FAILED + f))
    say "python: $p passed, $f failed"
}

# ---------------------------------------------------------------------------- Node

node_suite() {
    local dir="$ROOT/examples/node" tap="$TMP/node.tap" rc
    say "node: dependencies (npm ci in examples/node)"
    (cd "$dir" && "$NPM" ci --no-audit --no-fund --loglevel=error) ||
        { echo "examples: error: npm ci failed" >&2; return 2; }
    start_server node || return 2
    say "node: node --test examples/node/test (redis-server on port $PORT)"
    (cd "$dir" && RL_REDIS_PORT=$PORT "$NODE" --test \
        --test-reporter=spec --test-reporter-destination=stdout \
        --test-reporter=tap --test-reporter-destination="$tap" test/)
    rc=$?
    local p f
    p=$(grep -E '^# pass [0-9]+' "$tap" 2>/dev/null | tail -1 | grep -Eo '[0-9]+')
    f=$(grep -E '^# fail [0-9]+' "$tap" 2>/dev/null | tail -1 | grep -Eo '[0-9]+')
    p=${p:-0} f=${f:-0}
    if ((rc != 0 && f == 0)); then f=1; fi
    PASSED=$((PASSED + p)) FAILED=$((FAILED + f))
    say "node: $p passed, $f failed"
}

python_suite || FAILED=$((FAILED + 1))
node_suite || FAILED=$((FAILED + 1))

say "done in $(($(date +%s) - START)) s"
echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
