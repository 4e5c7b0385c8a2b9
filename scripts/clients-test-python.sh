#!/usr/bin/env bash
# The Python client's test suite (clients/python): installs the package and its pinned test
# dependencies from PyPI into clients/python/.venv, then runs pytest against a real
# redis-server with the module (each test session starts its own servers on free 127.0.0.1
# ports, with `test-clock yes`: a single server and a 3-node cluster). The single server is the
# package's own pytest plugin's (redis_ratelimit.testing: the fixture ratelimit_server, which
# users' tests get too), given the module and the server by RL_MODULE and RL_SERVER.
#
# Usage: scripts/clients-test-python.sh [pytest args...]
#
# Builds nothing: the module must exist (RL_MODULE, default target/release/libredis_ratelimit.so).
# On a machine without the venv module (Debian without python3-venv) it installs
# python3-venv with apt-get when run as root (apt-get update first).
# Prints pytest's summary line; exits with pytest's status (non-zero on any failure).
#
# Environment: RL_MODULE, RL_SERVER (default redis-server), PYTHON (default python3).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR="$ROOT/clients/python"
VENV="$DIR/.venv"
MODULE=${RL_MODULE:-$ROOT/target/release/libredis_ratelimit.so}
SERVER=${RL_SERVER:-redis-server}
PYTHON=${PYTHON:-python3}

say() { printf '==> clients/python: %s\n' "$*"; }
fatal() {
    printf 'clients-test-python: error: %s\n' "$*" >&2
    exit 2
}

[[ "$MODULE" == /* ]] || MODULE="$PWD/$MODULE"
[[ -f "$MODULE" ]] || fatal "module not built: $MODULE (run: make build, or cargo build --release)"
command -v "$SERVER" >/dev/null 2>&1 || [[ -x "$SERVER" ]] ||
    fatal "$SERVER not found (make deps installs redis-server)"

apt_install() {
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        say "installing $* (apt-get)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    else
        fatal "missing $*: run  sudo apt-get install $*"
    fi
}

command -v "$PYTHON" >/dev/null 2>&1 || apt_install python3

# A venv whose interpreter runs is reused; otherwise it is made again.
if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$VENV"
    if ! "$PYTHON" -m venv "$VENV" >/dev/null 2>&1; then
        rm -rf "$VENV"
        apt_install python3-venv
        "$PYTHON" -m venv "$VENV" || fatal "python3 -m venv failed"
    fi
fi
PY="$VENV/bin/python"

say "installing the package and requirements-test.txt into clients/python/.venv"
"$PY" -m pip install -q --disable-pip-version-check -r "$DIR/requirements-test.txt" ||
    fatal "pip install of the test requirements failed"
# the package itself, from this tree (not editable: the tests use what pip installs)
"$PY" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$DIR" ||
    fatal "pip install ./clients/python failed"

say "pytest clients/python/tests (module $MODULE, server $SERVER)"
cd "$DIR" && RL_MODULE="$MODULE" RL_SERVER="$SERVER" "$PY" -m pytest -q -rs "$@" tests
