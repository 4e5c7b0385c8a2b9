#!/usr/bin/env bash
# The module under valgrind (memcheck) inside a real redis-server, driven by integration
# tests, then a long churn run on a native server. `make valgrind`.
#
#   1. Every server the chosen integration tests start runs under valgrind: RL_SERVER points
#      at a wrapper that starts `valgrind ... redis-server` in the background. The test
#      harness kills its server with SIGKILL, which only kills the wrapper: the valgrind'd
#      server lives on and is shut down gracefully (SHUTDOWN NOSAVE) after each test binary,
#      so valgrind writes its leak report. Debian's redis-server uses the shared jemalloc;
#      --soname-synonyms lets memcheck replace its malloc/free, so the heap is tracked.
#   2. The logs are read: any invalid access / uninitialised use / bad free, and any
#      definitely or indirectly lost block, whose stack passes through the module
#      (libredis_ratelimit / redis_ratelimit::) is a finding. Redis's own reports are
#      counted and shown, not judged.
#   3. A long churn (millions of calls over many keys that then expire) on a native
#      server: used_memory must come back to where it started (tests/robustness.rs).
#
# Exit status: non-zero on a finding of 2 or 3. Test failures under valgrind are listed
# but not judged (assertions to the millisecond cannot hold 20-50x slower).
#
# Env: VALGRIND_TESTS (test binaries, default below), VALGRIND_SKIP (test names to skip:
# assertions on sub-millisecond timing cannot hold 20-50x slower), VALGRIND_OUT (default
# target/valgrind), CHURN_CALLS (default 3000000; 0 skips step 3), VALGRIND_STRICT=1 also
# fails on the module's one-time load leak (see the report).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
if ! command -v cargo >/dev/null 2>&1 && [[ -x $HOME/.cargo/bin/cargo ]]; then
    export PATH=$HOME/.cargo/bin:$PATH
fi
for tool in valgrind redis-server redis-cli python3; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "valgrind.sh: $tool is missing (apt-get install -y valgrind redis-server redis-tools python3)" >&2
        exit 1
    }
done

TESTS=${VALGRIND_TESTS:-"fuzz_commands errors gcra tokenbucket sliding decisions models throttle robustness fixed log queue leases"}
SKIP=${VALGRIND_SKIP:-"clock_refused_without_test_clock"}
SKIP_ARGS=()
for s in $SKIP; do SKIP_ARGS+=(--skip "$s"); done
OUT=${VALGRIND_OUT:-$ROOT/target/valgrind}
REAL_SERVER=$(command -v "${RL_SERVER:-redis-server}")
rm -rf "$OUT"
mkdir -p "$OUT/logs"
START=$(date +%s)

echo "==> valgrind: building the module and the tests"
cargo build --release
# shellcheck disable=SC2046
cargo test --release --no-run $(printf -- '--test %s ' $TESTS) 2>&1 | tail -2

# The wrapper the harness starts instead of redis-server.
WRAP="$OUT/redis-server-valgrind"
cat >"$WRAP" <<EOF
#!/usr/bin/env bash
port=unknown
prev=
for a in "\$@"; do
    [[ \$prev == --port ]] && port=\$a
    prev=\$a
done
valgrind --tool=memcheck --soname-synonyms='somalloc=libjemalloc.so*' \\
    --leak-check=full --show-leak-kinds=definite,indirect,possible \\
    --errors-for-leak-kinds=definite,indirect --num-callers=40 \\
    --log-file="$OUT/logs/vg-\$port-%p.log" "$REAL_SERVER" "\$@" &
pid=\$!
echo "\$pid \$port" >>"$OUT/servers"
wait \$pid
EOF
chmod +x "$WRAP"

# Graceful shutdown of every valgrind'd server still running: that writes the leak report.
shutdown_all() {
    [[ -f $OUT/servers ]] || return 0
    local pid port left=0
    while read -r pid port; do
        kill -0 "$pid" 2>/dev/null || continue
        # FLUSHALL first: every value is freed through the type's free callback, so what the
        # module still holds at exit and nobody points to is a real leak.
        timeout 60 redis-cli -p "$port" FLUSHALL SYNC >/dev/null 2>&1 || true
        timeout 20 redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    done <"$OUT/servers"
    for _ in $(seq 1 240); do
        left=0
        while read -r pid port; do
            kill -0 "$pid" 2>/dev/null && left=$((left + 1))
        done <"$OUT/servers"
        [[ $left -eq 0 ]] && break
        sleep 0.5
    done
    while read -r pid port; do
        if kill -0 "$pid" 2>/dev/null; then
            echo "valgrind.sh: server $pid (port $port) did not exit; SIGTERM" >&2
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done <"$OUT/servers"
    sleep 2
    cat "$OUT/servers" >>"$OUT/servers.done"
    rm -f "$OUT/servers"
}
trap shutdown_all EXIT

failed_tests=()
for t in $TESTS; do
    echo "==> valgrind: tests/$t.rs with every server under valgrind"
    t0=$(date +%s)
    # Lighter knobs: valgrind runs the server 20-50x slower.
    if RL_SERVER="$WRAP" RL_FUZZ_SECONDS=${RL_FUZZ_SECONDS:-60} RL_LOAD_CLIENTS=50 \
        RL_LOAD_KEYS=20000 RL_LOAD_SECONDS=4 RL_CHURN_CALLS=100000 RL_CHURN_KEYS=10000 \
        RL_PING_BUDGET_MS=30000 \
        cargo test --release --test "$t" -- --test-threads=2 "${SKIP_ARGS[@]}" >"$OUT/test-$t.log" 2>&1; then
        echo "    passed in $(( $(date +%s) - t0 )) s ($(grep -c '^test .* ok$' "$OUT/test-$t.log") tests)"
    else
        echo "    FAILED in $(( $(date +%s) - t0 )) s: see $OUT/test-$t.log"
        grep -E '^test .* FAILED$|panicked at' "$OUT/test-$t.log" | head -10 | sed 's/^/    /'
        failed_tests+=("$t")
    fi
    shutdown_all
done
trap - EXIT

echo "==> valgrind: reading $(ls "$OUT"/logs | wc -l) valgrind logs"
vg=0
python3 - "$OUT/logs" "${VALGRIND_STRICT:-0}" <<'PY' || vg=1
import os, re, sys, collections
logs, strict = sys.argv[1], sys.argv[2] == "1"
ERR = re.compile(r"^(Invalid (read|write|free)|Mismatched free|Conditional jump|Use of uninitialised|"
                 r"Syscall param|Source and destination overlap|Argument '.*' of function|"
                 r"Process terminating)")
LEAK = re.compile(r"are (definitely|indirectly|possibly) lost")
ours = lambda rec: "redis_ratelimit" in rec
# Redis's LZF compressor reads its own hash table uninitialised by design (lzfP.h: INIT_HTAB
# 0; --track-origins shows "created by a stack allocation at lzf_compress"). An RDB save or
# DUMP of a state longer than 20 bytes goes through it from our rdb_save: Redis's report,
# not the module's (our buffers are zero-initialised).
lzf_own = lambda rec: any(re.search(r"at 0x[0-9A-F]+: lzf_compress", x) for x in rec[1:2])
module_errors, module_leaks, load_leaks = [], [], []
possibly = collections.Counter()
redis_own = collections.Counter()
no_summary, servers = [], 0
totals = collections.Counter()
for name in sorted(os.listdir(logs)):
    text = open(os.path.join(logs, name), errors="replace").read()
    servers += 1
    lines = [re.sub(r"^==\d+== ?", "", l) for l in text.splitlines()]
    recs, cur = [], []
    for l in lines:
        if l.strip() == "":
            if cur:
                recs.append(cur)
            cur = []
        else:
            cur.append(l)
    if cur:
        recs.append(cur)
    if "LEAK SUMMARY" not in text and "All heap blocks were freed" not in text:
        no_summary.append(name)
    for m in re.finditer(r"(definitely|indirectly|possibly) lost: ([\d,]+) bytes", text):
        totals[m.group(1)] += int(m.group(2).replace(",", ""))
    for r in recs:
        head, body = r[0], "\n".join(r)
        if ERR.match(head):
            if ours(body) and not lzf_own(r):
                module_errors.append((name, body))
            else:
                frame = next((x.strip() for x in r[1:] if "by 0x" in x or "at 0x" in x), "")
                redis_own[head.split(" (")[0][:60] + " | " + frame[:90]] += 1
        elif LEAK.search(head):
            kind = LEAK.search(head).group(1)
            if not ours(body):
                continue
            if kind == "possibly":
                possibly["at load" if "RedisModule_OnLoad" in body else "at run time"] += 1
            elif "RedisModule_OnLoad" in body:
                load_leaks.append((name, body))
            else:
                module_leaks.append((name, body))
print(f"servers checked: {servers}; leak totals over all servers (module and Redis): "
      + ", ".join(f"{k} {v} bytes" for k, v in sorted(totals.items())))
if no_summary:
    print(f"WARNING: {len(no_summary)} server(s) left no leak summary (did not exit cleanly): {no_summary[:5]}")
print(f"Redis's own reports (not the module's; not judged): {sum(redis_own.values())}")
for k, n in redis_own.most_common(8):
    print(f"  {n:>5}  {k}")
print(f"module: invalid accesses / uninitialised uses / bad frees: {len(module_errors)}")
for name, body in module_errors[:5]:
    print(f"--- {name}\n{body}\n")
print(f"module: blocks definitely/indirectly lost at run time: {len(module_leaks)}")
for name, body in module_leaks[:5]:
    print(f"--- {name}\n{body}\n")
sizes = collections.Counter(name for name, _ in load_leaks)
if load_leaks:
    first = load_leaks[0][1].splitlines()
    print(f"module: one-time leak at load, in {len(sizes)} server(s) "
          f"({len(load_leaks) // max(1, len(sizes))} record(s) each): {first[0]}")
    site = next((l.strip() for l in first if "register" in l), "")
    print(f"  at {site}")
    print("  (command info / key specs leaked with Box::leak in src/register.rs; Redis copies "
          "them in RedisModule_SetCommandInfo, so nothing needs them: bounded, not growing)")
print("module: possibly-lost records through the module (servers FLUSHALLed before exit): "
      + (", ".join(f"{n} {k}" for k, n in sorted(possibly.items())) or "none"))
bad = bool(module_errors or module_leaks or (strict and load_leaks))
print("VERDICT:", "FINDINGS in the module" if bad else "no invalid access and no run-time leak in the module")
sys.exit(1 if bad else 0)
PY

churn_status=skipped
if [[ ${CHURN_CALLS:-3000000} -gt 0 ]]; then
    echo "==> valgrind: long churn on a native server (${CHURN_CALLS:-3000000} calls)"
    if RL_CHURN_CALLS=${CHURN_CALLS:-3000000} RL_CHURN_KEYS=${CHURN_KEYS:-200000} \
        cargo test --release --test robustness churn -- --nocapture >"$OUT/churn.log" 2>&1; then
        churn_status=passed
    else
        churn_status=FAILED
    fi
    grep -E '^churn:|panicked|used_memory' "$OUT/churn.log" | head -5 | sed 's/^/    /'
fi

echo "==> valgrind: done in $(( $(date +%s) - START )) s; logs in $OUT"
echo "    memory (valgrind): $([[ $vg -eq 0 ]] && echo clean || echo FINDINGS)"
echo "    churn (used_memory back to its start): $churn_status"
status=$vg
[[ $churn_status == FAILED ]] && status=1
if [[ ${#failed_tests[@]} -gt 0 ]]; then
    # Not part of the verdict: tests that assert PTTL to the millisecond or wall-clock
    # deadlines cannot hold with the server 20-50x slower; their servers were still
    # checked by valgrind above. Read the logs for anything else.
    echo "    test binaries with failures under valgrind (not judged here): ${failed_tests[*]}"
fi
exit $status
