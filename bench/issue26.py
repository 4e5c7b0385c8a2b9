#!/usr/bin/env python3
"""The figures of issue 26 (policies), each measured in one run, against its target:

  python3 bench/issue26.py            # about 1 min idle (callgrind on Redis 7.0, natively the rest)
  python3 bench/issue26.py --quick    # N 5,000 calls, 200,000 keys for the sketch figure

1. RL.ALLOW against RL.GCRA with the same rule (`GCRA 1000 1 3600000`), instructions inside
   call() under callgrind (bench/issue25.py's harness: a fresh server each, 1,000 keys
   created first then N calls round them, pipelines of 16), admitted and refused paths. The
   RL.ALLOW server holds 1,000 policies (the one called is looked up among them). Target:
   at most 1.05x.
2. Memory per policy (native Redis 7.0, `used_memory` before and after): 10,000 policies of
   one version; then the same with 10 versions each (the history kept).
3. The statistics' memory per policy at 1,000,000 distinct keys: 1,000,000 keys are spent
   to 0 with `RL.GCRA k 1 1 3600000` first, then refused once each by RL.GCRA (their own
   memory and the server's buffers are not the figure), then `used_memory` is read, then
   one RL.ALLOW each under a policy of the same rule (every one refused: nothing written,
   only the statistics and their sketch of refused keys grow); the figure is the
   difference, at 20,000 keys and at 1,000,000. Target: bounded: the same at both sizes
   (within 8 KiB).
4. Rollout share over 100,000 keys: a candidate at 1, 10, 50 and 90 per cent; the share of
   keys whose RL.ALLOW DRYRUN answers with the candidate's limit. Target: within 1 point.

Writes the table to stdout and bench/results/issue26.txt (issue26-quick.txt with --quick).
"""

import argparse
import datetime
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import issue25  # noqa: E402
from bench import MODULE, RESULTS, die, git, log  # noqa: E402
from issue25 import HOUR_MS, Server, admitted, drive, refused, server_argv  # noqa: E402


def policies(n, versions=1):
    out = []
    for i in range(n):
        for v in range(versions):
            out.append(["RL.POLICY", "SET", f"p{i}", "GCRA", 1000 + v, 1, HOUR_MS])
    return out


def is_int(r):
    return isinstance(r, int)


def instructions(work, argv, module, n, keys):
    """Per call: RL.GCRA and RL.ALLOW, admitted and refused."""
    rows = {}
    for tag, make in (
        ("gcra", lambda i: ["RL.GCRA", f"b:{i}", 1000, 1, HOUR_MS]),
        ("allow", lambda i: ["RL.ALLOW", f"b:{i}", "p7"]),
    ):
        srv = Server(work, f"{tag}-admit", argv, ["--appendonly", "no", "--loadmodule", str(module)])
        try:
            drive(srv.conn, policies(1000), is_int)
            drive(srv.conn, [make(i) for i in range(keys)], admitted)
            srv.zero()
            drive(srv.conn, [make(i % keys) for i in range(n)], admitted)
            rows[(tag, "admitted")] = srv.dump().totals / n
        finally:
            srv.stop()
    for tag, make in (
        ("gcra", lambda i: ["RL.GCRA", f"r:{i}", 1, 1, HOUR_MS]),
        ("allow", lambda i: ["RL.ALLOW", f"r:{i}", "one"]),
    ):
        srv = Server(work, f"{tag}-refuse", argv, ["--appendonly", "no", "--loadmodule", str(module)])
        try:
            drive(srv.conn, policies(1000) + [["RL.POLICY", "SET", "one", "GCRA", 1, 1, HOUR_MS]], is_int)
            drive(srv.conn, [make(i) for i in range(keys)], admitted)
            srv.zero()
            drive(srv.conn, [make(i % keys) for i in range(n)], refused)
            rows[(tag, "refused")] = srv.dump().totals / n
        finally:
            srv.stop()
    return rows


def used_memory(conn):
    info = conn.call("INFO", "memory")
    if isinstance(info, bytes):
        info = info.decode()
    for ln in info.splitlines():
        if ln.startswith("used_memory:"):
            return int(ln.split(":")[1])
    die("no used_memory")


def native(work, argv, module, name):
    return Server(work, name, argv, ["--appendonly", "no", "--loadmodule", str(module),
                                     "test-clock", "yes"], callgrind=False)


def memory_per_policy(work, argv, module, n=10_000):
    out = {}
    for versions in (1, 10):
        srv = native(work, argv, module, f"mem-{versions}")
        try:
            before = used_memory(srv.conn)
            drive(srv.conn, policies(n, versions), is_int)
            out[versions] = (used_memory(srv.conn) - before) / n
        finally:
            srv.stop()
    return out


def sketch_memory(work, argv, module, keys):
    srv = native(work, argv, module, "sketch")
    try:
        srv.conn.call("RL.CLOCK", "SET", 1_700_000_040_000)
        srv.conn.call("RL.POLICY", "SET", "p", "GCRA", 1, 1, HOUR_MS)
        drive(srv.conn, [["RL.GCRA", f"k:{i}", 1, 1, HOUR_MS] for i in range(keys)], admitted)
        # The same refusals without a policy first: the server's own buffers grow to size.
        drive(srv.conn, [["RL.GCRA", f"k:{i}", 1, 1, HOUR_MS] for i in range(keys)], refused)
        before = used_memory(srv.conn)
        drive(srv.conn, [["RL.ALLOW", f"k:{i}", "p"] for i in range(keys)], refused)
        after = used_memory(srv.conn)
        stats = srv.conn.call("RL.POLICY", "STATS", "p")
        fields = dict(zip(stats[0::2], stats[1::2]))
        if fields.get("refused") != keys:
            die(f"sketch figure: expected {keys} refusals, got {fields}")
        return after - before, fields.get("top_error_bound")
    finally:
        srv.stop()


def rollout_shares(work, argv, module, keys=100_000):
    srv = native(work, argv, module, "rollout")
    out = {}
    try:
        for pct in (1, 10, 50, 90):
            srv.conn.call("RL.POLICY", "SET", "p", "GCRA", 1000, 1, HOUR_MS)
            srv.conn.call("RL.POLICY", "SET", "p", "GCRA", 7, 1, HOUR_MS, "ROLLOUT", pct)
            seen = []
            drive(srv.conn, [["RL.ALLOW", f"user:{i}", "p", "DRYRUN"] for i in range(keys)],
                  lambda r: seen.append(r[1]) is None and admitted(r))
            out[pct] = 100.0 * sum(1 for lim in seen if lim == 7) / keys
    finally:
        srv.stop()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("-n", type=int)
    ap.add_argument("--module", default=str(MODULE))
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    n = args.n or (5000 if args.quick else 20000)
    sketch_keys = 200_000 if args.quick else 1_000_000
    t0 = time.time()
    if not shutil.which("valgrind"):
        die("valgrind is missing: python3 bench/issue25.py installs it")
    src = Path(args.module)
    if not src.is_file():
        die(f"{src} not found: run cargo build --release first")
    work = Path(tempfile.mkdtemp(prefix="rl-issue26-"))
    module = work / "libredis_ratelimit.so"
    shutil.copy2(src, module)
    argv = server_argv("redis-7.0")
    log("==> issue26: instructions (callgrind)")
    ins = instructions(work, argv, module, n, 1000)
    log("==> issue26: memory per policy")
    mem = memory_per_policy(work, argv, module)
    log(f"==> issue26: statistics at 20,000 and {sketch_keys:,} keys")
    sk_small, _ = sketch_memory(work, argv, module, 20_000)
    sk, bound = sketch_memory(work, argv, module, sketch_keys)
    log("==> issue26: rollout shares")
    shares = rollout_shares(work, argv, module)
    shutil.rmtree(work, ignore_errors=True)

    def row(name, value, target, met, note=""):
        return f"{name:<52} {value:>12} {target:>12}  {met:<4} {note}"

    a_ratio = ins[("allow", "admitted")] / ins[("gcra", "admitted")]
    r_ratio = ins[("allow", "refused")] / ins[("gcra", "refused")]
    L = [f"== issue 26: policies ({n:,} calls per instruction figure; git {git('rev-parse', '--short=12', 'HEAD')}; "
         f"{datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}; "
         f"{time.time() - t0:.0f} s)",
         row("figure", "value", "target", "met", "measured"),
         row("1. RL.ALLOW / RL.GCRA, admitted (Redis 7.0)", f"{a_ratio:.3f}x", "<= 1.05x",
             "yes" if a_ratio <= 1.05 else "NO",
             f"{ins[('allow', 'admitted')]:,.0f} / {ins[('gcra', 'admitted')]:,.0f} instructions"),
         row("1. RL.ALLOW / RL.GCRA, refused (Redis 7.0)", f"{r_ratio:.3f}x", "<= 1.05x",
             "yes" if r_ratio <= 1.05 else "NO",
             f"{ins[('allow', 'refused')]:,.0f} / {ins[('gcra', 'refused')]:,.0f} instructions"),
         row("2. memory per policy, one version", f"{mem[1]:,.0f} B", "-", "-",
             "used_memory over 10,000 policies"),
         row("2. memory per policy, 10 versions kept", f"{mem[10]:,.0f} B", "-", "-", ""),
         row(f"3. statistics' memory at {sketch_keys:,} keys", f"{sk:,} B", "bounded",
             "yes" if abs(sk - sk_small) <= 8 * 1024 else "NO",
             f"{sk_small:,} B at 20,000 keys; top_error_bound {bound} of {sketch_keys:,} refusals"),
         ]
    for pct, share in shares.items():
        L.append(row(f"4. rollout share at {pct}% over 100,000 keys", f"{share:.2f}%",
                     "+-1 point", "yes" if abs(share - pct) <= 1 else "NO", ""))
    text = "\n".join(L) + "\n"
    print(text, end="")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / ("issue26-quick.txt" if args.quick else "issue26.txt")).write_text(text)


if __name__ == "__main__":
    main()
