#!/usr/bin/env python3
"""The hot-path figures of issue 25, each a ratio measured in the same run, with instruction
counts from callgrind (the figure that does not move with the load of a shared machine).
`make instructions` and `make bench` run it after bench/instructions.sh; alone:

  python3 bench/issue25.py                 # N 20,000 calls per figure (about 1 min idle)
  python3 bench/issue25.py --quick         # N 5,000 (about 40 s)
  python3 bench/issue25.py -n 10000 --keys 1000 --module path/to/lib.so --out bench/results

How each figure is counted. A fresh server per case runs under
`valgrind --tool=callgrind --toggle-collect=call`: only Redis's call() is counted (the
command, its reply, its propagation, its stats). Counters are zeroed (`callgrind_control -z`)
right before the measured calls and dumped (`-d`) right after them, so neither the start,
a fill made beforehand, nor SHUTDOWN (which frees every key inside call()) is in a figure.
The client is one connection sending pipelines of 16; keys go round 1,000 names in order
(`--keys`), so the measured calls are, as in bench/instructions.sh, 1,000 creations and then
calls on existing keys. Every rule's period is an hour: nothing expires during the slow run.
Every reply is checked (admitted or refused as the case expects).

1. RL.GCRA vs floor: `RL.GCRA k 1000 1 3600000` against `FLOOR.HIT k 1000 1 3600000` of
   bench/floor/floor.c (which replicates its effect with RedisModule_Replicate), each in its
   own server, on Redis 7.0 (the system redis-server), Redis 8.6.3 and Valkey 9.1.2 (the
   launchers scripts/servers.sh writes to ~/.cache/redis-ratelimit/servers/bin, fetched the
   same way when missing; $RL_SERVERS_DIR overrides the place).
2. The module's own code per RL.GCRA (Redis 7.0): from the same dump, the instructions whose
   code lies in the module's .so (callgrind's self cost per object file: every function of
   the .so, whoever called it), plus what the .so's functions spend in libc and the loader
   (memcpy, memcmp, ... called directly from the module). Not counted: the module API
   (RedisModule_* functions and everything they call, allocation through RedisModule_Alloc
   included), which is listed apart in the breakdown. The floor's figure is counted the same
   way, for scale.
3. RL.ALL with two rules: `RL.ALL 2 {u:i}:a {u:i}:b GCRA 1000 1 3600000 SLIDING 1000 3600000`
   (keys sharing a hash tag) against one RL.GCRA, each from empty keys.
4. Replica vs primary: a primary and a replica (REPLICAOF, diskless full sync, pings an hour
   apart), both under callgrind; both are zeroed, the primary takes N RL.GCRA, the replica's
   offset is waited for, both are dumped. Figure: the replica's instructions (applying
   RL._APPLY) over the primary's (the command, with the replica attached), per write; and,
   stricter, over figure 1's RL.GCRA on Redis 7.0 (a primary with no replica to feed).
5. Effect payload bytes per write: a native Redis 7.0 (no valgrind) with `appendonly yes`
   runs 200 calls of each of RL.GCRA, RL.TOKENBUCKET, RL.QUEUE, CL.THROTTLE (the GCRA
   family) and RL.SLIDING, RL.FIXED (the windows); the AOF's incr files are parsed and every
   `RL._APPLY key payload...` counted: payload = the bytes of its arguments after the key.
   The figure is the largest over those commands; the table lists each, and the AOF bytes
   per write (the whole RESP command).
6. RL.ACQUIRE at limit 100 vs 10: bench/growth.py's steady state (a key full to its limit,
   each call purging one expired lease and granted one, test clock, the RL.CLOCK ADVANCE
   steps subtracted), AOF off, 1,000 iterations (200 with --quick).
7. Refused RL.GCRA vs INCR: 1,000 keys filled first (`RL.GCRA r:i 1 1 3600000`, each once,
   admitted; `INCR` once each in the INCR server), not counted; then N calls, every one
   refused (nothing written, nothing replicated), against N INCR on the existing keys.

Writes the table to stdout and to bench/results/issue25.txt (issue25-quick.txt with --quick;
--out changes the directory), with the per-call breakdown of RL.GCRA and the floor.
"""

import argparse
import collections
import datetime
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import MODULE, RESULTS, ROOT, Conn, RespError, die, free_port, git, log  # noqa: E402
import growth  # noqa: E402

HOUR_MS = 3_600_000
PIPE = 16
SERVERS_DIR = Path(os.environ.get("RL_SERVERS_DIR")
                   or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                   / "redis-ratelimit" / "servers")
SERVERS = ("redis-7.0", "redis-8.6.3", "valkey-9.1.2")



# --------------------------------------------------------------------------- servers


def server_argv(name):
    """The argv that starts server NAME (a launcher's exec line, run directly, so that
    valgrind instruments the server itself and not /bin/sh)."""
    if name == "redis-7.0":
        path = shutil.which("redis-server")
        if not path:
            die("no redis-server (make deps)")
        return [path]
    launcher = SERVERS_DIR / "bin" / name
    if not os.access(launcher, os.X_OK):
        log(f"==> issue25: fetching server binaries into {SERVERS_DIR} (scripts/servers.sh, once)")
        r = subprocess.run(["bash", str(ROOT / "scripts" / "servers.sh"), str(SERVERS_DIR)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if not os.access(launcher, os.X_OK):
            die(f"scripts/servers.sh did not bring {name}: {r.stderr[-500:]}")
    for ln in launcher.read_text().splitlines():
        if ln.startswith("exec "):
            argv = shlex.split(ln[5:])
            if argv and argv[-1] == "$@":
                argv = argv[:-1]
            return argv
    die(f"{launcher}: no exec line")


def server_version(argv):
    out = subprocess.run([*argv, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"v=(\S+)", out)
    return m.group(1) if m else "?"


class Server:
    """A server (optionally under callgrind --toggle-collect=call) on a free port."""

    def __init__(self, work, name, argv, extra, callgrind=True):
        self.dir = Path(work) / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        cmd = [*argv, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
               "--dir", str(self.dir), "--logfile", str(self.dir / "server.log"), *extra]
        if callgrind:
            cmd = ["valgrind", "--tool=callgrind", "--toggle-collect=call",
                   f"--callgrind-out-file={self.dir}/cg.%p", *cmd]
        self.callgrind = callgrind
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(self.dir / "stderr.log", "w"))
        self.pid = self.proc.pid
        self.dumps = 0
        deadline = time.time() + 180
        while True:
            if self.proc.poll() is not None:
                die(f"{name} exited at start: {' '.join(cmd)}\n{self.tail()}")
            try:
                self.conn = Conn(self.port)
                self.conn.call("PING")
                break
            except (OSError, RespError, ConnectionError):
                if time.time() > deadline:
                    self.stop()
                    die(f"{name} did not answer PING on {self.port}\n{self.tail()}")
                time.sleep(0.2)

    def tail(self):
        out = []
        for f in ("server.log", "stderr.log"):
            try:
                out += (self.dir / f).read_text(errors="replace").splitlines()[-10:]
            except OSError:
                pass
        return "\n".join(out)

    def ctl(self, *args):
        r = subprocess.run(["callgrind_control", *args, str(self.pid)], capture_output=True, text=True)
        if r.returncode != 0 or "OK" not in r.stdout:
            die(f"callgrind_control {' '.join(args)} failed: {r.stdout}{r.stderr}")

    def zero(self):
        self.ctl("-z")

    def dump(self):
        """Dump the counters; returns the parsed dump (Profile)."""
        self.ctl("-d")
        self.dumps += 1
        path = self.dir / f"cg.{self.pid}.{self.dumps}"
        deadline = time.time() + 120
        while not (path.exists() and "totals:" in path.read_text(errors="replace")):
            if time.time() > deadline:
                die(f"no dump {path}")
            time.sleep(0.1)
        return Profile(path)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --------------------------------------------------------------------------- callgrind dumps


class Profile:
    """A callgrind dump: totals, self cost per object file, and the calls between them."""

    def __init__(self, path):
        names = {"ob": {}, "fn": {}}
        self.self_ob = collections.Counter()
        self.self_fn = collections.Counter()
        self.calls = collections.Counter()  # (caller ob, caller fn, callee ob, callee fn) -> inclusive
        self.totals = None
        ob = fn = cob = cfn = None
        pending = False

        def name(kind, rest):
            m = re.match(r"\((\d+)\)(?: (.*))?$", rest)
            if not m:
                return rest
            if m.group(2) is not None:
                names[kind][m.group(1)] = m.group(2)
            return names[kind].get(m.group(1), rest)

        with open(path, errors="replace") as f:
            for ln in f:
                ln = ln.rstrip("\n")
                if not ln:
                    continue
                c = ln[0]
                if c.isdigit() or c in "+-*":
                    parts = ln.split()
                    cost = int(parts[1]) if len(parts) > 1 else 0
                    if pending:
                        self.calls[(ob, fn, cob or ob, cfn)] += cost
                        pending, cob, cfn = False, None, None
                    else:
                        self.self_ob[ob] += cost
                        self.self_fn[(ob, fn)] += cost
                elif ln.startswith("ob="):
                    ob = name("ob", ln[3:])
                elif ln.startswith("fn="):
                    fn = name("fn", ln[3:])
                elif ln.startswith("cob="):
                    cob = name("ob", ln[4:])
                elif ln.startswith("cfn="):
                    cfn = name("fn", ln[4:])
                elif ln.startswith("calls="):
                    pending = True
                elif ln.startswith("totals:"):
                    self.totals = int(ln.split()[1])
        summed = sum(self.self_ob.values())
        if self.totals is None:
            self.totals = summed
        elif abs(summed - self.totals) > self.totals / 1000:
            die(f"{path}: self costs sum to {summed}, totals say {self.totals} (a parse error)")

    def own(self, so):
        """Instructions of the module's own code: self cost in the .so, plus its direct calls
        into objects other than the server (libc, the loader); and the API calls apart."""
        so = str(so)
        mine = self.self_ob.get(so, 0)
        ext = 0
        api = collections.Counter()
        for (o, _f, co, cf), cost in self.calls.items():
            if o != so or co == so:
                continue
            if re.search(r"(redis|valkey)-(server|check-rdb)", co or ""):
                api[cf] += cost
            else:
                ext += cost
        return mine, ext, api


# --------------------------------------------------------------------------- driving


def drive(conn, argvs, expect):
    """Send argvs in pipelines of PIPE, checking each reply with expect(reply)."""
    for i in range(0, len(argvs), PIPE):
        batch = argvs[i:i + PIPE]
        conn.sock.sendall(b"".join(Conn.encode(a) for a in batch))
        for a in batch:
            try:
                r = conn.read()
            except RespError as e:
                die(f"{' '.join(map(str, a))}: {e}")
            if not expect(r):
                die(f"{' '.join(map(str, a))}: unexpected reply {r!r}")


def admitted(r):
    return isinstance(r, list) and r[0] == 1


def refused(r):
    return isinstance(r, list) and r[0] == 0


def is_int(r):
    return isinstance(r, int)


def measure(work, tag, argv, module, n, keys, make, expect, fill=None, fill_expect=None):
    """N calls make(i) in a fresh server under callgrind; returns (instructions per call,
    Profile). fill(i) for i < keys runs first, uncounted."""
    srv = Server(work, tag, argv, ["--appendonly", "no", "--loadmodule", str(module)])
    try:
        if fill:
            drive(srv.conn, [fill(i) for i in range(keys)], fill_expect)
        srv.zero()
        drive(srv.conn, [make(i % keys) for i in range(n)], expect)
        prof = srv.dump()
        return prof.totals / n, prof
    finally:
        srv.stop()


def gcra(i):
    return ["RL.GCRA", f"b:{i}", 1000, 1, HOUR_MS]


def floor_hit(i):
    return ["FLOOR.HIT", f"b:{i}", 1000, 1, HOUR_MS]


def replica_ratio(work, argv, module, n, keys):
    prim = Server(work, "primary", argv, [
        "--appendonly", "no", "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
        "--repl-ping-replica-period", "3600", "--client-output-buffer-limit", "replica 0 0 0",
        "--loadmodule", str(module)])
    rep = None
    try:
        rep = Server(work, "replica", argv, ["--appendonly", "no", "--replicaof", "127.0.0.1",
                                             str(prim.port), "--loadmodule", str(module)])

        def synced():
            r = rep.conn.info("replication")
            return (r.get("master_link_status") == "up"
                    and r.get("master_repl_offset") == prim.conn.info("replication").get("master_repl_offset"))

        growth.wait_for("the replica's sync", synced)
        drive(prim.conn, [["RL.GCRA", "warm", 1000, 1, HOUR_MS]], admitted)  # the SELECT
        growth.wait_for("the replica", synced)
        prim.zero()
        rep.zero()
        drive(prim.conn, [gcra(i % keys) for i in range(n)], admitted)
        growth.wait_for("the replica", synced)
        p, r = prim.dump(), rep.dump()
        if rep.conn.call("DBSIZE") != keys + 1:
            die("the replica does not hold the primary's keys")
        return p.totals / n, r.totals / n, r
    finally:
        if rep:
            rep.stop()
        prim.stop()


# --------------------------------------------------------------------------- payload bytes


PAYLOAD_CASES = [
    ("RL.GCRA", "gcra", lambda k: ["RL.GCRA", k, 1000, 1, HOUR_MS]),
    ("RL.TOKENBUCKET", "tb", lambda k: ["RL.TOKENBUCKET", k, 1000, 1, HOUR_MS]),
    ("RL.QUEUE", "queue", lambda k: ["RL.QUEUE", k, 1000, HOUR_MS]),
    ("CL.THROTTLE", "cl", lambda k: ["CL.THROTTLE", k, 999, 1, 3600]),
    ("RL.SLIDING", "sliding", lambda k: ["RL.SLIDING", k, 1000, HOUR_MS]),
    ("RL.FIXED", "fixed", lambda k: ["RL.FIXED", k, 1000, HOUR_MS]),
]


def parse_resp_commands(data):
    """The commands of an AOF (RESP arrays of bulk strings), as (argv, bytes)."""
    out, i = [], 0
    while i < len(data):
        if data[i:i + 1] != b"*":
            die(f"AOF: unexpected byte at {i}: {data[i:i + 20]!r}")
        start = i
        j = data.index(b"\r\n", i)
        n = int(data[i + 1:j])
        i = j + 2
        argv = []
        for _ in range(n):
            j = data.index(b"\r\n", i)
            ln = int(data[i + 1:j])
            argv.append(data[j + 2:j + 2 + ln])
            i = j + 2 + ln + 2
        out.append((argv, i - start))
    return out


def payload_bytes(work, module, calls=200, keys=10):
    srv = Server(work, "payload", server_argv("redis-7.0"),
                 ["--appendonly", "yes", "--appendfsync", "always", "--appenddirname", "aof",
                  "--auto-aof-rewrite-percentage", "0", "--loadmodule", str(module)], callgrind=False)
    try:
        for name, pre, make in PAYLOAD_CASES:
            ok = (lambda r: isinstance(r, list) and r[0] == 0) if name == "CL.THROTTLE" else admitted
            drive(srv.conn, [make(f"p:{pre}:{i % keys}") for i in range(calls)], ok)
        aofdir = srv.dir / "aof"
        data = b"".join(p.read_bytes() for p in sorted(aofdir.glob("*.incr.aof")))
    finally:
        srv.stop()
    res = {}
    for name, pre, _make in PAYLOAD_CASES:
        sizes, total, writes = collections.Counter(), 0, 0
        for argv, nbytes in parse_resp_commands(data):
            if len(argv) < 2 or not argv[1].startswith(f"p:{pre}:".encode()):
                continue
            total += nbytes
            if argv[0].upper() == b"RL._APPLY":
                writes += 1
                sizes[sum(len(a) for a in argv[2:])] += 1
        if writes != calls:
            die(f"{name}: {writes} RL._APPLY in the AOF for {calls} admitted calls")
        res[name] = dict(payload=max(sizes), sizes=dict(sizes), aof=total / calls)
    return res


# --------------------------------------------------------------------------- main


def fmt(x):
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="N 5,000 calls per figure instead of 20,000")
    ap.add_argument("-n", type=int, help="measured calls per figure")
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--module", default=os.environ.get("MODULE") or str(MODULE))
    ap.add_argument("--out", default=str(RESULTS), help="directory of issue25.txt")
    ap.add_argument("--file", help="the output file (instead of <out>/issue25[-quick].txt)")
    ap.add_argument("--servers", default=",".join(SERVERS), help="for figure 1")
    args = ap.parse_args()
    n = args.n or (5000 if args.quick else 20000)
    servers = ["redis-7.0"] + [s for s in args.servers.split(",") if s and s != "redis-7.0"]
    keys = args.keys
    t0 = time.time()
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        log("==> issue25: installing valgrind")
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "update", "-qq"], stdout=subprocess.DEVNULL, check=False)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "valgrind"], stdout=subprocess.DEVNULL, check=True)
    src = Path(args.module)
    if not src.is_file():
        die(f"{src} not found: run cargo build --release first (make build)")
    work = Path(tempfile.mkdtemp(prefix="rl-issue25-"))
    # Private copies: the module may be rebuilt while this runs.
    module = work / "libredis_ratelimit.so"
    shutil.copy2(src, module)
    floor = work / "floor.so"
    r = subprocess.run(["bash", str(ROOT / "bench" / "floor" / "build.sh"), str(floor)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        die(f"the floor module did not build: {r.stderr}")
    sha = subprocess.run(["sha256sum", str(module)], capture_output=True, text=True).stdout[:16]
    R = {}
    detail = []

    def step(msg):
        log(f"    {msg} ({time.time() - t0:.0f} s)")

    try:
        r7 = server_argv("redis-7.0")
        # 1 and 2: RL.GCRA vs the floor, per server; the module's own code from the same dumps.
        versions = {}
        for name in servers:
            argv = server_argv(name)
            versions[name] = server_version(argv)
            g, gp = measure(work, f"gcra-{name}", argv, module, n, keys, gcra, admitted)
            f, fp = measure(work, f"floor-{name}", argv, floor, n, keys, floor_hit, lambda r: isinstance(r, list))
            R[f"gcra/{name}"], R[f"floor/{name}"] = g, f
            mine, ext, api = gp.own(module)
            fmine, fext, fapi = fp.own(floor)
            R[f"own/{name}"] = (mine + ext) / n
            R[f"floor_own/{name}"] = (fmine + fext) / n
            parse = fapi.get("RM_StringToLongLong", 0) + fapi.get("VM_StringToLongLong", 0)
            detail.append(f"{name} ({versions[name]}): RL.GCRA {fmt(g)}, floor {fmt(f)} instructions/call;"
                          f" module's own code {fmt(mine / n)} in the .so + {fmt(ext / n)} in libc"
                          f" (floor: {fmt(fmine / n)} + {fmt(fext / n)}, and {fmt(parse / n)} parsing"
                          f" its integers in RM_StringToLongLong)")
            for label, a in (("RL.GCRA", api), ("floor", fapi)):
                top = ", ".join(f"{fn} {fmt(c / n)}" for fn, c in a.most_common(8))
                detail.append(f"    {label}: module API called from the .so, inclusive per call: {top}")
            step(f"{name}: RL.GCRA {fmt(g)}, floor {fmt(f)}, own code {fmt(R[f'own/{name}'])}")
        # 3: RL.ALL with two rules vs one RL.GCRA (Redis 7.0; the RL.GCRA of step 1).
        R["all"], _ = measure(work, "all", r7, module, n, keys,
                              lambda i: ["RL.ALL", 2, f"{{u:{i}}}:a", f"{{u:{i}}}:b",
                                         "GCRA", 1000, 1, HOUR_MS, "SLIDING", 1000, HOUR_MS],
                              lambda r: isinstance(r, list) and r and r[0] == 1)
        step(f"RL.ALL {fmt(R['all'])}")
        # 7: refused RL.GCRA vs INCR, on filled keys.
        R["refused"], _ = measure(work, "refused", r7, module, n, keys,
                                  lambda i: ["RL.GCRA", f"r:{i}", 1, 1, HOUR_MS], refused,
                                  fill=lambda i: ["RL.GCRA", f"r:{i}", 1, 1, HOUR_MS], fill_expect=admitted)
        R["incr"], _ = measure(work, "incr", r7, module, n, keys, lambda i: ["INCR", f"i:{i}"], is_int,
                               fill=lambda i: ["INCR", f"i:{i}"], fill_expect=is_int)
        step(f"refused RL.GCRA {fmt(R['refused'])}, INCR {fmt(R['incr'])}")
        # 4: the replica applying RL._APPLY vs the primary.
        R["primary"], R["replica"], rp = replica_ratio(work, r7, module, n, keys)
        mine, ext, api = rp.own(module)
        replica_detail = (f"replica (redis-7.0) per RL._APPLY: {fmt(R['replica'])}, module's own code "
                          f"{fmt((mine + ext) / n)}; module API called from the .so, inclusive: "
                          + ", ".join(f"{fn} {fmt(c / n)}" for fn, c in api.most_common(8)))
        step(f"primary {fmt(R['primary'])}, replica {fmt(R['replica'])}")
        # 5: payload bytes.
        R["payload"] = payload_bytes(work, module)
        step("payloads " + ", ".join(f"{k} {v['payload']}" for k, v in R["payload"].items()))
        # 6: RL.ACQUIRE at 100 vs 10 (bench/growth.py's steady state).
        gn = 200 if args.quick else 1000
        for lim in (10, 100):
            res = growth.measure(work, module, growth.AcquireRow, lim, gn, gn, False, True)
            R[f"acquire/{lim}"] = res["off"]
        step(f"RL.ACQUIRE at 10 {fmt(R['acquire/10'])}, at 100 {fmt(R['acquire/100'])}")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    # ------------------------------------------------------------------ the table
    rows = []

    def row(fig, value, target, unit="x", note=""):
        ok = "-" if target is None else ("yes" if value <= target else "NO")
        v = f"{value:.2f}x" if unit == "x" else f"{value:,.0f}{unit}"
        t = "-" if target is None else (f"<= {target:.2f}x" if unit == "x" else f"<= {target:,}{unit}")
        rows.append((fig, v, t, ok, note))

    for name in servers:
        g, f = R[f"gcra/{name}"], R[f"floor/{name}"]
        row(f"1. RL.GCRA / floor, {name}", g / f, 1.05, note=f"{fmt(g)} / {fmt(f)}")
    own7 = R.get("own/redis-7.0")
    if own7 is not None:
        # Target: about half of 1,592, the figure issue 25 measured.
        row("2. module's own code per RL.GCRA, redis-7.0", own7, 796, unit=" instr",
            note=f"issue 25 baseline 1,592 (target half); floor's own {fmt(R['floor_own/redis-7.0'])}")
        row("2. module's own code / floor's own code", own7 / R["floor_own/redis-7.0"], None)
    g7 = R["gcra/redis-7.0"]
    row("3. RL.ALL GCRA+SLIDING / RL.GCRA", R["all"] / g7, 1.6, note=f"{fmt(R['all'])} / {fmt(g7)}")
    row("4. replica applying RL._APPLY / its primary", R["replica"] / R["primary"], 0.6,
        note=f"{fmt(R['replica'])} / {fmt(R['primary'])} (the primary feeding that replica)")
    row("4. the same / a primary without replica", R["replica"] / g7, 0.6,
        note=f"{fmt(R['replica'])} / {fmt(g7)} (row 1's RL.GCRA, Redis 7.0)")
    worst = max(R["payload"].items(), key=lambda kv: kv[1]["payload"])
    row("5. effect payload bytes per write (max)", worst[1]["payload"], 44, unit=" B",
        note=", ".join(f"{k} {v['payload']}" for k, v in R["payload"].items()))
    a10, a100 = R["acquire/10"], R["acquire/100"]
    row("6. RL.ACQUIRE limit 100 / limit 10", a100 / a10, 1.1, note=f"{fmt(a100)} / {fmt(a10)}")
    row("7. refused RL.GCRA / INCR", R["refused"] / R["incr"], 1.8,
        note=f"{fmt(R['refused'])} / {fmt(R['incr'])}")

    head = git("rev-parse", "--short=12", "HEAD") or "?"
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    L = [f"== issue 25: hot-path ratios (callgrind instructions inside call(), {n:,} calls on "
         f"{keys:,} keys, pipeline {PIPE}; git {head}, module {sha}; {now}; "
         f"{time.time() - t0:.0f} s)",
         "servers: " + ", ".join(f"{k} = {v}" for k, v in versions.items()), ""]
    w = [max(len(r[i]) for r in rows + [("figure", "value", "target", "met", "")]) for i in range(4)]
    L.append(f"{'figure':<{w[0]}}  {'value':>{w[1]}}  {'target':>{w[2]}}  {'met':<{w[3]}}  measured")
    for fig, v, t, ok, note in rows:
        L.append(f"{fig:<{w[0]}}  {v:>{w[1]}}  {t:>{w[2]}}  {ok:<{w[3]}}  {note}")
    L += ["", "Breakdown (instructions per call):", *detail, replica_detail,
          "AOF bytes per write (RL._APPLY, RESP): "
          + ", ".join(f"{k} {v['aof']:.0f}" for k, v in R["payload"].items()),
          f"RL.ACQUIRE steady state (bench/growth.py, AOF off, {gn} iterations): "
          f"limit 10 {fmt(a10)}, limit 100 {fmt(a100)}"]
    text = "\n".join(L)
    print(text)
    dest = Path(args.file) if args.file else Path(args.out) / f"issue25{'-quick' if args.quick else ''}.txt"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text + "\n")
    met = sum(1 for r in rows if r[3] == "yes")
    log(f"==> issue25: {met} of {sum(1 for r in rows if r[3] != '-')} targets met; wrote {dest}")


if __name__ == "__main__":
    main()
