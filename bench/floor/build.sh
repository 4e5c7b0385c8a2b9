#!/usr/bin/env bash
# Builds the floor module (floor.c) into $1 against the redismodule.h that the redis-module
# crate ships; used by bench/instructions.sh and bench/bench.py. Exits 1 (with the reason on
# stderr) when there is no such header or no C compiler.
set -euo pipefail
out=${1:?usage: bench/floor/build.sh OUT.so}
here=$(cd "$(dirname "$0")" && pwd)
header=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -path '*redis-module-2.0.8/src/include/redismodule.h' 2>/dev/null | head -1)
if [ -z "$header" ]; then
  echo "floor: no redismodule.h of redis-module 2.0.8 under ${CARGO_HOME:-$HOME/.cargo}/registry (cargo build fetches it)" >&2
  exit 1
fi
command -v cc >/dev/null || { echo "floor: no C compiler (cc)" >&2; exit 1; }
cc -O2 -fPIC -shared -std=gnu99 -I"$(dirname "$header")" -o "$out" "$here/floor.c"
