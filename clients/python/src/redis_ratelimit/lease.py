"""Leased allowance and local refusals: the process-side state of the middleware (and of
:class:`~redis_ratelimit.LeasedLimiter`), pure and thread-safe; the I/O is the caller's.

**Leases** (the seeds' "lease, then spend locally"): for a limit with ``Lease(chunk,
ttl_ms)`` a process claims up to ``chunk`` units with ``COST chunk PARTIAL`` (the server
counts them as spent at once), admits requests from them without asking Redis, and gives
back what it did not use (``REFUND n``) when the lease lapses (``ttl_ms`` after its last
claim), when the process closes, or when the limit's rule changes. FIXED: a lease lapses at
its window's end at the latest, and a lease whose window is over is dropped without a
refund (the refund would give room in the next window).

The bound: the server counts a chunk as spent when it is claimed, so all processes
together never admit more than the rule allows; a caller can be refused early while other
processes hold unspent units: at most ``(processes - 1) * chunk`` units, for at most
``ttl_ms`` (until those leases lapse and are refunded, or their processes close).

**Local refusals**: after the server refused a (limit, identity) with ``retry_after_ms = R
> 0``, later requests of that (limit, identity) with a cost at least the refused one's are
refused in the process until ``R`` has passed on the package clock, without a Redis call. A
bounded cache: when full, the entry that ends soonest is dropped.

Times are integer ms on the package clock (``clock_ms``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ._protocol import Decision, Rule

#: The algorithms a lease is for: a refund gives back exactly what a claim took.
LEASABLE = ("GCRA", "TOKENBUCKET", "FIXED")


def wall_ms() -> int:
    """The default package clock: the real wall clock, in integer ms."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Lease:
    """A limit's leased allowance: claim up to ``chunk`` units at a time (``COST chunk
    PARTIAL``), admit from them locally, give back the rest after ``ttl_ms``.

    ``adaptive``: start with a chunk of 1 and double it each time a lease runs out before it
    lapses, halve it each time a lease lapses with units left (never above ``chunk``): a
    key with little traffic holds little, a hot key gets the whole chunk.
    """

    chunk: int
    ttl_ms: int = 1000
    adaptive: bool = False

    def __post_init__(self) -> None:
        for name in ("chunk", "ttl_ms"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Lease.{name} must be an int >= 1")


def check_leasable(name: str, rule: Any, lease: Lease, *, waits: bool, blocks: bool,
                   shadow: Optional[bool]) -> None:
    """Raises ValueError for a leased limit the spec does not allow."""
    if not isinstance(rule, Rule):
        raise ValueError(f"limit {name!r}: a lease needs a GCRA, TOKENBUCKET or FIXED rule "
                         "(not a policy: its rule can change under the lease)")
    if rule.algorithm not in LEASABLE:
        raise ValueError(f"limit {name!r}: a lease is only for GCRA, TOKENBUCKET and FIXED "
                         f"rules, not {rule.algorithm} (a refund could not give back exactly "
                         "what the claim took)")
    if waits or blocks:
        raise ValueError(f"limit {name!r}: a lease goes with neither wait_ms nor block_ms")
    if shadow:
        raise ValueError(f"limit {name!r}: a shadow limit cannot be leased")


class _State:
    __slots__ = ("rule", "units", "expires_at", "window_end", "reply", "claimed_at", "chunk",
                 "ran_out", "adaptive")

    def __init__(self, rule: Rule, chunk: int):
        self.rule = rule  # the base rule (no options): its command, for claims and refunds
        self.units = 0
        self.expires_at = 0
        self.window_end: Optional[int] = None  # FIXED: the claim's window ends here
        self.reply: Optional[Decision] = None  # the last claim's reply
        self.claimed_at = 0
        self.chunk = chunk  # the chunk of the next claim (adaptive: it moves)
        self.ran_out = False  # adaptive: the units ran out before the lease lapsed
        self.adaptive = False


def _base(rule: Rule) -> Rule:
    return Rule(rule.algorithm, rule.params)


class Leases:
    """Per (limit name, key): a lease. Each method is one step under the key's lock; the
    caller does the I/O between steps (sync or asyncio) while holding :meth:`lock_for`."""

    STRIPES = 64

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._table: Dict[Tuple[str, str], _State] = {}
        self._locks = [threading.Lock() for _ in range(self.STRIPES)]
        self._alocks: List[Any] = []

    def lock_for(self, k: Tuple[str, str]) -> threading.Lock:
        return self._locks[hash(k) % self.STRIPES]

    def alock_for(self, k: Tuple[str, str]) -> Any:
        import asyncio

        if not self._alocks:
            self._alocks = [asyncio.Lock() for _ in range(self.STRIPES)]
        return self._alocks[hash(k) % self.STRIPES]

    def keys(self) -> List[Tuple[str, str]]:
        with self._mutex:
            return list(self._table)

    def held(self, k: Tuple[str, str]) -> int:
        """Units the process holds for ``k`` (0 without a lease)."""
        st = self._table.get(k)
        return st.units if st is not None else 0

    def release(self, k: Tuple[str, str], now: int, rule: Optional[Rule] = None,
                force: bool = False) -> Optional[List[Any]]:
        """Step 1: a lease that lapsed (``expires_at <= now``), whose rule is not ``rule``
        any more, or any lease with ``force`` (close) is given up: returns the ``REFUND``
        command to send (None: nothing to give back)."""
        st = self._table.get(k)
        if st is None or st.units == 0 and st.reply is None:
            return None
        changed = rule is not None and _base(rule) != st.rule
        if not (force or changed or st.expires_at <= now):
            return None
        units = st.units
        st.units = 0
        st.reply = None
        if st.expires_at <= now and not force and units:
            st.chunk = max(1, st.chunk // 2)  # adaptive: units were left when it lapsed
        with self._mutex:  # an adaptive lease keeps its chunk while it lapses
            if changed or force or not st.adaptive:
                self._table.pop(k, None)
        if units < 1:
            return None
        if st.window_end is not None and now >= st.window_end:
            return None  # FIXED: the claim's window is over, a refund would land in the next
        return st.rule.with_options(refund=units).command_args(k[1])

    def take(self, k: Tuple[str, str], cost: int, now: int) -> Optional[Decision]:
        """Step 2: admitted locally from the lease (None: a claim is needed)."""
        st = self._table.get(k)
        if st is None or st.reply is None or st.units < cost:
            return None
        st.units -= cost
        if st.units == 0:
            st.ran_out = True
        return self._view(st, True, now)

    def claim(self, k: Tuple[str, str], rule: Rule, cost: int, lease: Lease
              ) -> Tuple[Rule, List[Any]]:
        """Step 3: the claim to send, ``COST max(chunk, cost - units) PARTIAL``, with the
        rule that parses its reply."""
        st = self._table.get(k)
        chunk = lease.chunk
        if lease.adaptive:
            if st is None:
                chunk = 1
            else:
                if st.ran_out:
                    st.chunk = min(lease.chunk, st.chunk * 2)
                    st.ran_out = False
                chunk = min(st.chunk, lease.chunk)
        held = st.units if st is not None else 0
        n = max(chunk, cost - held)
        r = _base(rule).with_options(cost=n, partial=True)
        return r, r.command_args(k[1])

    def claimed(self, k: Tuple[str, str], rule: Rule, reply: Decision, cost: int,
                lease: Lease, now: int) -> Decision:
        """Step 3, after the claim's reply: the units it granted join the lease; the request
        is admitted if they cover its cost."""
        with self._mutex:
            st = self._table.get(k)
            if st is None:
                st = self._table[k] = _State(_base(rule), 1 if lease.adaptive else lease.chunk)
                st.adaptive = lease.adaptive
        if st.units == 0:  # an adaptive lease's state outlives its units: the rule may be new
            st.rule = _base(rule)
            st.window_end = None
        granted = reply.granted or 0
        st.units += granted
        st.reply = reply
        st.claimed_at = now
        if granted >= 1:
            ttl = lease.ttl_ms
            if st.rule.algorithm == "FIXED":
                ttl = min(ttl, reply.reset_after_ms)
                st.window_end = now + reply.reset_after_ms
            st.expires_at = now + ttl
        if st.units >= cost:
            st.units -= cost
            if st.units == 0:
                st.ran_out = True
            return self._view(st, True, now)
        d = self._view(st, False, now)
        if st.units == 0:
            with self._mutex:  # nothing held: no lease to keep
                if self._table.get(k) is st and not lease.adaptive:
                    del self._table[k]
            st.reply = None
        return d

    @staticmethod
    def _view(st: _State, allowed: bool, now: int) -> "LeasedDecision":
        """The request's decision for the headers: the last claim's reply, ``remaining``
        plus the units left (at most ``limit``), times less the ms since the claim."""
        r = st.reply
        assert r is not None
        dt = now - st.claimed_at
        return LeasedDecision(allowed, r.limit, min(r.limit, r.remaining + st.units),
                              0 if allowed else max(0, r.retry_after_ms - dt),
                              max(0, r.reset_after_ms - dt), granted=r.granted,
                              reply_remaining=r.remaining, held=st.units)


@dataclass(frozen=True)
class LeasedDecision(Decision):
    """A leased limit's decision: ``remaining`` is the last claim's ``remaining`` plus the
    units the process still holds; ``reply_remaining`` the claim's own (the header's ``t``
    is computed from the claim's reply, aged by the ms since the claim); ``held`` the units
    held after this request."""

    reply_remaining: int = 0
    held: int = 0

    def reply_view(self) -> Decision:
        """The claim's reply as of now (``t`` is computed from it)."""
        return Decision(self.allowed, self.limit, self.reply_remaining, self.retry_after_ms,
                        self.reset_after_ms)


class LocalRefusals:
    """(limit name, key) -> (until_ms, cost, rule): refused locally until ``until_ms``."""

    def __init__(self, max_keys: int = 10_000):
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
            raise ValueError("local_refusals: max_keys must be an int >= 1")
        self.max_keys = max_keys
        self._lock = threading.Lock()
        self._entries: Dict[Tuple[str, str], Tuple[int, int, Rule]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def check(self, k: Tuple[str, str], cost: int, now: int) -> Optional[Tuple[int, Rule]]:
        """``(ms left, rule)`` when a request of ``cost`` is refused locally, else None."""
        e = self._entries.get(k)
        if e is None:
            return None
        until, refused_cost, rule = e
        if until <= now:
            with self._lock:
                if self._entries.get(k) is e:
                    del self._entries[k]
            return None
        return (until - now, rule) if cost >= refused_cost else None

    def refused(self, k: Tuple[str, str], cost: int, retry_after_ms: int, rule: Rule,
                now: int) -> None:
        if retry_after_ms <= 0:
            return
        with self._lock:
            ents = self._entries
            if k not in ents and len(ents) >= self.max_keys:
                for old in [x for x, e in ents.items() if e[0] <= now]:
                    del ents[old]
                if len(ents) >= self.max_keys:
                    del ents[min(ents, key=lambda x: ents[x][0])]  # the one that ends soonest
            ents[k] = (now + retry_after_ms, cost, rule)

    def admitted(self, k: Tuple[str, str]) -> None:
        if k in self._entries:
            with self._lock:
                self._entries.pop(k, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
