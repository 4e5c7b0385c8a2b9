"""``RateLimiter`` (redis-py, sync) and ``AsyncRateLimiter`` (redis.asyncio): one method per
command of the module, each returning a typed, frozen ``Decision``.

Both take any client with ``execute_command``: ``redis.Redis``, ``redis.cluster.RedisCluster``
and their asyncio counterparts, RESP2 or RESP3 (``protocol=3``). Keys are routed by the
cluster client (every command declares its keys); the keys of one ``all()`` call must share
a slot: give them one hash tag, ``rl:{org:7}:user:42`` and ``rl:{org:7}``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from ._protocol import (
    AllDecision,
    Decision,
    Rule,
    acquire_args,
    all_args,
    parse_acquire,
    parse_all,
    parse_info,
    parse_throttle,
    pause_args,
    throttle_args,
)
from ._wait import execute_waiting, execute_waiting_async
from .policies import AsyncPolicies, Policies, Policy, allow_args, parse_allow

#: ``(key, Rule)`` or ``(key, Policy("name"))`` pairs for ``all()``.
Rules = Sequence[Tuple[str, Union[Rule, Policy]]]


def connect(url: str = "redis://127.0.0.1:6379/0", timeout: float = 0.05,
            **kwargs: Any) -> "redis.Redis":
    """A redis-py client for the request path: ``timeout`` seconds to connect and per reply,
    no retries (redis-py retries by default), so a dead Redis costs one timeout."""
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                retry=Retry(NoBackoff(), 0), **kwargs)


def connect_async(url: str = "redis://127.0.0.1:6379/0", timeout: float = 0.05,
                  **kwargs: Any) -> "redis.asyncio.Redis":
    """The asyncio twin of :func:`connect`."""
    return redis.asyncio.Redis.from_url(url, socket_timeout=timeout,
                                        socket_connect_timeout=timeout,
                                        retry=Retry(NoBackoff(), 0), **kwargs)


class RateLimiter:
    """The module's commands over a sync redis-py client (``redis.Redis`` or
    ``redis.cluster.RedisCluster``).

    Rate commands take the options of commands.md as keywords: ``cost`` (0 = peek),
    ``dryrun``, ``refund``, ``partial`` (``Decision.granted``), ``reserve``, ``block_ms``,
    ``stagger`` (sliding and fixed), ``wait_ms`` (``Decision.waited_ms``) and ``probe``
    (``Decision.probe``).

    A call with ``wait_ms`` > 0 may be held in the server until admitted: it is sent on a
    connection checked out of the client's pool for that call alone, with a read timeout of
    the connection's ``socket_timeout`` plus ``wait_ms`` (see ``_wait``), so the short
    request-path timeout of :func:`connect` does not cut it short and other calls are not
    held up (size the pool's ``max_connections`` for the concurrent waiters).
    """

    def __init__(self, client: Any):
        self.redis = client
        #: the operator's API, ``RL.POLICY`` (:class:`redis_ratelimit.policies.Policies`)
        self.policies = Policies(client)

    def _x(self, *args: Any, **kw: Any) -> Any:
        return self.redis.execute_command(*args, **kw)

    def _send(self, args: List[Any], wait_ms: Optional[int]) -> Any:
        if wait_ms:  # WAIT 0 is answered at once
            return execute_waiting(self.redis, args, wait_ms)
        return self._x(*args)

    def rate(self, key: str, rule: Union[Rule, Policy]) -> Decision:
        """Applies ``rule`` to ``key`` (the rule's own command; a ``Policy``: RL.ALLOW)."""
        return rule.parse(self._send(rule.command_args(key), rule.wait_ms))

    def gcra(self, key: str, burst: int, count: int, period_ms: int, **opts: Any) -> Decision:
        return self.rate(key, Rule.gcra(burst, count, period_ms, **opts))

    def tokenbucket(self, key: str, capacity: int, refill_tokens: int, refill_period_ms: int,
                    **opts: Any) -> Decision:
        return self.rate(key, Rule.tokenbucket(capacity, refill_tokens, refill_period_ms, **opts))

    def sliding(self, key: str, limit: int, window_ms: int, **opts: Any) -> Decision:
        return self.rate(key, Rule.sliding(limit, window_ms, **opts))

    def fixed(self, key: str, limit: int, window_ms: int, **opts: Any) -> Decision:
        return self.rate(key, Rule.fixed(limit, window_ms, **opts))

    def log(self, key: str, limit: int, window_ms: int, **opts: Any) -> Decision:
        return self.rate(key, Rule.log(limit, window_ms, **opts))

    def queue(self, key: str, capacity: int, interval_ms: int, **opts: Any) -> Decision:
        """``Decision.delay_ms``: how long the admitted request waits before it proceeds."""
        return self.rate(key, Rule.queue(capacity, interval_ms, **opts))

    def acquire(self, key: str, limit: int, lease_ms: int, dryrun: bool = False,
                wait_ms: Optional[int] = None, probe: bool = False) -> Decision:
        """A lease; ``Decision.token`` is its token (None when refused). ``wait_ms``: wait
        in the server for a free slot (a RELEASE wakes the first waiter at once)."""
        return parse_acquire(self._send(acquire_args(key, limit, lease_ms, dryrun, wait_ms,
                                                     probe), wait_ms), wait_ms, probe)

    def release(self, key: str, token: str) -> bool:
        return int(self._x("RL.RELEASE", key, token)) == 1

    def renew(self, key: str, token: str, lease_ms: int) -> bool:
        return int(self._x("RL.RENEW", key, token, lease_ms)) == 1

    def throttle(self, key: str, max_burst: int, count_per_period: int, period_s: int,
                 quantity: Optional[int] = None) -> Decision:
        """CL.THROTTLE (redis-cell); its seconds become whole-second ms in the Decision."""
        return parse_throttle(self._x(*throttle_args(key, max_burst, count_per_period,
                                                     period_s, quantity)))

    def all(self, rules: Rules, dryrun: bool = False) -> AllDecision:
        """RL.ALL over ``(key, Rule)`` pairs (or ``(key, Policy("name", cost=...))``: the
        rule stored in the server): admitted only if every rule admits, then every rule
        spends, atomically. In a cluster the keys must share a hash tag."""
        return parse_all(rules, self._x(*all_args(rules, dryrun)))

    def allow(self, key: str, policy: str, cost: int = 1, dryrun: bool = False,
              partial: bool = False, reserve: Optional[int] = None,
              refund: Optional[int] = None, wait_ms: Optional[int] = None,
              probe: bool = False) -> Decision:
        """RL.ALLOW: the policy's algorithm on ``key``, with the version that applies to it.
        ``Decision.delay_ms`` for a QUEUE policy, ``token`` for CONCURRENCY, ``granted``
        with ``partial``, ``probe`` with ``probe``, ``waited_ms`` with ``wait_ms``. An
        unknown policy raises ``redis.ResponseError`` (``no such policy 'name'``)."""
        args = allow_args(key, policy, cost=cost, dryrun=dryrun, partial=partial,
                          reserve=reserve, refund=refund, wait_ms=wait_ms, probe=probe)
        return parse_allow(self._send(args, wait_ms), partial, probe, wait_ms is not None)

    def pause(self, key: str, ms: int, probe_ms: Optional[int] = None) -> int:
        """RL.PAUSE: every request on ``key`` is refused for ``ms`` from now (extends, never
        shortens, a pause or BLOCK penalty; works on a missing key). With ``probe_ms``: when
        the pause ends, the first request sent with ``probe=True`` that its rule admits is the
        probe (``Decision.probe`` True) and the key is paused again for ``probe_ms`` for
        everyone else, until :meth:`resume` (it worked) or another ``pause`` (it failed).
        Returns the ms until the pause ends."""
        return int(self._x(*pause_args(key, ms, probe_ms)))

    def resume(self, key: str) -> bool:
        """RL.RESUME: lift a pause or a BLOCK penalty at once (waiters wake); True if one
        was lifted."""
        return int(self._x("RL.RESUME", key)) == 1

    def info(self, key: str) -> Optional[Dict[str, Any]]:
        """RL.INFO as a dict (None if the key does not exist)."""
        return parse_info(self._x("RL.INFO", key))

    # RL.CLOCK (servers loaded with test-clock yes). In a cluster it has no key: pass
    # target_nodes=cluster.get_nodes() to reach every node.
    def clock_get(self, **kw: Any) -> Any:
        return self._x("RL.CLOCK", "GET", **kw)

    def clock_set(self, unix_ms: int, **kw: Any) -> Any:
        return self._x("RL.CLOCK", "SET", unix_ms, **kw)

    def clock_advance(self, ms: int, **kw: Any) -> Any:
        return self._x("RL.CLOCK", "ADVANCE", ms, **kw)

    def clock_real(self, **kw: Any) -> Any:
        return self._x("RL.CLOCK", "REAL", **kw)


class AsyncRateLimiter:
    """:class:`RateLimiter` for ``redis.asyncio.Redis`` / ``redis.asyncio.RedisCluster``:
    the same methods, each a coroutine."""

    def __init__(self, client: Any):
        self.redis = client
        self.policies = AsyncPolicies(client)

    async def _x(self, *args: Any, **kw: Any) -> Any:
        return await self.redis.execute_command(*args, **kw)

    async def _send(self, args: List[Any], wait_ms: Optional[int]) -> Any:
        if wait_ms:
            return await execute_waiting_async(self.redis, args, wait_ms)
        return await self._x(*args)

    async def rate(self, key: str, rule: Union[Rule, Policy]) -> Decision:
        return rule.parse(await self._send(rule.command_args(key), rule.wait_ms))

    async def gcra(self, key: str, burst: int, count: int, period_ms: int,
                   **opts: Any) -> Decision:
        return await self.rate(key, Rule.gcra(burst, count, period_ms, **opts))

    async def tokenbucket(self, key: str, capacity: int, refill_tokens: int,
                          refill_period_ms: int, **opts: Any) -> Decision:
        return await self.rate(key, Rule.tokenbucket(capacity, refill_tokens, refill_period_ms,
                                                     **opts))

    async def sliding(self, key: str, limit: int, window_ms: int, **opts: Any) -> Decision:
        return await self.rate(key, Rule.sliding(limit, window_ms, **opts))

    async def fixed(self, key: str, limit: int, window_ms: int, **opts: Any) -> Decision:
        return await self.rate(key, Rule.fixed(limit, window_ms, **opts))

    async def log(self, key: str, limit: int, window_ms: int, **opts: Any) -> Decision:
        return await self.rate(key, Rule.log(limit, window_ms, **opts))

    async def queue(self, key: str, capacity: int, interval_ms: int, **opts: Any) -> Decision:
        return await self.rate(key, Rule.queue(capacity, interval_ms, **opts))

    async def acquire(self, key: str, limit: int, lease_ms: int, dryrun: bool = False,
                      wait_ms: Optional[int] = None, probe: bool = False) -> Decision:
        return parse_acquire(await self._send(acquire_args(key, limit, lease_ms, dryrun,
                                                           wait_ms, probe), wait_ms),
                             wait_ms, probe)

    async def release(self, key: str, token: str) -> bool:
        return int(await self._x("RL.RELEASE", key, token)) == 1

    async def renew(self, key: str, token: str, lease_ms: int) -> bool:
        return int(await self._x("RL.RENEW", key, token, lease_ms)) == 1

    async def throttle(self, key: str, max_burst: int, count_per_period: int, period_s: int,
                       quantity: Optional[int] = None) -> Decision:
        return parse_throttle(await self._x(*throttle_args(key, max_burst, count_per_period,
                                                           period_s, quantity)))

    async def all(self, rules: Rules, dryrun: bool = False) -> AllDecision:
        return parse_all(rules, await self._x(*all_args(rules, dryrun)))

    async def allow(self, key: str, policy: str, cost: int = 1, dryrun: bool = False,
                    partial: bool = False, reserve: Optional[int] = None,
                    refund: Optional[int] = None, wait_ms: Optional[int] = None,
                    probe: bool = False) -> Decision:
        args = allow_args(key, policy, cost=cost, dryrun=dryrun, partial=partial,
                          reserve=reserve, refund=refund, wait_ms=wait_ms, probe=probe)
        return parse_allow(await self._send(args, wait_ms), partial, probe,
                           wait_ms is not None)

    async def pause(self, key: str, ms: int, probe_ms: Optional[int] = None) -> int:
        return int(await self._x(*pause_args(key, ms, probe_ms)))

    async def resume(self, key: str) -> bool:
        return int(await self._x("RL.RESUME", key)) == 1

    async def info(self, key: str) -> Optional[Dict[str, Any]]:
        return parse_info(await self._x("RL.INFO", key))

    async def clock_get(self, **kw: Any) -> Any:
        return await self._x("RL.CLOCK", "GET", **kw)

    async def clock_set(self, unix_ms: int, **kw: Any) -> Any:
        return await self._x("RL.CLOCK", "SET", unix_ms, **kw)

    async def clock_advance(self, ms: int, **kw: Any) -> Any:
        return await self._x("RL.CLOCK", "ADVANCE", ms, **kw)

    async def clock_real(self, **kw: Any) -> Any:
        return await self._x("RL.CLOCK", "REAL", **kw)


__all__: List[str] = ["RateLimiter", "AsyncRateLimiter", "connect", "connect_async"]
