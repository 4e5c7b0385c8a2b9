"""A storage for `limits <https://pypi.org/project/limits/>`_ (under Flask-Limiter and
slowapi) on the module's commands.

Importing this module registers the schemes with ``limits`` (its storages register by
subclassing ``limits.storage.Storage`` with ``STORAGE_SCHEME``)::

    import redis_ratelimit.limits_storage  # noqa: F401  (registers the schemes)
    Limiter(get_remote_address, app=app, storage_uri="redis+ratelimit://127.0.0.1:6379/0",
            strategy="moving-window")

``redis+ratelimit://`` / ``rediss+ratelimit://`` (sync: Flask-Limiter, slowapi) and
``async+redis+ratelimit://`` (``limits.aio``). The URL after the scheme is redis-py's.
Keyword options (Flask-Limiter's ``storage_options``) go to ``redis.Redis.from_url``.

Strategies, each one module command (atomic, TTL set in the same call, no Lua):

* ``fixed-window`` — ``RL.FIXED`` (windows aligned to the epoch; a refused hit spends
  nothing, unlike limits' own Redis storage, whose INCR counts refused hits too). ``limits``
  calls ``incr(key, expiry, amount)`` without the limit; the limit is read from the key,
  which ``limits`` builds as ``.../<amount>/<multiples>/<granularity>``.
* ``moving-window`` — ``RL.LOG``, the exact sliding log (limits' ``acquire_entry`` passes
  the limit). Limits above the module's ``ratelimit.log-max-limit`` (10000) are refused.
* ``sliding-window-counter`` — ``RL.SLIDING``: the same weighted estimate as limits'
  (previous count × the part of the previous window still inside the sliding window +
  current count), in exact arithmetic.
"""

from __future__ import annotations

import time
from typing import Any, List, Optional, Tuple

import redis
import redis.asyncio
from limits.aio.storage import MovingWindowSupport as AioMovingWindowSupport
from limits.aio.storage import SlidingWindowCounterSupport as AioSlidingWindowCounterSupport
from limits.aio.storage import Storage as AioStorage
from limits.limits import GRANULARITIES
from limits.storage import MovingWindowSupport, SlidingWindowCounterSupport, Storage

from ._protocol import Decision, parse_info

#: The limit a fixed-window counter gets when the key does not show the item's amount: the
#: counter then never refuses and ``limits`` compares the count, as with INCR.
UNBOUNDED = 2**53


def item_from_key(key: str) -> Optional[Tuple[int, int]]:
    """(amount, expiry s) of a key made by ``RateLimitItem.key_for`` (``.../10/1/minute``)."""
    parts = key.rsplit("/", 3)
    if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
        gran = GRANULARITIES.get(parts[3])
        if gran is not None:
            return int(parts[1]), int(parts[2]) * gran.GRANULARITY.seconds
    return None


def limit_from_key(key: str) -> Optional[int]:
    item = item_from_key(key)
    return None if item is None else item[0]


def _url(uri: str) -> str:
    scheme, sep, rest = uri.partition("://")
    base = scheme.replace("async+", "", 1).replace("+ratelimit", "", 1)
    return f"{base}{sep}{rest}"


class _Commands:
    """The arguments of each operation and the meaning of each reply (no I/O)."""

    prefix: str

    def k(self, key: str) -> str:
        return f"{self.prefix}:{key}"

    # fixed window
    def incr_plan(self, key: str, expiry: int, amount: int) -> Tuple[int, List[Any]]:
        limit = limit_from_key(key) or UNBOUNDED
        return limit, ["RL.FIXED", self.k(key), limit, expiry * 1000, "COST", amount]

    @staticmethod
    def incr_result(limit: int, amount: int, reply: Any) -> int:
        d = Decision.from_reply(reply)
        count = d.limit - d.remaining  # after this hit if admitted, before it if not
        return count if d.allowed else count + amount

    def get_plan(self, key: str) -> Optional[List[Any]]:
        item = item_from_key(key)
        if item is None:
            return None
        return ["RL.FIXED", self.k(key), item[0], item[1] * 1000, "DRYRUN"]

    @staticmethod
    def count_from_dryrun(reply: Any) -> int:
        d = Decision.from_reply(reply)
        return d.limit - d.remaining - (1 if d.allowed else 0)

    @staticmethod
    def expiry_from_pttl(pttl: int) -> float:
        return time.time() + max(0, int(pttl)) / 1000

    # moving window (RL.LOG)
    def log_args(self, key: str, limit: int, expiry: int, cost: int, dryrun: bool
                 ) -> List[Any]:
        return ["RL.LOG", self.k(key), limit, expiry * 1000, "COST", cost,
                *(["DRYRUN"] if dryrun else [])]

    @staticmethod
    def window_start(expiry: int, reply: Any) -> float:
        """From a DRYRUN of ``limit - count + 1`` units, refused: its retry is when the
        oldest unit ages out, i.e. the window started ``expiry - retry`` ago."""
        d = Decision.from_reply(reply)
        return time.time() - expiry + d.retry_after_ms / 1000

    # sliding window counter (RL.SLIDING)
    def sliding_args(self, key: str, limit: int, expiry: int, amount: int) -> List[Any]:
        return ["RL.SLIDING", self.k(key), limit, expiry * 1000, "COST", amount]

    @staticmethod
    def sliding_window(expiry: int, info_reply: Any) -> Tuple[int, float, int, float]:
        """(previous count, previous TTL s, current count, current TTL s) as limits wants
        them (its Redis storage: the current window's key lives until the end of the next
        window, the previous one's until the end of the current), from RL.INFO."""
        info = parse_info(info_reply)
        if not info or info.get("algorithm") != "sliding":
            return 0, 0.0, 0, 0.0
        w = expiry * 1000
        start, prev, cur = (int(info["window_start_ms"]), int(info["previous_count"]),
                            int(info["current_count"]))
        # The key expires at the end of the next window if the current count is non-zero,
        # else at the end of the current one: that gives the module's now.
        now = start + (2 * w if cur else w) - int(info["ttl_ms"])
        if now >= start + 2 * w:
            return 0, 0.0, 0, 0.0
        if now >= start + w:
            start, prev, cur = start + w, cur, 0
        left_ms = start + w - now
        return prev, left_ms / 1000, cur, (left_ms + w) / 1000


class RateLimitStorage(_Commands, Storage, MovingWindowSupport, SlidingWindowCounterSupport):
    """limits storage (sync) on the module: ``redis+ratelimit://host:port/db``."""

    STORAGE_SCHEME = ["redis+ratelimit", "rediss+ratelimit"]
    DEPENDENCIES = ["redis"]

    def __init__(self, uri: str, key_prefix: str = "LIMITS", wrap_exceptions: bool = False,
                 client: Any = None, **options: Any) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self.prefix = key_prefix
        self.redis = client if client is not None else redis.Redis.from_url(_url(uri),
                                                                            **options)

    @property
    def base_exceptions(self) -> Any:
        return redis.RedisError

    def _x(self, *args: Any) -> Any:
        return self.redis.execute_command(*args)

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        limit, args = self.incr_plan(key, expiry, amount)
        if amount < 1 or amount > limit:
            return self.get(key) + amount
        return self.incr_result(limit, amount, self._x(*args))

    def get(self, key: str) -> int:
        args = self.get_plan(key)
        return 0 if args is None else self.count_from_dryrun(self._x(*args))

    def get_expiry(self, key: str) -> float:
        return self.expiry_from_pttl(self.redis.pttl(self.k(key)))

    def check(self) -> bool:
        try:
            return bool(self.redis.ping())
        except redis.RedisError:
            return False

    def reset(self) -> Optional[int]:
        n = 0
        for batch in _chunks(self.redis.scan_iter(match=f"{self.prefix}:*", count=500)):
            n += int(self.redis.delete(*batch))
        return n

    def clear(self, key: str) -> None:
        self.redis.delete(self.k(key))

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if amount > limit:
            return False
        return Decision.from_reply(self._x(*self.log_args(key, limit, expiry, amount,
                                                          False))).allowed

    def get_moving_window(self, key: str, limit: int, expiry: int) -> Tuple[float, int]:
        count = self.count_from_dryrun(self._x(*self.log_args(key, limit, expiry, 1, True)))
        if count == 0:
            return time.time(), 0
        reply = self._x(*self.log_args(key, limit, expiry, limit - count + 1, True))
        return self.window_start(expiry, reply), count

    def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int,
                                     amount: int = 1) -> bool:
        if amount > limit:
            return False
        return Decision.from_reply(self._x(*self.sliding_args(key, limit, expiry,
                                                              amount))).allowed

    def get_sliding_window(self, key: str, expiry: int) -> Tuple[int, float, int, float]:
        return self.sliding_window(expiry, self._x("RL.INFO", self.k(key)))

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        self.clear(key)


class AsyncRateLimitStorage(_Commands, AioStorage, AioMovingWindowSupport,
                            AioSlidingWindowCounterSupport):
    """limits.aio storage on the module: ``async+redis+ratelimit://host:port/db``."""

    STORAGE_SCHEME = ["async+redis+ratelimit", "async+rediss+ratelimit"]
    DEPENDENCIES = ["redis"]

    def __init__(self, uri: str, key_prefix: str = "LIMITS", wrap_exceptions: bool = False,
                 client: Any = None, **options: Any) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self.prefix = key_prefix
        self.redis = client if client is not None else redis.asyncio.Redis.from_url(
            _url(uri), **options)

    @property
    def base_exceptions(self) -> Any:
        return redis.RedisError

    async def _x(self, *args: Any) -> Any:
        return await self.redis.execute_command(*args)

    async def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        limit, args = self.incr_plan(key, expiry, amount)
        if amount < 1 or amount > limit:
            return await self.get(key) + amount
        return self.incr_result(limit, amount, await self._x(*args))

    async def get(self, key: str) -> int:
        args = self.get_plan(key)
        return 0 if args is None else self.count_from_dryrun(await self._x(*args))

    async def get_expiry(self, key: str) -> float:
        return self.expiry_from_pttl(await self.redis.pttl(self.k(key)))

    async def check(self) -> bool:
        try:
            return bool(await self.redis.ping())
        except redis.RedisError:
            return False

    async def reset(self) -> Optional[int]:
        keys = [k async for k in self.redis.scan_iter(match=f"{self.prefix}:*", count=500)]
        n = 0
        for batch in _chunks(iter(keys)):
            n += int(await self.redis.delete(*batch))
        return n

    async def clear(self, key: str) -> None:
        await self.redis.delete(self.k(key))

    async def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if amount > limit:
            return False
        return Decision.from_reply(await self._x(*self.log_args(key, limit, expiry, amount,
                                                                False))).allowed

    async def get_moving_window(self, key: str, limit: int, expiry: int
                                ) -> Tuple[float, int]:
        count = self.count_from_dryrun(await self._x(*self.log_args(key, limit, expiry, 1,
                                                                    True)))
        if count == 0:
            return time.time(), 0
        reply = await self._x(*self.log_args(key, limit, expiry, limit - count + 1, True))
        return self.window_start(expiry, reply), count

    async def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int,
                                           amount: int = 1) -> bool:
        if amount > limit:
            return False
        return Decision.from_reply(await self._x(*self.sliding_args(key, limit, expiry,
                                                                    amount))).allowed

    async def get_sliding_window(self, key: str, expiry: int
                                 ) -> Tuple[int, float, int, float]:
        return self.sliding_window(expiry, await self._x("RL.INFO", self.k(key)))

    async def clear_sliding_window(self, key: str, expiry: int) -> None:
        await self.clear(key)


def _chunks(it: Any, n: int = 500) -> Any:
    batch: List[Any] = []
    for x in it:
        batch.append(x)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch
