#!/usr/bin/env python3
"""The figures of issue 28 (leased allowance, local refusals), in one run (~1 min):

  python3 bench/issue28.py            # 10,000 requests per scenario
  python3 bench/issue28.py --quick    # 2,000

The seeds' scenario at scale: 4 OS processes (multiprocessing, fork), one hot key, a FIXED
rule of 1,000 per 60 s window, each process running the Python package's middleware (the
WSGI middleware's check(), the code path of every request, without the HTTP server) against
one redis-server with the module, loaded with the test clock:

1. At the limit: 10 windows of 1,000 requests (250 per process), 10,000 in all: the demand
   equals the limit. Between windows the coordinator moves RL.CLOCK (and the processes'
   package clock) to the next window's start, so a window never rolls during its requests.
2. A flood 10x over the limit: 10,000 requests (2,500 per process) in one window. The clock
   does not move within the window: for a FIXED rule every refusal's retry_after_ms is the
   window's end whenever it comes, so a moving clock would not change the counts.

Variants: plain (one command per request), leased (chunk 10; chunk 50; adaptive up to 10),
each with local refusals off and on. Measured: Redis calls (INFO commandstats, the module's
commands but RL.CLOCK) per admitted request, admitted in all (never above the rule:
1,000 per window), and early refusals (requests refused while the window still had room
held by other processes). Each process closes its middleware at the end (leases given back).

Needs redis-py: runs under clients/python/.venv (made by scripts/clients-test-python.sh;
created here with redis-py alone when missing). The package is imported from this tree.
Writes the table to stdout and bench/results/issue28.txt (issue28-quick.txt with --quick).
"""

import argparse
import datetime
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "clients" / "python" / ".venv"
MODULE = ROOT / "target" / "release" / "libredis_ratelimit.so"
RESULTS = ROOT / "bench" / "results"

try:
    import redis  # noqa: F401
except ImportError:
    py = VENV / "bin" / "python"
    if os.environ.get("ISSUE28_REEXEC"):
        sys.exit("issue28: redis-py missing even in clients/python/.venv")
    if not py.exists():
        print("==> issue28: creating clients/python/.venv (redis-py)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if subprocess.run([str(py), "-c", "import redis"], capture_output=True).returncode != 0:
        subprocess.run([str(py), "-m", "pip", "install", "-q", "redis==8.1.0"], check=True)
    os.environ["ISSUE28_REEXEC"] = "1"
    os.execv(str(py), [str(py), __file__, *sys.argv[1:]])

sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))
import multiprocessing as mp  # noqa: E402

import redis  # noqa: E402

from redis_ratelimit import Config, Lease, Limit, Request, Rule  # noqa: E402
from redis_ratelimit.wsgi import RateLimitMiddleware  # noqa: E402

PROCS = 4
LIMIT = 1000  # --quick: 200 (a tenth of the requests, as in the full run)
WINDOW = 60_000
T0 = 1_900_000_020_000  # a multiple of 60 s: the first window starts here


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def module_calls(r):
    n = 0
    for name, v in r.info("commandstats").items():
        cmd = name[len("cmdstat_"):] if name.startswith("cmdstat_") else name
        if (cmd.startswith("rl.") or cmd == "cl.throttle") and cmd not in ("rl.clock", "rl.policy"):
            n += int(v["calls"])
    return n


def worker(port, lease, local, windows, per_window, clock, barrier, out):
    cfg = Config(limits=[Limit("hot", Rule.fixed(LIMIT, WINDOW), lambda req: "tenant-1",
                               lease=lease)],
                 clock_ms=lambda: clock.value, local_refusals=local, lease_sweep_ms=0)
    mw = RateLimitMiddleware(lambda e, s: [b"ok"], redis=redis.Redis(port=port), config=cfg)
    req = Request("GET", "/", {}, "127.0.0.1", {})
    admitted = 0
    per = []
    for _ in range(windows):
        barrier.wait()  # the window is open
        a = 0
        for _ in range(per_window):
            out_ = mw.check(req)
            if out_ is None or out_.status is None:
                a += 1
        per.append(a)
        admitted += a
        barrier.wait()  # every process is done with this window
        barrier.wait()  # the coordinator moved the clock
    mw.close()
    out.put((admitted, per))


def scenario(port, lease, local, windows, total):
    r = redis.Redis(port=port, decode_responses=True)
    r.flushall()
    r.execute_command("RL.CLOCK", "SET", T0)
    r.execute_command("CONFIG", "RESETSTAT")
    ctx = mp.get_context("fork")
    clock = ctx.Value("q", T0)
    barrier = ctx.Barrier(PROCS + 1)
    out = ctx.Queue()
    per_window = total // windows // PROCS
    procs = [ctx.Process(target=worker, args=(port, lease, local, windows, per_window, clock,
                                              barrier, out)) for _ in range(PROCS)]
    t = time.time()
    for p in procs:
        p.start()
    for w in range(windows):
        barrier.wait()
        barrier.wait()
        r.execute_command("RL.CLOCK", "ADVANCE", WINDOW)
        clock.value += WINDOW
        barrier.wait()
    res = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    secs = time.time() - t
    calls = module_calls(r)
    admitted = sum(a for a, _ in res)
    per_window_admitted = [sum(x[1][w] for x in res) for w in range(windows)]
    # early refusals: a window that admitted fewer than min(demand, limit)
    demand = per_window * PROCS
    early_w = [min(demand, LIMIT) - a for a in per_window_admitted]
    early = sum(early_w)
    assert all(a <= LIMIT for a in per_window_admitted), per_window_admitted
    # the bound: at most (processes - 1) * chunk units refused early in a window
    assert lease is None or max(early_w) <= (PROCS - 1) * lease.chunk, early_w
    r.close()
    return dict(requests=demand * windows, admitted=admitted, calls=calls,
                per_admitted=calls / admitted if admitted else float("nan"),
                early=f"{early}/{max(early_w)}",
                max_window=max(per_window_admitted), secs=secs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--module", default=str(MODULE))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    if not os.path.isfile(args.module):
        sys.exit(f"issue28: module not built: {args.module}")
    server = shutil.which("redis-server") or sys.exit("issue28: no redis-server (make deps)")
    global LIMIT
    total = 2000 if args.quick else 10_000
    LIMIT = total // 10
    tmp = tempfile.mkdtemp(prefix="issue28-")
    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--dir", tmp, "--loadmodule", os.path.abspath(args.module),
                             "test-clock", "yes"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port)
        deadline = time.time() + 10
        while True:
            try:
                r.ping()
                break
            except redis.ConnectionError:
                if time.time() > deadline or proc.poll() is not None:
                    sys.exit("issue28: redis-server did not start")
                time.sleep(0.05)
        variants = [("plain", None), ("leased chunk 10", Lease(10, 1000)),
                    ("leased chunk 50", Lease(50, 1000)),
                    ("leased adaptive <= 10", Lease(10, 1000, adaptive=True))]
        rows = []
        for sc, windows in ((f"at the limit (10 windows x {LIMIT:,})", 10),
                            ("flood 10x (1 window)", 1)):
            for name, lease in variants:
                for local in (False, True):
                    m = scenario(port, lease, local, windows, total)
                    rows.append((sc, name, "on" if local else "off", m))
                    print(f"  {sc:34} {name:22} local {'on ' if local else 'off'} "
                          f"calls {m['calls']:6} admitted {m['admitted']:6}", flush=True)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    L = [f"== issue 28: leased allowance and local refusals "
         f"({datetime.date.today().isoformat()}, {PROCS} processes, one hot key, "
         f"FIXED {LIMIT} per {WINDOW // 1000} s, {total:,} requests per scenario"
         f"{', --quick' if args.quick else ''})",
         f"   {'scenario':34} {'variant':22} {'local':5} {'requests':>8} {'admitted':>8} "
         f"{'max/window':>10} {'early':>7} {'calls':>6} {'calls/admitted':>14} {'s':>5}"]
    for sc, name, local, m in rows:
        L.append(f"   {sc:34} {name:22} {local:5} {m['requests']:8} {m['admitted']:8} "
                 f"{m['max_window']:10} {m['early']:>7} {m['calls']:6} "
                 f"{m['per_admitted']:14.3f} {m['secs']:5.1f}")
    L.append("   calls: the module's commands the server ran (INFO commandstats, not RL.CLOCK): "
             "claims, refunds and plain checks; early: requests refused while the window "
             "had room (held by other processes' leases), in all / in the worst window "
             f"(checked <= (processes - 1) * chunk); max/window: never above {LIMIT}.")
    table = "\n".join(L)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"issue28{'-quick' if args.quick else ''}.txt").write_text(table + "\n")


if __name__ == "__main__":
    main()
