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
#   CELL_SO=/path/libredis_cell.so bash bench/instructions.sh   # adds redis-cell's CL.THROTTLE
#   N=5000 bash bench/instructions.sh          # fewer calls per case (make bench QUICK=1)
#   OUT=file bash bench/instructions.sh        # the table into another file
#
# The floor row is bench/floor/floor.c (see there): what the module API forces on a rate
# command; xfloor is each row against it, xSETPX against Redis's own SET with PX (INCR,
# SET PX and the floor are always measured). The redis-cell row (only with CELL_SO) runs
# redis-cell's module in a server of its own: this module registers CL.THROTTLE too.
#
# Writes the table to stdout and to bench/results/instructions.txt. Then, when no words are
# given, runs bench/issue25.py (issue 25's hot-path figures, each a ratio measured in the same
# run, against its target; about 1 min idle, N calls per figure) into issue25.txt beside OUT
# (issue25-quick.txt when OUT is instructions-quick.txt); ISSUE25=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
OUT=${OUT:-bench/results/instructions.txt}
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
# A private copy: the module may be rebuilt while this runs.
cp "$MODULE" "$tmp/libredis_ratelimit.so"
MODULE=$tmp/libredis_ratelimit.so

# The floor (bench/floor/floor.c): what the module API forces on a rate command, built
# against the redismodule.h that the redis-module crate ships (bench/floor/build.sh).
FLOOR_SO=
if bash bench/floor/build.sh "$tmp/floor.so" 2>"$tmp/floor.log"; then
  FLOOR_SO=$tmp/floor.so
else
  echo "==> instructions: floor module not built ($(cat "$tmp/floor.log")), floor row skipped" >&2
fi
# redis-cell itself, when CELL_SO=/path/libredis_cell.so is given: its CL.THROTTLE in a
# server of its own (this module also registers CL.THROTTLE).
CELL_SO=${CELL_SO:-}
if [ -n "$CELL_SO" ] && [ ! -f "$CELL_SO" ]; then
  echo "instructions: CELL_SO=$CELL_SO does not exist" >&2; exit 1
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
  "cell CL.THROTTLE|cell:CL.THROTTLE b:__rand_int__ 999 1 3600"
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
  elif [[ ${argv[0]} == cell:* ]]; then
    module=$CELL_SO
    argv[0]=${argv[0]#cell:}
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
  [ "$name" = INCR ] || [ "$name" = "SET PX" ] || [ "$name" = floor ] || wanted "$name" || continue
  [ "$name" = floor ] && [ -z "$FLOOR_SO" ] && continue
  [ "$name" = "cell CL.THROTTLE" ] && [ -z "$CELL_SO" ] && continue
  # shellcheck disable=SC2086
  RESULT[$name]=$(measure "$name" $cmd)
  order+=("$name")
  echo "    $name: ${RESULT[$name]} instructions/call" >&2
done

incr=${RESULT[INCR]}
ratio() { if [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; fi; }
{
  echo "== instructions per call (callgrind, $(redis-server --version | awk '{print $3}'), $N calls on $KEYS keys, -P 16, no AOF, no replica)"
  printf '%-16s %12s %8s %8s %8s %10s\n' case instr/call xINCR xSETPX xfloor "lua/module"
  for name in "${order[@]}"; do
    v=${RESULT[$name]}
    lua=""
    key="lua $(echo "${name#RL.}" | tr 'A-Z' 'a-z')"
    if [[ $name == RL.* && -n ${RESULT[$key]:-} ]]; then
      lua=$(awk -v a="${RESULT[$key]}" -v b="$v" 'BEGIN {printf "%.1f", a / b}')
    fi
    printf '%-16s %12s %8s %8s %8s %10s\n' "$name" "$v" "$(ratio "$v" "$incr")" \
      "$(ratio "$v" "${RESULT[SET PX]:-}")" "$(ratio "$v" "${RESULT[floor]:-}")" "$lua"
  done
  if [ -n "$CELL_SO" ]; then
    echo "cell CL.THROTTLE: redis-cell's CL.THROTTLE, from $CELL_SO (sha256 $(sha256sum "$CELL_SO" | cut -c1-16)), in a server of its own"
  fi
} | tee "$OUT"

# Issue 25's table (bench/issue25.py): its own servers, the same module and N.
if [ ${#filter[@]} -eq 0 ] && [ "${ISSUE25:-1}" != 0 ]; then
  base=$(basename "$OUT" .txt)
  suffix=${base#instructions}
  [[ $suffix == -quick ]] || suffix=
  echo "==> instructions: bench/issue25.py (issue 25's ratios, N=$N)" >&2
  python3 bench/issue25.py --module "$MODULE" -n "$N" --file "$(dirname "$OUT")/issue25$suffix.txt"
  # Issue 26's figures (bench/issue26.py): RL.ALLOW vs RL.GCRA, memory per policy, the
  # statistics' memory at 1,000,000 keys, rollout shares.
  echo "==> instructions: bench/issue26.py (issue 26's figures, N=$N)" >&2
  q=; [[ $suffix == -quick ]] && q=--quick
  python3 bench/issue26.py --module "$MODULE" -n "$N" $q --out "$(dirname "$OUT")"
  # Issue 27's figures (bench/issue27.py, real clock): waiting against polling.
  echo "==> instructions: bench/issue27.py (issue 27's figures)" >&2
  python3 bench/issue27.py --module "$MODULE" $q --out "$(dirname "$OUT")"
fi
