#!/usr/bin/env python3
"""The growth table (issue 15): what one steady-state call of RL.LOG and RL.ACQUIRE costs
at limits 10, 100, 1,000 and 10,000, against the Lua scripts of bench/lua/ at the same sizes.
`make growth` runs it alone, `make bench` after bench.py and bench/instructions.sh.

For each row and limit L, one key is first filled to L, then driven in its steady state,
where every measured call is admitted and the key stays at L entries or leases:

- RL.LOG key L 3600000: the fill is L calls with the test clock advanced by 3600000 / L ms
  after each (RL.CLOCK ADVANCE); a measured call is one more of the same, so each call ages
  exactly one entry out of the trailing hour (the one made an hour ago) and admits one.
- RL.ACQUIRE key L 3600000: the same with leases of an hour: each call finds exactly one
  lease expired (acquired an hour ago), purges it and is granted one.
- RL.RELEASE + RL.ACQUIRE (per pair): L leases of an hour at a frozen clock, then each
  iteration releases the oldest live lease by its token and acquires one.
- lua log / lua acquire: bench/lua/log.lua and concurrency.lua (EVALSHA), with their one
  redis.call('TIME') replaced by the time passed as the first argument (a wrapper, a few
  hundred instructions), driven like RL.LOG and RL.ACQUIRE above (now += 3600000 / L ms).
- lua ZREM + concurrency.lua (pair): as the module's pair, the release being a ZREM of the
  token (the script's time moves 1 us per iteration: its tokens are `<now>-<set size>`).
  concurrency.lua PEXPIREs only when the key's PTTL, on the server's real clock, fell below
  the lease: its bytes per request vary a little with the speed of the run.
The test clock (`test-clock yes`, RL.CLOCK SET to a fixed instant first) makes every run
identical; windows and leases of an hour mean that no key expires by the server's clock
during a slow valgrind run. The log's 32-bit offsets are rebased (O(L)) about once every
11.6 simulated minutes (docs/internals.md): part of the steady state, counted as it falls.

Columns:
- instr/call AOF off, AOF on: instructions per call counted by callgrind inside Redis's
  call() (--toggle-collect=call, as bench/instructions.sh), on Redis 7.0. The fill runs on
  a native server, which SAVEs right after it (before any replica: an RDB written with a
  replication backlog gives its loader one, and a backlog costs every propagated command);
  a redis-server under valgrind (--instr-atstart=no, then callgrind_control -i on) loads
  that RDB and carries on from the same state and clock. Counters are zeroed before and
  dumped after each phase: N iterations with `appendonly no`; then N RL.CLOCK ADVANCE alone
  (the clock moved back afterwards), subtracted from the module's clocked rows; then
  CONFIG SET appendonly yes (appendfsync everysec, automatic rewrites off), the rewrite
  awaited, and N more iterations. The AOF's write() and fsync happen outside call() and are
  not counted; the propagation into the AOF buffer is. N is 1,000 (200 with --quick) but
  100 at limit 10,000, where a call costs up to a million instructions today: the counts
  are deterministic (within ~0.5%: hash seeds differ per process).
- replicated bytes/request: the native primary with a replica on 127.0.0.1 attached after
  the fill (REPLICAOF at start, full sync; waiting for master_link_status:up
  and equal offsets, never sleeping for a fixed time), the primary's master_repl_offset
  delta over N iterations, divided by N. Replica pings are set an hour apart so none falls
  in a measurement; the replica's output buffer is unlimited (today a limit-10,000 key
  sends ~80 KB per write).
- AOF bytes/request: the same primary with `appendonly yes`, `appendfsync always` (switched
  on after the fill, its rewrite awaited): aof_current_size delta over the N iterations / N.
- The second table: each figure at 10,000 divided by the same figure at 100 (issue 15's
  target: at most 2, and replicated bytes per request constant).

  python3 bench/growth.py                  # everything (3.5 min on 2 loaded cores)
  python3 bench/growth.py --quick          # N 200 instead of 1000 (as long: fills dominate)
  python3 bench/growth.py --limits 10,100 --rows log,lua-log --no-instr

Writes the tables to stdout and to bench/results/growth.txt (growth-quick.txt with --quick).
"""

import argparse
import collections
import copy
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import LUA_DIR, MODULE, RESULTS, Conn, RespError, die, free_port, git, log  # noqa: E402

LIMITS = (10, 100, 1000, 10000)
HOUR_MS = 3_600_000
T0_MS = 1_900_000_000_000  # where the test clock starts: a fixed instant, every run alike
WARM = 16  # iterations after the fill (and after each switch) before anything is measured

LUA_CLOCK = """
local __now = tonumber(ARGV[1])
local function __time() return {math.floor(__now / 1000000), __now % 1000000} end
local function __body(KEYS, ARGV)
__BODY__
end
local __args = {}
for i = 2, #ARGV do __args[#__args + 1] = ARGV[i] end
return __body(KEYS, __args)
"""


def lua_clocked(script):
    body = (LUA_DIR / f"{script}.lua").read_text()
    needle = "redis.call('TIME')"
    if body.count(needle) != 1:
        die(f"bench/lua/{script}.lua must call {needle} exactly once")
    return LUA_CLOCK.replace("__BODY__", body.replace(needle, "__time()"))


# --------------------------------------------------------------------------- rows


class Row:
    """One row of the table: how to fill a key to L and drive it in its steady state.
    steps(i) lists iteration i's commands as (argv, measured); the fill is iterations
    0..L-1. A measured reply must admit; `clock` rows have RL.CLOCK steps (subtracted)."""

    clock = False

    def __init__(self, limit, conn):
        self.limit = limit
        self.step_ms = HOUR_MS // limit
        self.key = f"g:{self.name_id}:{limit}"

    def check(self, argv, reply):
        if not isinstance(reply, list) or reply[0] != 1:
            raise RespError(f"{' '.join(map(str, argv))}: not admitted: {reply!r}")

    def got(self, i, argv, reply):
        pass

    def attach(self, conn):
        """Another server now holds the key (loaded from an RDB)."""

    def size(self, conn):
        """Entries or leases the key holds (must stay at the limit)."""
        info = conn.call("RL.INFO", self.key)
        d = dict(zip(info[::2], info[1::2]))
        return int(d.get("entries", d.get("leases", -1)))


class ModuleClocked(Row):
    clock = True

    def steps(self, i):
        return [([self.cmd, self.key, self.limit, HOUR_MS], True),
                (["RL.CLOCK", "ADVANCE", self.step_ms], False)]


class LogRow(ModuleClocked):
    name, name_id, cmd = "RL.LOG", "log", "RL.LOG"


class AcquireRow(ModuleClocked):
    name, name_id, cmd = "RL.ACQUIRE", "acquire", "RL.ACQUIRE"


class PairRow(Row):
    name, name_id, release = "RL.RELEASE + RL.ACQUIRE (pair)", "pair", "RL.RELEASE"

    def __init__(self, limit, conn):
        super().__init__(limit, conn)
        self.tokens = {}

    def acquire(self, i):
        return ["RL.ACQUIRE", self.key, self.limit, HOUR_MS]

    def steps(self, i):
        acq = (self.acquire(i), True)
        if i < self.limit:
            return [acq]
        return [([self.release, self.key, self.tokens.pop(i - self.limit)], True), acq]

    def check(self, argv, reply):
        if argv[0] == self.release:
            if reply != 1:
                raise RespError(f"{argv[0]} {argv[2]}: {reply!r}")
        else:
            super().check(argv, reply)

    def got(self, i, argv, reply):
        if argv[0] != self.release:
            self.tokens[i] = reply[5]


class LuaRow(Row):
    def __init__(self, limit, conn):
        super().__init__(limit, conn)
        self.sha = conn.call("SCRIPT", "LOAD", lua_clocked(self.script))

    def attach(self, conn):
        if conn.call("SCRIPT", "LOAD", lua_clocked(self.script)) != self.sha:
            die("SCRIPT LOAD gave another sha")

    def steps(self, i):
        now_us = (T0_MS + i * self.step_ms) * 1000
        return [(["EVALSHA", self.sha, 1, self.key, now_us, self.limit, HOUR_MS], True)]

    def size(self, conn):
        return conn.call("ZCARD", self.key)


class LuaLogRow(LuaRow):
    name, name_id, script = "lua log (log.lua)", "lua-log", "log"


class LuaAcquireRow(LuaRow):
    name, name_id, script = "lua acquire (concurrency.lua)", "lua-acquire", "concurrency"


class LuaPairRow(PairRow, LuaRow):
    """ZREM of the oldest lease + concurrency.lua; its clock moves 1 us per iteration (its
    tokens are `<now>-<set size>`, unique only while the set grows within one microsecond)."""
    name, name_id, release, script = "lua ZREM + concurrency.lua (pair)", "lua-pair", "ZREM", "concurrency"

    def acquire(self, i):
        return ["EVALSHA", self.sha, 1, self.key, T0_MS * 1000 + i, self.limit, HOUR_MS]


ROWS = [LogRow, LuaLogRow, AcquireRow, LuaAcquireRow, PairRow, LuaPairRow]


class Driver:
    """Runs iterations of a row on a connection, pipelined, checking every measured reply."""

    def __init__(self, conn, row):
        self.conn, self.row, self.i = conn, row, 0

    def run(self, count, batch=64):
        if isinstance(self.row, PairRow):
            batch = min(batch, self.row.limit)  # a release needs the token of L iterations ago
        end = self.i + count
        while self.i < end:
            n = min(batch, end - self.i)
            plan = []
            for j in range(self.i, self.i + n):
                plan += [(j, argv, m) for argv, m in self.row.steps(j)]
            self.conn.sock.sendall(b"".join(Conn.encode(argv) for _, argv, _ in plan))
            for j, argv, measured in plan:
                reply = self.conn.read()
                if measured:
                    self.row.check(argv, reply)
                    self.row.got(j, argv, reply)
            self.i += n

    def clock_only(self, count, batch=64):
        """`count` RL.CLOCK ADVANCE steps alone (what the clocked rows add per iteration)."""
        done = 0
        while done < count:
            n = min(batch, count - done)
            self.conn.sock.sendall(b"".join(Conn.encode(["RL.CLOCK", "ADVANCE", self.row.step_ms])
                                            for _ in range(n)))
            for _ in range(n):
                self.conn.read()
            done += n


# --------------------------------------------------------------------------- servers


class Proc:
    def __init__(self, argv, workdir, name, valgrind=None):
        self.dir = Path(workdir) / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
               "--dir", str(self.dir), "--logfile", str(self.dir / "server.log"), *argv]
        if valgrind:
            cmd = valgrind + cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
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
                time.sleep(0.1)

    def tail(self):
        try:
            return "\n".join((self.dir / "server.log").read_text(errors="replace").splitlines()[-15:])
        except OSError:
            return "(no log)"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_for(what, cond, timeout=300):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            die(f"timed out waiting for {what}")
        time.sleep(0.02)


def aof_on(conn, fsync):
    """CONFIG SET appendonly yes, and wait for its rewrite to finish (the AOF is then on)."""
    conn.call("CONFIG", "SET", "appendfsync", fsync)
    conn.call("CONFIG", "SET", "appendonly", "yes")

    def done():
        p = conn.info("persistence")
        return (p.get("aof_enabled") == "1" and p.get("aof_rewrite_in_progress") == "0"
                and p.get("aof_rewrite_scheduled") == "0")
    wait_for("the AOF rewrite", done)
    if conn.info("persistence").get("aof_last_bgrewrite_status") != "ok":
        die("the AOF rewrite failed")


def module_args(module):
    return ["--loadmodule", str(module), "test-clock", "yes"]


def fill(conn, row, drv):
    conn.call("RL.CLOCK", "SET", T0_MS)
    drv.run(row.limit)
    drv.run(WARM)
    got = row.size(conn)
    if got != row.limit:
        die(f"{row.name} at {row.limit}: the key holds {got} after the fill, not {row.limit}")


# --------------------------------------------------------------------------- measuring


class Callgrind:
    """A redis-server under callgrind, instrumenting nothing until `callgrind_control -i on`."""

    def __init__(self, workdir, name, argv):
        self.out = Path(workdir) / name
        self.out.mkdir(parents=True, exist_ok=True)
        vg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--toggle-collect=call",
              f"--callgrind-out-file={self.out}/cg.%p"]
        self.srv = Proc(argv, workdir, name + "-server", valgrind=vg)
        self.pid = self.srv.proc.pid
        self.dumps = 0

    def ctl(self, *args):
        r = subprocess.run(["callgrind_control", *args, str(self.pid)], capture_output=True, text=True)
        if r.returncode != 0 or "OK" not in r.stdout:
            die(f"callgrind_control {' '.join(args)} failed: {r.stdout}{r.stderr}")

    def count(self, fn):
        """Instructions counted inside call() while fn() runs."""
        self.ctl("-z")
        fn()
        self.ctl("-d")
        self.dumps += 1
        path = self.out / f"cg.{self.pid}.{self.dumps}"
        wait_for(f"{path}", lambda: path.exists() and "totals:" in path.read_text(errors="replace"), 60)
        for ln in path.read_text(errors="replace").splitlines():
            if ln.startswith("totals:"):
                return int(ln.split()[1])
        die(f"no totals in {path}")


PRIMARY = ["--appendonly", "no", "--auto-aof-rewrite-percentage", "0",
           "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
           "--repl-ping-replica-period", "3600", "--client-output-buffer-limit", "replica 0 0 0"]


def measure(workdir, module, cls, limit, n, n_instr, do_bytes, do_instr):
    """One row at one limit: the fill and the bytes on a native primary with a replica, then
    the primary's RDB loaded into a redis-server under callgrind, which carries on from the
    same state and clock (so the fill never runs under valgrind)."""
    res = {}
    name = f"{cls.name_id}-{limit}"
    prim = Proc([*PRIMARY, *module_args(module)], workdir, name + "-primary")
    rep = None
    try:
        c = prim.conn
        row = cls(limit, c)
        drv = Driver(c, row)
        fill(c, row, drv)
        # The state the callgrind server starts from: saved before any replica or AOF (an
        # RDB written with a replication backlog would give its loader one, which costs every
        # propagated command), with the driver where it stood.
        clock_ms = c.call("RL.CLOCK", "GET")
        c.call("SAVE")
        saved = copy.deepcopy(row), drv.i
        if do_bytes:
            aof_on(c, "always")
            rep = Proc(["--appendonly", "no", "--replicaof", "127.0.0.1", str(prim.port),
                        "--loadmodule", str(module)], workdir, name + "-replica")

            def synced():
                r = rep.conn.info("replication")
                return (r.get("master_link_status") == "up"
                        and r.get("master_repl_offset") == c.info("replication").get("master_repl_offset"))
            wait_for("the replica's sync", synced)
            drv.run(WARM)  # the first writes after a sync or a rewrite also carry a SELECT
            wait_for("the replica", synced)
            off0 = int(c.info("replication")["master_repl_offset"])
            aof0 = int(c.info("persistence")["aof_current_size"])
            drv.run(n)
            wait_for("the replica", synced)
            off1 = int(c.info("replication")["master_repl_offset"])
            aof1 = int(c.info("persistence")["aof_current_size"])
            if row.size(rep.conn) != limit or row.size(c) != limit:
                die(f"{row.name} at {limit}: the replica or the primary left the steady state")
            res["repl"], res["aof"] = (off1 - off0) / n, (aof1 - aof0) / n
    finally:
        if rep:
            rep.stop()
        prim.stop()
    if not do_instr:
        return res
    srv_dir = Path(workdir) / f"cg-{name}-server"  # Proc's directory for that name
    srv_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(prim.dir / "dump.rdb", srv_dir / "dump.rdb")
    (prim.dir / "dump.rdb").unlink()
    cg = Callgrind(workdir, "cg-" + name, ["--appendonly", "no", "--auto-aof-rewrite-percentage", "0",
                                           "--dbfilename", "dump.rdb", *module_args(module)])
    try:
        c = cg.srv.conn
        c.call("RL.CLOCK", "SET", clock_ms)
        row = saved[0]
        row.attach(c)
        drv = Driver(c, row)
        drv.i = saved[1]
        if row.size(c) != limit:
            die(f"{row.name} at {limit}: the RDB did not bring the key back")
        cg.ctl("-i", "on")
        drv.run(WARM)
        off = cg.count(lambda: drv.run(n_instr))
        clock = 0
        if row.clock:
            clock = cg.count(lambda: drv.clock_only(n_instr))
            c.call("RL.CLOCK", "ADVANCE", -n_instr * row.step_ms)  # back: the steady state goes on
        aof_on(c, "everysec")
        drv.run(WARM)
        on = cg.count(lambda: drv.run(n_instr))
        if row.size(c) != limit:
            die(f"{row.name} at {limit}: the key left its steady state")
        res["off"], res["on"], res["clock"] = (off - clock) / n_instr, (on - clock) / n_instr, clock / n_instr
        return res
    finally:
        cg.srv.stop()


# --------------------------------------------------------------------------- report


def fmt(x):
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def report(results, rows, limits, meta):
    L = [f"## Growth per call (issue 15), {meta}", ""]
    L.append("| command | limit | instr/call AOF off | instr/call AOF on | replicated bytes/request"
             " | AOF bytes/request |")
    L.append("|---|---:|---:|---:|---:|---:|")
    for cls in rows:
        for lim in limits:
            r = results.get((cls.name_id, lim), {})
            L.append(f"| {cls.name} | {lim:,} | {fmt(r.get('off'))} | {fmt(r.get('on'))} | "
                     f"{fmt(r.get('repl'))} | {fmt(r.get('aof'))} |")
    if 100 in limits and 10000 in limits:
        L += ["", "Ratio 10,000 vs 100 (issue 15: at most 2; replicated bytes constant, i.e. 1):", ""]
        L.append("| command | instr AOF off | instr AOF on | replicated bytes | AOF bytes |")
        L.append("|---|---:|---:|---:|---:|")
        for cls in rows:
            a, b = results.get((cls.name_id, 10000), {}), results.get((cls.name_id, 100), {})
            cells = []
            for f in ("off", "on", "repl", "aof"):
                cells.append(f"{a[f] / b[f]:.2f}" if a.get(f) and b.get(f) else "-")
            L.append(f"| {cls.name} | " + " | ".join(cells) + " |")
    return "\n".join(L)


def n_instr(n, limit):
    """Iterations under callgrind: N up to limit 1,000, fewer above (at 10,000 a call costs up
    to a million instructions today); the counts are deterministic, so 100 suffice."""
    return max(100, n * 1000 // max(limit, 1000))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="N 200 iterations per figure instead of 1000")
    ap.add_argument("-n", type=int, help="measured iterations per figure")
    ap.add_argument("--limits", default=",".join(map(str, LIMITS)))
    ap.add_argument("--rows", help="comma-separated: " + ",".join(c.name_id for c in ROWS))
    ap.add_argument("--no-instr", action="store_true", help="skip callgrind (bytes only)")
    ap.add_argument("--no-bytes", action="store_true", help="skip the replica and AOF bytes")
    ap.add_argument("--module", default=str(MODULE))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    n = args.n or (200 if args.quick else 1000)
    limits = [int(x) for x in args.limits.split(",")]
    rows = [c for c in ROWS if not args.rows or c.name_id in args.rows.split(",")]
    t0 = time.time()
    module = Path(args.module)
    if not module.is_file():
        die(f"{module} not found: run cargo build --release first (make growth does)")
    if not args.no_instr and not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        log("==> growth: installing valgrind")
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "update", "-qq"], stdout=subprocess.DEVNULL, check=False)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "valgrind"], stdout=subprocess.DEVNULL, check=True)
    work = Path(tempfile.mkdtemp(prefix="rl-growth-"))
    mod_copy = work / module.name
    shutil.copy2(module, mod_copy)
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()
    server = next((w[2:] for w in version if w.startswith("v=")), "?")
    results = collections.defaultdict(dict)
    try:
        for cls in rows:
            for lim in limits:
                t = time.time()
                r = results[(cls.name_id, lim)]
                r.update(measure(work, mod_copy, cls, lim, n, n_instr(n, lim),
                                 not args.no_bytes, not args.no_instr))
                log(f"    {cls.name} at {lim:,}: " + ", ".join(f"{k} {v:,.1f}" for k, v in r.items())
                    + f" ({time.time() - t:.0f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    head = git("rev-parse", "--short=12", "HEAD") or "?"
    big = [lim for lim in limits if n_instr(n, lim) != n]
    meta = (f"redis {server}, git {head}, {n} measured iterations per figure"
            + "".join(f" ({n_instr(n, lim)} under callgrind at {lim:,})" for lim in big) + ", "
            f"{datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")
    text = report(results, rows, limits, meta)
    clocks = sorted({round(r["clock"]) for r in results.values() if r.get("clock")})
    if clocks:
        text += (f"\n\nThe module's RL.LOG and RL.ACQUIRE rows exclude the RL.CLOCK ADVANCE that "
                 f"follows each call ({', '.join(map(str, clocks))} instructions, measured alone).")
    text += f"\nRuntime {time.time() - t0:.0f} s; `python3 bench/growth.py{' --quick' if args.quick else ''}`."
    print()
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"growth{'-quick' if args.quick else ''}.txt"
    path.write_text(text + "\n")
    log(f"==> growth: wrote {path}")


if __name__ == "__main__":
    main()
