#!/usr/bin/env bash
# The Node client's test suite: clients/node (npm package redis-ratelimit-module), node --test over
# real HTTP (Express, Fastify, Koa, NestJS, express-rate-limit) and real servers with the
# module loaded with `test-clock yes` (each test file starts its own redis-server on a free
# 127.0.0.1 port with the package's own helper, redis-ratelimit-module/testing; the cluster
# test a 3-node cluster of the same binary, with redis-cli --cluster create). The conformance
# spec runs a second time on the in-memory limiter.
#
# Usage: scripts/clients-test-node.sh        (from anywhere)
#
# Builds no module: it must exist (RL_MODULE, default target/release/libredis_ratelimit.so).
# Installs node and npm with apt-get when missing (as root), runs `npm ci` in clients/node
# (from the committed package-lock.json), compiles the TypeScript (npm run build) and checks
# that the committed dist/ is what the sources compile to (users install dist/ as it is in
# git), then runs the tests. Prints node --test's summary and the line
# `clients-node: N passed, M failed, K skipped`; exits 1 if anything failed.
#
# Environment: RL_MODULE, RL_SERVER (default redis-server), NODE (default node), NPM
# (default npm).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR="$ROOT/clients/node"
MODULE=${RL_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
SERVER=${RL_SERVER:-redis-server}
NODE=${NODE:-node}
NPM=${NPM:-npm}

say() { printf '==> clients-node: %s\n' "$*"; }
fatal() {
    printf 'clients-node: error: %s\n' "$*" >&2
    echo "clients-node: 0 passed, 1 failed"
    exit 2
}

if ! command -v "$NODE" >/dev/null 2>&1 || ! command -v "$NPM" >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        say "installing nodejs and npm (apt-get)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null ||
            fatal "apt-get install nodejs npm failed"
    else
        fatal "node and npm are needed: sudo apt-get install nodejs npm"
    fi
fi
major=$("$NODE" -p 'process.versions.node.split(".")[0]')
((major >= 20)) || echo "clients-node: warning: node $("$NODE" --version) is older than the supported 20" >&2

[[ "$MODULE" == /* ]] || MODULE="$PWD/$MODULE"
[[ -f "$MODULE" ]] || fatal "module not built: $MODULE (run: make build, or cargo build --release)"
command -v "$SERVER" >/dev/null 2>&1 || fatal "$SERVER not found (make deps installs redis-server)"
command -v redis-cli >/dev/null 2>&1 || fatal "redis-cli not found (make deps installs redis-tools)"

START=$(date +%s)
cd "$DIR" || fatal "no $DIR"
say "npm ci"
"$NPM" ci --no-audit --no-fund --loglevel=error || fatal "npm ci failed"
say "npm run build"
"$NPM" run --silent build || fatal "the TypeScript build failed"
if git -C "$DIR" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    stale=$(git -C "$DIR" status --porcelain -- dist)
    if [[ -n "$stale" ]]; then
        printf '%s\n' "$stale" >&2
        fatal "clients/node/dist differs from what src/ compiles to: commit the rebuilt dist/"
    fi
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rl-clients-node.XXXXXX") || fatal "mktemp failed"
trap 'rm -rf "$TMP"' EXIT
say "node --test clients/node/test (module $MODULE, server $SERVER)"
RL_MODULE="$MODULE" RL_SERVER="$SERVER" NPM="$NPM" "$NODE" --test \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$TMP/tap" test/
rc=$?
count() { grep -E "^# $1 [0-9]+" "$TMP/tap" 2>/dev/null | tail -1 | grep -Eo '[0-9]+'; }
p=$(count pass) f=$(count fail) s=$(count skipped) c=$(count cancelled)
p=${p:-0} f=$((${f:-0} + ${c:-0})) s=${s:-0}
if ((rc != 0 && f == 0)); then f=1; fi # it could not run
say "done in $(($(date +%s) - START)) s"
echo "clients-node: $p passed, $f failed, $s skipped"
((rc == 0 && f == 0))
