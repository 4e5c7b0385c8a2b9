"""An in-process limiter with the module's semantics, for when Redis is unreachable.

It is per process (each worker counts on its own), so give it a fallback rule sized for one
process (e.g. the global limit divided by the number of workers). Integer arithmetic in
microseconds, like the module; same five reply fields. Refused requests spend nothing.
Algorithms: GCRA, TOKENBUCKET, QUEUE (with ``delay_ms``), FIXED, SLIDING and LOG; of the
options only ``cost`` (1 to limit) is implemented here (no peek, refund, partial, reserve,
block or stagger).
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Deque, Dict, Optional, Tuple

from ._protocol import Decision, Rule


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _now_us() -> int:
    return time.time_ns() // 1000


class MemoryLimiter:
    """``decide(key, rule)`` -> Decision, thread-safe; keeps at most ``max_keys`` keys
    (expired ones are dropped first, then the oldest)."""

    def __init__(self, clock: Callable[[], int] = _now_us, max_keys: int = 100_000):
        self._clock = clock
        self._max_keys = max_keys
        self._lock = threading.Lock()
        # key -> (algorithm, expiry_us, state)
        self._states: "collections.OrderedDict[Tuple[str, str], Tuple[int, Any]]" = (
            collections.OrderedDict())

    def decide(self, key: str, rule: Rule) -> Decision:
        cost = rule.cost
        if cost < 1 or cost > rule.limit:
            raise ValueError("the in-memory limiter takes 1 <= cost <= limit")
        fn = _ALGOS[rule.algorithm]
        with self._lock:
            now = self._clock()
            k = (rule.algorithm, key)
            entry = self._states.get(k)
            state = entry[1] if entry is not None and entry[0] > now else None
            d, new_state, ttl_us = fn(state, rule, cost, now)
            assert isinstance(d, Decision)
            if new_state is not None:
                self._states[k] = (now + ttl_us, new_state)
                self._states.move_to_end(k)
                self._trim(now)
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
        return Decision(True, limit, limit - count, 0, left), (start, count), left * 1000
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
    while log and log[0] <= now_us - w_us:
        log.popleft()
    if len(log) + cost <= limit:
        log.extend([now_us] * cost)
        reset = _ceil_div(log[-1] + w_us - now_us, 1000)
        return Decision(True, limit, limit - len(log), 0, reset), log, reset * 1000
    oldest_needed = log[len(log) + cost - limit - 1]
    retry = _ceil_div(oldest_needed + w_us - now_us, 1000)
    reset = _ceil_div(log[-1] + w_us - now_us, 1000) if log else 0
    return Decision(False, limit, limit - len(log), retry, reset), None, 0


_ALGOS: Dict[str, Callable[..., Any]] = {
    "GCRA": _gcra, "TOKENBUCKET": _gcra, "QUEUE": _gcra,
    "FIXED": _fixed, "SLIDING": _sliding, "LOG": _log,
}
