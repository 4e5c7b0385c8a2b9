#!/usr/bin/env bash
# Instructions per call, counted by callgrind: the hot path's cost without the noise of a
# shared machine's clock. For each case a fresh redis-server (Redis 7.0, no AOF, no replica)
# runs under `valgrind --tool=callgrind --toggle-collect=call`, so only command execution
# is counted (Redis's `call()`: the command, its reply, its propagation and stats), and
# redis-benchmark sends it 20,000 calls on 1,000 keys (mostly existing keys, like a limited
# caller's second and later requests), one client, pipelines of 16. Every rule's period is an
# hour, so no key expires during the run however slowly valgrind runs it: a key that expired
# and came back would cost a creation, and the count would depend on the machine's load
# (RL.ACQUIRE's 500 ms leases are the exception: expiring leases are what it measures).
#
#   bash bench/instructions.sh                 # every case
#   bash bench/instructions.sh gcra incr       # only the cases whose name contains a word
#
# The floor row is bench/floor/floor.c (see there): what the module API forces on a rate
# command; xfloor is each row against it.
#
# Writes the table to stdout and to bench/results/instructions.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
OUT=bench/results/instructions.txt
N=${N:-20000}
KEYS=${KEYS:-1000}

if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
  echo "==> instructions: installing valgrind" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
  $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq valgrind >/dev/null
fi
[ -f "$MODULE" ] || { echo "instructions: build the module first (make build)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The floor (bench/floor/floor.c): what the module API forces on a rate command, built
# against the redismodule.h that the redis-module crate ships.
header=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -path '*redis-module-2.0.8/src/include/redismodule.h' 2>/dev/null | head -1)
FLOOR_SO=
if [ -n "$header" ] && cc -O2 -fPIC -shared -std=gnu99 -I"$(dirname "$header")" \
    -o "$tmp/floor.so" bench/floor/floor.c 2>"$tmp/floor.log"; then
  FLOOR_SO=$tmp/floor.so
else
  echo "==> instructions: floor module not built (no redismodule.h or no cc), floor row skipped" >&2
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# name | command for redis-benchmark (Lua: "lua:<script> args...")
CASES=(
  "INCR|INCR b:__rand_int__"
  "SET|SET b:__rand_int__ xxx"
  "SET PX|SET b:__rand_int__ xxx PX 3600000"
  "floor|floor:FLOOR.HIT b:__rand_int__ 1000 1 3600000"
  "RL.GCRA|RL.GCRA b:__rand_int__ 1000 1 3600000"
  "RL.TOKENBUCKET|RL.TOKENBUCKET b:__rand_int__ 1000 1 3600000"
  "RL.SLIDING|RL.SLIDING b:__rand_int__ 1000 3600000"
  "RL.FIXED|RL.FIXED b:__rand_int__ 1000 3600000"
  "RL.QUEUE|RL.QUEUE b:__rand_int__ 1000 3600000"
  "CL.THROTTLE|CL.THROTTLE b:__rand_int__ 999 1 3600"
  "RL.LOG|RL.LOG b:__rand_int__ 100 3600000"
  "RL.ACQUIRE|RL.ACQUIRE b:__rand_int__ 10 500"
  "RL.GCRA COST 0|RL.GCRA b:__rand_int__ 1000 1 3600000 COST 0"
  "RL.GCRA REFUND|RL.GCRA b:__rand_int__ 1000 1 3600000 REFUND 1"
  "RL.GCRA PARTIAL|RL.GCRA b:__rand_int__ 1000 1 3600000 COST 2 PARTIAL"
  "RL.GCRA RESERVE|RL.GCRA b:__rand_int__ 1000 1 3600000 RESERVE 10"
  "RL.GCRA BLOCK|RL.GCRA b:__rand_int__ 1000 1 3600000 BLOCK 60000"
  "RL.FIXED STAGGER|RL.FIXED b:__rand_int__ 1000 3600000 STAGGER"
  "lua gcra|lua:gcra 1000 1 3600000"
  "lua tokenbucket|lua:tokenbucket 1000 1 3600000"
  "lua sliding|lua:sliding 1000 3600000"
  "lua fixed|lua:fixed 1000 3600000"
  "lua log|lua:log 100 3600000"
  "lua queue|lua:queue 1000 3600000"
  "lua acquire|lua:concurrency 10 500"
)

measure() { # name, command...
  local name=$1; shift
  local cg="$tmp/cg.out"
  local module=$MODULE
  local argv=("$@")
  if [[ ${argv[0]} == floor:* ]]; then
    module=$FLOOR_SO
    argv[0]=${argv[0]#floor:}
  fi
  rm -f "$cg"
  valgrind --tool=callgrind --callgrind-out-file="$cg" --toggle-collect=call \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp" \
    --loadmodule "$module" >"$tmp/server.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  if [[ ${argv[0]} == lua:* ]]; then
    local script=${argv[0]#lua:}
    local sha
    sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "bench/lua/$script.lua")")
    argv=(EVALSHA "$sha" 1 "b:__rand_int__" "${argv[@]:1}")
  fi
  redis-benchmark -p "$port" -c 1 -P 16 -n "$N" -r "$KEYS" -q "${argv[@]}" >/dev/null 2>&1
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  # A script's SCRIPT LOAD is counted too: one call, negligible against N.
  local total
  total=$(callgrind_annotate "$cg" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
  echo $(( total / N ))
}

filter=("$@")
wanted() {
  [ ${#filter[@]} -eq 0 ] && return 0
  local w
  for w in "${filter[@]}"; do [[ ${1,,} == *${w,,}* ]] && return 0; done
  return 1
}

declare -A RESULT
order=()
for c in "${CASES[@]}"; do
  name=${c%%|*}; cmd=${c#*|}
  [ "$name" = INCR ] || [ "$name" = floor ] || wanted "$name" || continue
  [ "$name" = floor ] && [ -z "$FLOOR_SO" ] && continue
  # shellcheck disable=SC2086
  RESULT[$name]=$(measure "$name" $cmd)
  order+=("$name")
  echo "    $name: ${RESULT[$name]} instructions/call" >&2
done

incr=${RESULT[INCR]}
{
  echo "== instructions per call (callgrind, $(redis-server --version | awk '{print $3}'), $N calls on $KEYS keys, -P 16, no AOF, no replica)"
  printf '%-16s %12s %8s %8s %10s\n' case instr/call xINCR xfloor "lua/module"
  for name in "${order[@]}"; do
    v=${RESULT[$name]}
    xfloor=""
    if [[ -n ${RESULT[floor]:-} ]]; then
      xfloor=$(awk -v a="$v" -v b="${RESULT[floor]}" 'BEGIN {printf "%.2f", a / b}')
    fi
    lua=""
    key="lua $(echo "${name#RL.}" | tr 'A-Z' 'a-z')"
    if [[ $name == RL.* && -n ${RESULT[$key]:-} ]]; then
      lua=$(awk -v a="${RESULT[$key]}" -v b="$v" 'BEGIN {printf "%.1f", a / b}')
    fi
    printf '%-16s %12s %8s %8s %10s\n' "$name" "$v" "$(awk -v a="$v" -v b="$incr" 'BEGIN {printf "%.2f", a / b}')" "$xfloor" "$lua"
  done
} | tee "$OUT"
