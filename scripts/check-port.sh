#!/usr/bin/env bash
# Fail with a clear message when 127.0.0.1:PORT is already taken (used by `make run`).
#   scripts/check-port.sh [PORT]     (default 6379)
set -euo pipefail
port="${1:-6379}"
[[ "$port" =~ ^[0-9]+$ ]] || { echo "run: error: PORT must be a number, got '$port'" >&2; exit 1; }

# bash connects to the port itself: success means something is listening.
if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    exit 0
fi

{
    echo "run: error: port $port on 127.0.0.1 is already in use, so redis-server cannot start on it."
    if command -v redis-cli >/dev/null 2>&1 &&
        [[ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$port" PING 2>/dev/null)" == PONG ]]; then
        echo "run: a Redis server is answering there (Debian's redis-server service, or an earlier 'make run')."
        echo "run: stop it (e.g. 'sudo systemctl stop redis-server' or 'sudo service redis-server stop'),"
    else
        echo "run: another program is listening there; stop it,"
    fi
    echo "run: or use another port:  make run PORT=$((port + 1))"
} >&2
exit 1
