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
    throttle_args,
)
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
    ``dryrun``, ``refund``, ``partial`` (``Decision.granted``), ``reserve``, ``block_ms`` and
    ``stagger`` (sliding and fixed).
    """

    def __init__(self, client: Any):
        self.redis = client
        #: the operator's API, ``RL.POLICY`` (:class:`redis_ratelimit.policies.Policies`)
        self.policies = Policies(client)

    def _x(self, *args: Any, **kw: Any) -> Any:
        return self.redis.execute_command(*args, **kw)

    def rate(self, key: str, rule: Rule) -> Decision:
        """Applies ``rule`` to ``key`` (the rule's own command)."""
        return rule.parse(self._x(*rule.command_args(key)))

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

    def acquire(self, key: str, limit: int, lease_ms: int, dryrun: bool = False) -> Decision:
        """A lease; ``Decision.token`` is its token (None when refused)."""
        return parse_acquire(self._x(*acquire_args(key, limit, lease_ms, dryrun)))

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
              refund: Optional[int] = None) -> Decision:
        """RL.ALLOW: the policy's algorithm on ``key``, with the version that applies to it.
        ``Decision.delay_ms`` for a QUEUE policy, ``token`` for CONCURRENCY, ``granted``
        with ``partial``. An unknown policy raises ``redis.ResponseError`` (``no such
        policy 'name'``)."""
        return parse_allow(self._x(*allow_args(key, policy, cost=cost, dryrun=dryrun,
                                               partial=partial, reserve=reserve,
                                               refund=refund)), partial)

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

    async def rate(self, key: str, rule: Rule) -> Decision:
        return rule.parse(await self._x(*rule.command_args(key)))

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

    async def acquire(self, key: str, limit: int, lease_ms: int,
                      dryrun: bool = False) -> Decision:
        return parse_acquire(await self._x(*acquire_args(key, limit, lease_ms, dryrun)))

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
                    refund: Optional[int] = None) -> Decision:
        return parse_allow(await self._x(*allow_args(key, policy, cost=cost, dryrun=dryrun,
                                                     partial=partial, reserve=reserve,
                                                     refund=refund)), partial)

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
