#!/usr/bin/env bash
# Usage: bash bench/mem_per_key.sh "'RL.GCRA', string.format('user:%07d', i), 10, 3, 1000" ...  (each argument: the arguments of redis.call for key i)
# bytes per caller: N keys written by one command each, used_memory delta / N (Redis 7.0, jemalloc)
MOD=${MOD:-$(cd "$(dirname "$0")/.." && pwd)/target/release/libredis_ratelimit.so}
N=${N:-250000}
PORT=${PORT:-7391}
redis-server --port $PORT --bind 127.0.0.1 --save "" --appendonly no --loadmodule $MOD --daemonize yes --logfile ${TMPDIR:-/tmp}/log --dir ${TMPDIR:-/tmp} >/dev/null
until redis-cli -p $PORT ping >/dev/null 2>&1; do sleep 0.1; done
m() { redis-cli -p $PORT info memory | awk -F: '/^used_memory:/{print $2}' | tr -d '\r'; }
for cmd in "$@"; do
  redis-cli -p $PORT flushall sync >/dev/null
  b=$(m)
  redis-cli -p $PORT eval "for i=0,$N-1 do redis.call($cmd) end return 1" 0 >/dev/null
  a=$(m)
  echo "$cmd: $(( (a-b)*10/N ))e-1 B per key"
done
redis-cli -p $PORT shutdown nosave >/dev/null 2>&1
