#!/usr/bin/env bash
# The README's "Other languages" snippets (examples/other/): checks that each snippet in
# README.md is its file under examples/other/ byte for byte (examples/other/check_snippets.py),
# then runs the Ruby one (redis-rb, which Debian packages as ruby-redis) against a real
# redis-server with the module loaded with `test-clock yes`. The Go (go-redis), Java (Jedis)
# and .NET (StackExchange.Redis) snippets are not run: Debian does not package those clients,
# and this machine reaches no Go proxy, Maven or NuGet (the README says they are untested).
#
# Usage: scripts/other-clients-test.sh        (from anywhere; `make test` and
#                                              `make examples-test` run it)
#
# Builds nothing: the module must exist (RL_MODULE, default target/release/libredis_ratelimit.so).
# Installs ruby and ruby-redis with apt-get when missing (as root: apt-get update first).
# Starts one redis-server on a free 127.0.0.1 port and stops it at the end.
# Prints the Ruby checks, then `ruby examples: N passed, M failed`; exits 1 if anything failed
# (a snippet that differs from its file counts as a failure), 2 if it could not run.
#
# Environment: RL_MODULE, RL_SERVER (default redis-server), PYTHON (default python3),
# RUBY (default ruby).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODULE=${RL_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
SERVER=${RL_SERVER:-redis-server}
PYTHON=${PYTHON:-python3}
RUBY=${RUBY:-ruby}
START=$(date +%s)

say() { printf '==> other clients: %s\n' "$*"; }
fatal() {
    printf 'other-clients-test: error: %s\n' "$*" >&2
    exit 2
}

[[ "$MODULE" == /* ]] || MODULE="$PWD/$MODULE"
[[ -f "$MODULE" ]] || fatal "module not built: $MODULE (run: make build, or cargo build --release)"
command -v "$SERVER" >/dev/null 2>&1 || [[ -x "$SERVER" ]] ||
    fatal "$SERVER not found (make deps installs redis-server)"
command -v redis-cli >/dev/null 2>&1 || fatal "redis-cli not found (make deps installs redis-tools)"
command -v "$PYTHON" >/dev/null 2>&1 || fatal "$PYTHON not found"

# 1. The snippets in README.md are their files (no drift between what users copy and what runs).
say "README snippets vs examples/other/ (examples/other/check_snippets.py)"
"$PYTHON" "$ROOT/examples/other/check_snippets.py" "$ROOT/README.md"
SNIPPETS_RC=$?

# 2. Ruby and redis-rb from Debian (ruby-redis), installed only when missing.
have_redis_rb() { "$RUBY" -e 'require "redis"' >/dev/null 2>&1; }
if ! command -v "$RUBY" >/dev/null 2>&1 || ! have_redis_rb; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        say "installing ruby ruby-redis (apt-get)"
        apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ruby ruby-redis >/dev/null ||
            fatal "apt-get install ruby ruby-redis failed"
    else
        fatal "ruby or redis-rb missing: run  sudo apt-get install ruby ruby-redis"
    fi
    have_redis_rb || fatal "$RUBY cannot require \"redis\" after installing ruby-redis"
fi
say "$("$RUBY" -e 'require "redis"; print "ruby #{RUBY_VERSION}, redis-rb #{Redis::VERSION}"')"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rl-other.XXXXXX") || fatal "mktemp failed"
SERVER_PID=
cleanup() {
    if [[ -n "$SERVER_PID" ]]; then
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=module-server.sh
. "$ROOT/scripts/module-server.sh"

# 3. redis-server with the module and the test clock, on a free port.
start_module_server "$TMP/redis" || exit 2

# 4. The Ruby snippet against it.
say "ruby examples/other/ruby/test_ratelimit_example.rb (redis-server on port $PORT)"
RL_REDIS_PORT=$PORT "$RUBY" "$ROOT/examples/other/ruby/test_ratelimit_example.rb"
RUBY_RC=$?

say "done in $(($(date +%s) - START)) s (Go, Java and .NET snippets: checked against the README only, not run)"
if ((SNIPPETS_RC != 0)); then
    echo "other-clients-test: error: README snippets differ from examples/other/ (see above)" >&2
fi
((SNIPPETS_RC == 0 && RUBY_RC == 0))
