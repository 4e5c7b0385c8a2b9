"""Leased allowance in the typed API: :class:`LeasedLimiter` (sync) and
:class:`AsyncLeasedLimiter` (asyncio), for code that is not behind the HTTP middleware
(workers, queue consumers, an AI gateway's calls).

    hot = LeasedLimiter(connect(url), Rule.gcra(1000, 1000, 60_000), Lease(chunk=10))
    d = hot.rate("tenant:42")          # admitted from the process's lease, or a claim
    ...
    hot.close()                        # gives back what the process still holds

The same rules as the middleware's leased limits (:mod:`redis_ratelimit.lease`): a claim
is ``COST max(chunk, cost - held) PARTIAL``, the rest is given back with ``REFUND`` when the
lease lapses (on the next call for the key, on :meth:`sweep`, or on :meth:`close`), and the
``Decision`` is the last claim's reply with ``remaining`` plus the units still held. Never
more admitted in all than the rule allows; a caller can be refused while other processes
hold unspent units (at most ``(processes - 1) * chunk``, for at most ``ttl_ms``).
"""

from __future__ import annotations

from typing import Any, Callable

from ._protocol import Decision, Rule
from .lease import Lease, Leases, check_leasable, wall_ms


class LeasedLimiter:
    """``rate(key, cost=1)`` -> Decision, over a sync redis-py client. Thread-safe (one
    call per key at a time in the process)."""

    def __init__(self, client: Any, rule: Rule, lease: Lease,
                 clock_ms: Callable[[], int] = wall_ms):
        check_leasable("LeasedLimiter", rule, lease, waits=rule.wait_ms is not None,
                       blocks=rule.options.block_ms is not None, shadow=False)
        self.redis = client
        self.rule = Rule(rule.algorithm, rule.params)
        self.lease = lease
        self.clock_ms = clock_ms
        self.leases = Leases()

    def _rule(self, cost: int) -> Rule:
        if isinstance(cost, bool) or not isinstance(cost, int) or cost < 1:
            raise ValueError("cost must be an int >= 1")
        if cost > self.rule.limit:
            raise ValueError(f"cost {cost} is above the rule's limit {self.rule.limit}")
        return self.rule.with_options(cost=cost)

    def rate(self, key: str, cost: int = 1) -> Decision:
        rule = self._rule(cost)
        k = ("", key)
        L = self.leases
        with L.lock_for(k):
            now = self.clock_ms()
            refund = L.release(k, now, rule)
            if refund is not None:
                self.redis.execute_command(*refund)
            d = L.take(k, cost, now)
            if d is not None:
                return d
            crule, args = L.claim(k, rule, cost, self.lease)
            reply = crule.parse(self.redis.execute_command(*args))
            return L.claimed(k, rule, reply, cost, self.lease, now)

    def held(self, key: str) -> int:
        """Units this process holds for ``key``."""
        return self.leases.held(("", key))

    def sweep(self, force: bool = False) -> int:
        """Gives back the leases that lapsed (``force``: all); returns the refunds sent."""
        n = 0
        for k in self.leases.keys():
            with self.leases.lock_for(k):
                refund = self.leases.release(k, self.clock_ms(), force=force)
                if refund is not None:
                    self.redis.execute_command(*refund)
                    n += 1
        return n

    def close(self) -> None:
        """Gives back every lease."""
        self.sweep(force=True)

    def __enter__(self) -> "LeasedLimiter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncLeasedLimiter:
    """:class:`LeasedLimiter` over ``redis.asyncio``: the same methods as coroutines."""

    def __init__(self, client: Any, rule: Rule, lease: Lease,
                 clock_ms: Callable[[], int] = wall_ms):
        self._sync = LeasedLimiter(None, rule, lease, clock_ms)
        self.redis = client

    async def rate(self, key: str, cost: int = 1) -> Decision:
        s = self._sync
        rule = s._rule(cost)
        k = ("", key)
        L = s.leases
        async with L.alock_for(k):
            now = s.clock_ms()
            refund = L.release(k, now, rule)
            if refund is not None:
                await self.redis.execute_command(*refund)
            d = L.take(k, cost, now)
            if d is not None:
                return d
            crule, args = L.claim(k, rule, cost, s.lease)
            reply = crule.parse(await self.redis.execute_command(*args))
            return L.claimed(k, rule, reply, cost, s.lease, now)

    def held(self, key: str) -> int:
        return self._sync.held(key)

    async def sweep(self, force: bool = False) -> int:
        s = self._sync
        n = 0
        for k in s.leases.keys():
            async with s.leases.alock_for(k):
                refund = s.leases.release(k, s.clock_ms(), force=force)
                if refund is not None:
                    await self.redis.execute_command(*refund)
                    n += 1
        return n

    async def close(self) -> None:
        await self.sweep(force=True)

    async def __aenter__(self) -> "AsyncLeasedLimiter":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


__all__ = ["AsyncLeasedLimiter", "LeasedLimiter"]
