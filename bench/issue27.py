#!/usr/bin/env python3
"""The figures of issue 27 (WAIT), on the real clock, natively (no valgrind), in one run:

  python3 bench/issue27.py            # 1,000 waiters at 100 a second (about 25 s)
  python3 bench/issue27.py --quick    # 300 waiters

1. Waiting: N clients, each on its own connection, send `RL.GCRA k 1 100 1000 WAIT 60000`
   one after another (a key of 100 a second, burst 1). Checked: every one admitted, in
   arrival order (each client's waited_ms grows with its place), at exactly the rule's rate
   (admission i at i * 10 ms after the first, from the replies' waited_ms), every wake-up an
   admission (INFO: waits admitted = waits started, none timed out). Measured: server CPU
   (INFO cpu, user + sys) per admission, Redis calls per admission (1), and the latency from
   each request's admissible instant (first arrival + i * 10 ms) to its reply reaching the
   client, p50 and p99.
2. Polling, the workaround: the same N clients on another key of the same rule, each
   calling without WAIT and sleeping the reply's retry_after_ms after a refusal, until
   admitted. Measured: server CPU per admission and calls per admission.
3. Memory per waiter: `used_memory` with N connections waiting on a key that admits
   nobody, minus the same N connections idle (each having answered a PING), over N: what
   waiting adds to a connection (its queue entry, its blocked state).

Writes the table to stdout and bench/results/issue27.txt (issue27-quick.txt with --quick).
"""

import argparse
import asyncio
import datetime
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import MODULE, RESULTS, Conn, die, git, log  # noqa: E402
from issue25 import Server, server_argv  # noqa: E402
from issue26 import used_memory  # noqa: E402


def enc(*args):
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = str(a).encode()
        out.append(f"${len(b)}\r\n".encode() + b + b"\r\n")
    return b"".join(out)


async def read_reply(reader):
    line = await reader.readline()
    t = line[:1]
    if t == b"*":
        return [await read_reply(reader) for _ in range(int(line[1:]))]
    if t == b":":
        return int(line[1:])
    if t == b"$":
        n = int(line[1:])
        if n < 0:
            return None
        data = await reader.readexactly(n + 2)
        return data[:-2]
    if t in (b"+", b"-"):
        if t == b"-":
            raise RuntimeError(line.decode().strip())
        return line[1:].strip().decode()
    raise RuntimeError(f"bad reply {line!r}")


def cpu(conn):
    info = conn.call("INFO", "cpu")
    info = info.decode() if isinstance(info, bytes) else info
    v = {}
    for ln in info.splitlines():
        if ":" in ln:
            k, x = ln.split(":", 1)
            v[k] = x
    return float(v["used_cpu_user"]) + float(v["used_cpu_sys"])


def info_int(conn, field):
    info = conn.call("INFO", "ratelimit")
    info = info.decode() if isinstance(info, bytes) else info
    for ln in info.splitlines():
        if ln.startswith(field + ":"):
            return int(ln.split(":")[1])
    die(f"no {field}")


async def waiting(port, n, key, ctl, burst=1):
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(n)]
    # The first admits at once; the others queue in this order.
    t_first = None
    sent = []
    for i, (r, w) in enumerate(conns):
        w.write(enc("RL.GCRA", key, burst, 100, 1000, "WAIT", 60000))
        await w.drain()
        sent.append(time.monotonic())
        if i == 0:
            reply = await read_reply(r)
            t_first = time.monotonic()
            if reply[0] != 1:
                die(f"first request refused: {reply}")
        else:
            # Read by the server before the next one is sent (2 ms apart: arrival order
            # is the send order; checked below from the replies).
            await asyncio.sleep(0.002)
    results = []

    async def collect(i, r):
        rep = await read_reply(r)
        results.append((i, rep, time.monotonic()))

    await asyncio.gather(*(collect(i, r) for i, (r, _w) in enumerate(conns) if i > 0))
    for _r, w in conns:
        w.close()
    return t_first, sent, results


async def polling(port, n, key):
    calls = 0

    async def client():
        nonlocal calls
        r, w = await asyncio.open_connection("127.0.0.1", port)
        while True:
            w.write(enc("RL.GCRA", key, 1, 100, 1000))
            await w.drain()
            calls += 1
            rep = await read_reply(r)
            if rep[0] == 1:
                w.close()
                return
            await asyncio.sleep(rep[3] / 1000.0)

    await asyncio.gather(*(client() for _ in range(n)))
    return calls


async def hold(port, n, key, ctl):
    """N idle connections (each has answered a PING), the memory then, then each waiting."""
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(n)]
    for r, w in conns:
        w.write(enc("PING"))
        await w.drain()
        await read_reply(r)
    idle = used_memory(ctl)
    for _r, w in conns:
        w.write(enc("RL.GCRA", key, 1, 1, 3_600_000, "WAIT", 600_000))
        await w.drain()
    return conns, idle


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-n", type=int)
    ap.add_argument("--module", default=str(MODULE))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    n = args.n or (300 if args.quick else 1000)
    src = Path(args.module)
    if not src.is_file():
        die(f"{src} not found: run cargo build --release first")
    t0 = time.time()
    work = Path(tempfile.mkdtemp(prefix="rl-issue27-"))
    module = work / "libredis_ratelimit.so"
    shutil.copy2(src, module)
    argv = server_argv("redis-7.0")
    srv = Server(work, "wait", argv, ["--appendonly", "no", "--maxclients", str(n + 100),
                                      "--loadmodule", str(module)], callgrind=False)
    try:
        c = srv.conn
        log(f"==> issue27: {n} waiters at 100 a second, burst 10")
        b_first, b_sent, b_results = asyncio.run(waiting(srv.port, n, "b", c, burst=10))
        b_results.sort()
        # Server side: admission instant = arrival + waited_ms; admissible = first + (i-9) * 10 ms.
        b_late = [(b_sent[i] + rep[5] / 1000 - (b_first + max(0, i - 9) * 0.010)) * 1000
                  for i, rep, _t in b_results]
        b_span = max(b_sent[i] + rep[5] / 1000 for i, rep, _t in b_results) - b_first
        b_rate = (len(b_results) - 9) / b_span if b_span > 0 else 0
        b_order = all(a[1][5] <= b[1][5] for a, b in zip(b_results, b_results[1:]))
        c.call("FLUSHALL")
        c.call("CONFIG", "RESETSTAT")
        log(f"==> issue27: {n} waiters at 100 a second, burst 1")
        c0 = cpu(c)
        t_first, sent, results = asyncio.run(waiting(srv.port, n, "w", c))
        c1 = cpu(c)
        started, admitted = info_int(c, "ratelimit_waits_started"), info_int(c, "ratelimit_waits_admitted")
        timed_out = info_int(c, "ratelimit_waits_timed_out")
        results.sort()
        all_admitted = all(rep[0] == 1 for _i, rep, _t in results)
        waited = [rep[5] for _i, rep, _t in results]
        in_order = all(a <= b for a, b in zip(waited, waited[1:]))
        # Reply i (1-based among the waiters) is admissible at first + i * 10 ms.
        # Client side: from the later of its admissible instant and its arrival to the reply
        # read by this (Python, one process) client.
        lat = [(t - max(t_first + i * 0.010, sent[i])) * 1000 for i, _rep, t in results]
        # Server side: admission instant (arrival + waited_ms) against the admissible one.
        late = [(sent[i] + rep[5] / 1000 - (t_first + i * 0.010)) * 1000 for i, rep, _t in results]
        gaps = [(b - a) * 1000 for a, b in zip([sent[i] + rep[5] / 1000 for i, rep, _t in results],
                                               [sent[i] + rep[5] / 1000 for i, rep, _t in results][1:])]
        span_s = max(t for _i, _r, t in results) - t_first
        rate = len(results) / span_s if span_s > 0 else 0
        log(f"==> issue27: {n} clients polling")
        c2 = cpu(c)
        calls = asyncio.run(polling(srv.port, n, "p"))
        c3 = cpu(c)
        log(f"==> issue27: memory of {n} waiters")

        c.call("RL.GCRA", "h", 1, 1, 3_600_000)

        async def measure_hold():
            conns, idle = await hold(srv.port, n, "h", c)
            deadline = time.time() + 30
            while info_int(c, "ratelimit_waiting_clients") < n:
                if time.time() > deadline:
                    die("the waiters did not all queue")
                await asyncio.sleep(0.05)
            m = used_memory(c)
            for _r, w in conns:
                w.close()
            return idle, m

        m0, m1 = asyncio.run(measure_hold())
    finally:
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    wait_cpu = (c1 - c0) / max(1, len(results)) * 1e6
    poll_cpu = (c3 - c2) / n * 1e6
    q = statistics.quantiles(lat, n=100)
    bq = statistics.quantiles(b_late, n=100)
    L = [f"== issue 27: WAIT ({n} clients, real clock; git {git('rev-parse', '--short=12', 'HEAD')}; "
         f"{datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}; {time.time() - t0:.0f} s)",
         f"{'figure':<58} {'WAIT':>14} {'polling':>14}",
         f"{'admitted':<58} {len(results) + 1:>14,} {n:>14,}",
         f"{'in arrival order / every one admitted':<58} {str(in_order) + ' / ' + str(all_admitted):>14} {'-':>14}",
         f"{'rate (admissions a second; the rule: 100, burst 1)':<58} {rate:>14.1f} {'-':>14}",
         f"{'  mean gap between admissions, burst 1 (ms; rule: 10)':<58} {statistics.mean(gaps):>14.2f} {'-':>14}",
         f"{'rate, burst 10 (admissions a second after the burst)':<58} {b_rate:>14.1f} {'-':>14}",
         f"{'  in arrival order, burst 10':<58} {str(b_order):>14} {'-':>14}",
         f"{'  server-side lateness of admissions, burst 10, p50/p99 (ms)':<58} {f'{bq[49]:.1f}/{bq[98]:.1f}':>14} {'-':>14}",
         f"{'wake-ups = admissions (waits started / admitted / timed out)':<58} {f'{started}/{admitted}/{timed_out}':>14} {'-':>14}",
         f"{'Redis calls per admission':<58} {1.0:>14.2f} {calls / n:>14.2f}",
         f"{'server CPU per admission (µs, INFO cpu)':<58} {wait_cpu:>14.1f} {poll_cpu:>14.1f}",
         f"{'latency, admissible instant -> reply read, p50 (ms; client side)':<58} {q[49]:>14.2f} {'-':>14}",
         f"{'latency, admissible instant -> reply read, p99 (ms; client side)':<58} {q[98]:>14.2f} {'-':>14}",
         f"{'server-side lateness of admissions, burst 1, p50/p99 (ms)':<58} {f'{statistics.quantiles(late, n=100)[49]:.1f}/{statistics.quantiles(late, n=100)[98]:.1f}':>14} {'-':>14}",
         f"{'memory per waiter (used_memory, bytes)':<58} {(m1 - m0) / n:>14,.0f} {'-':>14}"]
    text = "\n".join(L) + "\n"
    print(text, end="")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / ("issue27-quick.txt" if args.quick else "issue27.txt")).write_text(text)


if __name__ == "__main__":
    main()
