#!/usr/bin/env bash
# RL.ACQUIRE / RL.RELEASE / RL.RENEW instructions per call against the number of live leases
# in one key, counted by callgrind (deterministic: no clock noise). For each size L a fresh
# redis-server (no AOF, no replica) runs under `valgrind --tool=callgrind
# --toggle-collect=call` (only command execution is counted); one key is filled with L
# leases of an hour, the counters are zeroed (`callgrind_control -z`), and then N calls of
# one case are sent (redis-benchmark, one client, pipelines of 16) on that key:
#   refused   RL.ACQUIRE k L 3600000           the key at its limit: every call refused
#   dryrun    RL.ACQUIRE g L+64 3600000 DRYRUN  room left: admitted, nothing written
#   granted   RL.ACQUIRE g L+64 1              granted 1 ms leases: each call purges the
#                                              ones expired since, so about L stay live
#   release   RL.RELEASE k 1-0                 a token the key does not hold
#   renew     RL.RENEW k 1-0 1000              likewise
#   lua       the sorted-set script (bench/lua/concurrency.lua), at its limit L: refused
#
#   bash bench/lease_scale.sh                 # L = 10 1000 10000, every case
#   bash bench/lease_scale.sh 10000 refused   # sizes and case names, in any order
#   MODULE=/path/to/other.so bash bench/lease_scale.sh   # another build (before/after)
#   bash bench/lease_scale.sh memory          # bytes, not instructions (below)
#
# `memory`: a plain redis-server (no valgrind); used_memory delta (after FLUSHALL, like
# bench/bench.py) for KEYS keys (default 20,000) holding 10 leases of an hour each, filled
# round-robin one lease per key per pass, by RL.ACQUIRE and by the sorted-set script; then
# one key filled to 10,000 leases: bytes per key and per lease.
#
# Writes the table to stdout (not to bench/results: another build may be the one measured).
set -euo pipefail
cd "$(dirname "$0")/.."
MODULE=${MODULE:-$PWD/target/release/libredis_ratelimit.so}
N=${N:-2000}

command -v valgrind >/dev/null && command -v callgrind_control >/dev/null \
  || { echo "lease_scale: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
[ -f "$MODULE" ] || { echo "lease_scale: build the module first (cargo build --release)" >&2; exit 1; }

sizes=(); cases=()
for a in "$@"; do
  if [[ $a =~ ^[0-9]+$ ]]; then sizes+=("$a"); else cases+=("$a"); fi
done
[ ${#sizes[@]} -gt 0 ] || sizes=(10 1000 10000)
[ ${#cases[@]} -gt 0 ] || cases=(refused dryrun granted release renew lua)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cli() { redis-cli -p "$port" "$@"; }
bench() { redis-benchmark -p "$port" -c 1 -P 16 -q "$@" >/dev/null 2>&1; }
# The fill: one call at a time (a pipeline would send whole pipelines: more than L calls).
fill() { redis-benchmark -p "$port" -c 1 -P 1 -q "$@" >/dev/null 2>&1; }

measure() { # L case
  local l=$1 case=$2 cg="$tmp/cg.out"
  rm -f "$cg"
  valgrind --tool=callgrind --callgrind-out-file="$cg" --toggle-collect=call \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp" \
    --loadmodule "$MODULE" acquire-max-limit 1000000 >"$tmp/server.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 150); do cli ping >/dev/null 2>&1 && break; sleep 0.2; done
  local sha=
  case $case in
    lua)
      sha=$(cli SCRIPT LOAD "$(cat bench/lua/concurrency.lua)")
      fill -n "$l" EVALSHA "$sha" 1 k "$l" 3600000 ;;
    dryrun|granted) fill -n "$l" RL.ACQUIRE g $((l + 64)) 3600000 ;;
    *) fill -n "$l" RL.ACQUIRE k "$l" 3600000 ;;
  esac
  local held
  if [ "$case" = lua ]; then held=$(cli ZCARD k); else held=$(cli RL.INFO "$( [[ $case == dryrun || $case == granted ]] && echo g || echo k )" | awk 'p {print; exit} /^leases$/ {p=1}'); fi
  [ "$held" = "$l" ] || echo "lease_scale: $case at $l: the key holds $held leases" >&2
  callgrind_control -z "$pid" >/dev/null 2>&1
  case $case in
    refused) bench -n "$N" RL.ACQUIRE k "$l" 3600000 ;;
    dryrun) bench -n "$N" RL.ACQUIRE g $((l + 64)) 3600000 DRYRUN ;;
    granted) bench -n "$N" RL.ACQUIRE g $((l + 64)) 1 ;;
    release) bench -n "$N" RL.RELEASE k 1-0 ;;
    renew) bench -n "$N" RL.RENEW k 1-0 1000 ;;
    lua) bench -n "$N" EVALSHA "$sha" 1 k "$l" 3600000 ;;
  esac
  cli shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  # The whole call, and (after a slash) the algorithm's own function, inclusive.
  local fn=
  case $case in
    refused|dryrun|granted) fn='Leases::acquire' ;;
    release) fn='Leases::release' ;;
    renew) fn='Leases::renew' ;;
  esac
  local ann total algo=
  ann=$(callgrind_annotate --inclusive=yes --threshold=100 "$cg" 2>/dev/null)
  total=$(awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}' <<<"$ann")
  if [ -n "$fn" ]; then
    algo=$(awk -v f="lease::$fn " 'index($0, f) {gsub(",", "", $1); print $1; exit}' <<<"$ann")
    algo=/$(( ${algo:-0} / N ))
  fi
  echo "$(( total / N ))$algo"
}

memory() {
  local keys=${KEYS:-20000}
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp" \
    --loadmodule "$MODULE" >"$tmp/server.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done
  local body; body=$(cat bench/lua/concurrency.lua)
  # ARGV: impl (module|lua), key prefix, first, last, passes, limit, lease_ms
  local fill="local function __body(KEYS, ARGV)
$body
end
local impl, pre, from, to, passes = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
for _ = 1, passes do
  for i = from, to do
    local k = pre .. string.format('%07d', i)
    if impl == 'module' then redis.call('RL.ACQUIRE', k, ARGV[6], ARGV[7])
    else __body({k}, {ARGV[6], ARGV[7]}) end
  end
end
return 0"
  local sha; sha=$(cli SCRIPT LOAD "$fill")
  used() { sleep 0.3; cli ping >/dev/null; cli info memory | awk -F: '/^used_memory:/ {print $2+0}'; }
  echo "memory: $(redis-server --version | awk '{print $3}'), $(cli info memory | awk -F: '/^mem_allocator:/ {print $2}' | tr -d '\r'), module $MODULE"
  local impl base full base2 big
  for impl in module lua; do
    cli flushall sync >/dev/null; base=$(used)
    cli evalsha "$sha" 0 "$impl" user: 0 $((keys - 1)) 10 10 3600000 >/dev/null
    full=$(used)
    cli flushall sync >/dev/null; base2=$(used)
    cli evalsha "$sha" 0 "$impl" big: 0 0 10000 10000 3600000 >/dev/null
    big=$(used)
    printf '%-7s %8.1f B per key at 10 leases (%d keys)   %6.1f B per lease in one key of 10,000\n' \
      "$impl" "$(echo "($full - $base) / $keys" | bc -l)" "$keys" "$(echo "($big - $base2) / 10000" | bc -l)"
  done
  cli shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
}
if [ "${cases[*]}" = memory ]; then memory; exit 0; fi

printf '%-8s' "leases"; for c in "${cases[@]}"; do printf '%16s' "$c"; done; echo
for l in "${sizes[@]}"; do
  printf '%-8s' "$l"
  for c in "${cases[@]}"; do printf '%16s' "$(measure "$l" "$c")"; done
  echo
done
echo "(instructions per call / of which the algorithm's function, callgrind, N=$N,"
echo " $(redis-server --version | awk '{print $3}'), module $MODULE)"
