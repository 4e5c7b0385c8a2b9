"""An in-process limiter with the module's semantics, for when Redis is unreachable.

It is per process (each worker counts on its own), so give it a fallback rule sized for one
process (e.g. the global limit divided by the number of workers). Integer arithmetic in
microseconds, like the module (its ``src/algo`` and ``rule.rs``); the same replies.
Refused requests spend nothing. Algorithms: GCRA, TOKENBUCKET, QUEUE (with ``delay_ms``),
FIXED, SLIDING and LOG; options: ``cost`` (0 peeks), ``dryrun``, ``reserve``, ``partial``,
and ``RL.ALL`` (:meth:`MemoryLimiter.all`). Not here: refund, block, stagger, wait, probe.
It passes the shared conformance cases that use only those (a second pass of each
package's runner, on the case's clock).
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from ._protocol import ALGORITHMS, AllDecision, Decision, Options, Rule


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _now_us() -> int:
    return time.time_ns() // 1000


class MemoryLimiter:
    """``decide(key, rule)`` -> Decision and ``all([(key, rule), ...])`` -> AllDecision, the
    module's replies for the same requests on the same clock, thread-safe; keeps at most
    ``max_keys`` keys (expired ones are dropped first, then the oldest).

    Options: ``cost`` (0 peeks; above the rule's limit only with ``partial``), ``dryrun``,
    ``reserve`` and ``partial`` (``Decision.granted``), as the module decides them (its
    ``rule.rs``: PARTIAL and RESERVE count the units a peek sees; a request that gets none is
    refused as the smallest one that would have been admitted). ``all()`` is ``RL.ALL``:
    every rule decided alone, all spend only if all admit (``refused_by`` the first refusing
    rule, 1-based). Not here: refund, block, stagger, wait, probe (a ``ValueError``).

    ``execute_command(*args)`` answers the module's rate commands and ``RL.ALL`` in their
    syntax, as a Redis client would (the replies as lists of ints): a
    :class:`~redis_ratelimit.RateLimiter` or the middleware can run on it in place of Redis
    (``MemoryClient`` / ``AsyncMemoryClient``).
    """

    def __init__(self, clock: Callable[[], int] = _now_us, max_keys: int = 100_000):
        self._clock = clock
        self._max_keys = max_keys
        self._lock = threading.Lock()
        # key -> (algorithm, expiry_us, state)
        self._states: "collections.OrderedDict[Tuple[str, str], Tuple[int, Any]]" = (
            collections.OrderedDict())

    def decide(self, key: str, rule: Rule) -> Decision:
        _check(rule)
        with self._lock:
            return self._decide(key, rule, self._clock(), not rule.options.dryrun)

    def all(self, rules: Sequence[Tuple[str, Rule]], dryrun: bool = False) -> AllDecision:
        """RL.ALL: admitted only if every rule admits; then every rule spends (unless
        ``dryrun``); refused, nothing is spent and each rule reports what it alone would
        have decided."""
        if not rules:
            raise ValueError("RL.ALL needs at least one (key, rule)")
        if len({k for k, _ in rules}) != len(rules):
            raise ValueError("RL.ALL takes each key once")
        for _, rule in rules:
            _check(rule, in_all=True)
        with self._lock:
            now = self._clock()
            ds = [self._decide(k, r, now, False) for k, r in rules]
            refused_by = next((i + 1 for i, d in enumerate(ds) if not d.allowed), 0)
            if refused_by == 0 and not dryrun:
                ds = [self._decide(k, r, now, True) for k, r in rules]
            return AllDecision(refused_by == 0, refused_by, tuple(ds))

    def _decide(self, key: str, rule: Rule, now: int, commit: bool) -> Decision:
        fn = _ALGOS[rule.algorithm]
        k = (rule.algorithm, key)
        entry = self._states.get(k)
        state = entry[1] if entry is not None and entry[0] > now else None
        o = rule.options
        cost = o.cost
        queue = rule.algorithm == "QUEUE"

        def spend(n: int, store: bool) -> Decision:
            d, new_state, ttl_us = fn(state, rule, n, now)
            if store and n > 0 and d.allowed and new_state is not None:
                self._states[k] = (now + ttl_us, new_state)
                self._states.move_to_end(k)
                self._trim(now)
            return d

        if cost == 0:  # a peek: allowed, nothing written
            d = spend(0, False)
            return Decision(True, d.limit, d.remaining, 0, d.reset_after_ms, d.delay_ms)
        if not o.partial and o.reserve is None:
            return spend(cost, commit)
        reserve = o.reserve or 0
        avail = spend(0, False).remaining
        room = max(0, avail - reserve)
        grant = min(cost, room) if o.partial else (cost if cost <= room else 0)
        if grant > 0:
            d = spend(grant, commit)
        else:
            need = 1 if o.partial else cost
            d = spend(need + reserve, False)
            if queue:
                d = Decision(d.allowed, d.limit, d.remaining, d.retry_after_ms,
                             d.reset_after_ms, 0)
        if o.partial:
            d = Decision(d.allowed, d.limit, d.remaining, d.retry_after_ms, d.reset_after_ms,
                         d.delay_ms, granted=grant if d.allowed else 0)
        return d

    def _trim(self, now: int) -> None:
        if len(self._states) <= self._max_keys:
            return
        for k in [k for k, (exp, _) in self._states.items() if exp <= now]:
            del self._states[k]
        while len(self._states) > self._max_keys:
            self._states.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._states.clear()

    # ---- the module's syntax: the in-memory limiter in place of Redis

    def execute_command(self, *args: Any, **_: Any) -> Any:
        """``RL.<ALG> key numbers... [COST n] [DRYRUN] [PARTIAL] [RESERVE r]`` and ``RL.ALL
        numkeys key... rule... [DRYRUN]``: the module's reply, as lists of ints."""
        a = [x.decode() if isinstance(x, bytes) else x for x in args]
        cmd = str(a[0]).upper()
        if cmd == "RL.ALL":
            n = int(a[1])
            keys = [str(k) for k in a[2:2 + n]]
            toks = [str(x) for x in a[2 + n:]]
            dryrun = bool(toks) and toks[-1].upper() == "DRYRUN"
            if dryrun:
                toks = toks[:-1]
            rules = []
            i = 0
            for _ in keys:
                alg = toks[i].upper()
                rule, i = _parse_rule(alg, toks, i + 1, in_all=True)
                rules.append(rule)
            if i != len(toks):
                raise ValueError(f"RL.ALL: unexpected {toks[i:]}")
            res = self.all(list(zip(keys, rules)), dryrun)
            return [int(res.allowed), res.refused_by,
                    *[_reply(d, r) for d, r in zip(res.decisions, rules)]]
        alg = {v: k for k, v in ALGORITHMS.items()}.get(cmd)
        if alg is None:
            raise ValueError(f"the in-memory limiter does not answer {cmd}")
        rule, i = _parse_rule(alg, [str(x) for x in a], 2, in_all=False)
        if i != len(a):
            raise ValueError(f"{cmd}: unexpected {a[i:]}")
        return _reply(self.decide(str(a[1]), rule), rule)


def _check(rule: Rule, in_all: bool = False) -> None:
    o = rule.options
    taken = [n for n, v in (("refund", o.refund), ("block_ms", o.block_ms), ("stagger", o.stagger),
                            ("wait_ms", o.wait_ms), ("probe", o.probe)) if v not in (None, False)]
    if taken:
        raise ValueError(f"the in-memory limiter does not implement {', '.join(taken)}")
    if in_all and o.partial:
        raise ValueError("RL.ALL takes no partial")
    cost, limit = o.cost, rule.limit
    if cost < 0:
        raise ValueError("cost must be >= 0")
    if cost > limit and not o.partial:
        raise ValueError("COST must not exceed the limit (but with PARTIAL)")
    if cost == 0 and (o.partial or o.reserve is not None):
        raise ValueError("syntax error: a peek takes no PARTIAL or RESERVE")
    if o.reserve is not None:
        if not 0 <= o.reserve < limit:
            raise ValueError("RESERVE must be less than the limit")
        if not o.partial and cost + o.reserve > limit:
            raise ValueError("COST plus RESERVE must not exceed the limit")


_NPARAMS = {"GCRA": 3, "TOKENBUCKET": 3, "SLIDING": 2, "FIXED": 2, "LOG": 2, "QUEUE": 2}


def _parse_rule(alg: str, toks: Sequence[str], i: int, in_all: bool) -> Tuple[Rule, int]:
    if alg not in _NPARAMS:
        raise ValueError(f"unknown algorithm {alg}")
    n = _NPARAMS[alg]
    params = tuple(int(x) for x in toks[i:i + n])
    i += n
    opts: Dict[str, Any] = {}
    while i < len(toks):
        t = toks[i].upper()
        if t == "COST":
            opts["cost"], i = int(toks[i + 1]), i + 2
        elif t == "RESERVE":
            opts["reserve"], i = int(toks[i + 1]), i + 2
        elif t == "PARTIAL" and not in_all:
            opts["partial"], i = True, i + 1
        elif t == "DRYRUN" and not in_all:
            opts["dryrun"], i = True, i + 1
        elif in_all and t in ALGORITHMS or in_all and t == "DRYRUN":
            break
        else:
            raise ValueError(f"the in-memory limiter does not implement {t}")
    return Rule(alg, params, Options(**opts)), i


def _reply(d: Decision, rule: Rule) -> List[int]:
    out = [int(d.allowed), d.limit, d.remaining, d.retry_after_ms, d.reset_after_ms]
    if rule.algorithm == "QUEUE":
        out.append(d.delay_ms or 0)
    if rule.options.partial:
        out.append(d.granted or 0)
    return out


class MemoryClient:
    """A :class:`MemoryLimiter` as a sync Redis client (``execute_command``): pass it as
    ``redis=`` to the WSGI middleware or to :class:`~redis_ratelimit.RateLimiter`."""

    def __init__(self, limiter: Optional[MemoryLimiter] = None):
        self.limiter = limiter or MemoryLimiter()

    def execute_command(self, *args: Any, **kw: Any) -> Any:
        return self.limiter.execute_command(*args, **kw)


class AsyncMemoryClient(MemoryClient):
    """The asyncio twin (the ASGI middleware, :class:`~redis_ratelimit.AsyncRateLimiter`)."""

    async def execute_command(self, *args: Any, **kw: Any) -> Any:  # type: ignore[override]
        return self.limiter.execute_command(*args, **kw)


def _gcra(tat: Optional[int], rule: Rule, cost: int, now_us: int
          ) -> Tuple[Decision, Optional[int], int]:
    # Time in ticks of 1/den µs so the emission interval is an exact integer.
    ei = rule.emission_interval_ms()
    assert ei is not None
    num, den = ei
    t = num * 1000  # the emission interval, in ticks
    tick_ms = den * 1000
    limit = rule.limit
    tau = limit * t
    now = now_us * den
    cur = now if tat is None else min(max(tat, now), now + tau)
    nxt = cur + cost * t
    queue = rule.algorithm == "QUEUE"
    if nxt - now <= tau:
        reset = _ceil_div(nxt - now, tick_ms)
        d = Decision(True, limit, (tau - (nxt - now)) // t, 0, reset,
                     _ceil_div(cur - now, tick_ms) if queue else None)
        return d, nxt, _ceil_div(nxt - now, den)
    d = Decision(False, limit, (tau - (cur - now)) // t, _ceil_div(nxt - tau - now, tick_ms),
                 _ceil_div(cur - now, tick_ms), 0 if queue else None)
    return d, None, 0


def _fixed(state: Optional[Tuple[int, int]], rule: Rule, cost: int, now_us: int
           ) -> Tuple[Decision, Optional[Tuple[int, int]], int]:
    limit, w = rule.params
    now_ms = now_us // 1000
    start = now_ms - now_ms % w
    count = state[1] if state is not None and state[0] == start else 0
    left = start + w - now_ms
    if count + cost <= limit:
        count += cost
        return (Decision(True, limit, limit - count, 0, left if count else 0),
                (start, count), left * 1000)
    return Decision(False, limit, limit - count, left, left if count else 0), None, 0


def _sliding(state: Optional[Tuple[int, int, int]], rule: Rule, cost: int, now_us: int
             ) -> Tuple[Decision, Optional[Tuple[int, int, int]], int]:
    limit, w = rule.params
    now_ms = now_us // 1000
    start = now_ms - now_ms % w
    prev = cur = 0
    if state is not None:
        s, p, c = state
        if s == start:
            prev, cur = p, c
        elif s == start - w:
            prev = c
    e = now_ms - start  # elapsed in the current window
    # estimate * w = prev * (w - e) + cur * w, exact
    def fits(c: int) -> bool:
        return prev * (w - e) + (c + cost) * w <= limit * w

    def reset(p: int, c: int) -> int:
        return (2 * w - e) if c else ((w - e) if p else 0)

    if fits(cur):
        cur += cost
        rem = max(0, (limit * w - prev * (w - e) - cur * w) // w)
        r = reset(prev, cur)
        return Decision(True, limit, rem, 0, r), (start, prev, cur), r * 1000
    rem = max(0, (limit * w - prev * (w - e) - cur * w) // w)
    if cur + cost <= limit:  # room comes as the previous window fades, in this window
        need_e = w - (limit - cur - cost) * w // prev if prev else e
        retry = max(1, need_e - e)
    elif cost <= limit and cur:  # in the next window, as this one's count fades
        need = w - ((limit - cost) * w) // cur
        retry = (w - e) + need
    else:
        retry = 2 * w - e
    return Decision(False, limit, rem, retry, reset(prev, cur)), None, 0


def _log(entries: Optional[Deque[int]], rule: Rule, cost: int, now_us: int
         ) -> Tuple[Decision, Optional[Deque[int]], int]:
    limit, w = rule.params
    w_us = w * 1000
    log: Deque[int] = collections.deque(entries or ())
    at = max(now_us, log[-1]) if log else now_us  # the key's own time: its newest entry
    while log and log[0] + w_us <= at:
        log.popleft()
    live = len(log)

    def reset() -> int:
        return _ceil_div(max(0, log[-1] + w_us - now_us), 1000) if log else 0

    if live + cost <= limit:
        if cost == 0:  # a peek adds no entry: the newest one, if any, counts
            return Decision(True, limit, limit - live, 0, reset()), None, 0
        log.extend([at] * cost)
        r = _ceil_div(max(0, at + w_us - now_us), 1000)
        return Decision(True, limit, limit - live - cost, 0, r), log, r * 1000
    leaves = log[live + cost - limit - 1] + w_us
    retry = max(1, _ceil_div(max(0, leaves - now_us), 1000))
    return Decision(False, limit, max(0, limit - live), retry, reset()), None, 0


_ALGOS: Dict[str, Callable[..., Any]] = {
    "GCRA": _gcra, "TOKENBUCKET": _gcra, "QUEUE": _gcra,
    "FIXED": _fixed, "SLIDING": _sliding, "LOG": _log,
}
