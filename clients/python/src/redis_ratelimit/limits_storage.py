"""A storage for `limits <https://pypi.org/project/limits/>`_ (under Flask-Limiter and
slowapi) on the module's commands.

Importing this module registers the schemes with ``limits`` (its storages register by
subclassing ``limits.storage.Storage`` with ``STORAGE_SCHEME``)::

    import redis_ratelimit.limits_storage  # noqa: F401  (registers the schemes)
    Limiter(get_remote_address, app=app, storage_uri="redis+ratelimit://127.0.0.1:6379/0",
            strategy="moving-window")

``redis+ratelimit://`` / ``rediss+ratelimit://`` (sync: Flask-Limiter, slowapi) and
``async+redis+ratelimit://`` (``limits.aio``); the URL after the scheme is redis-py's. With
``+cluster`` (``redis+ratelimit+cluster://h1:p1,h2:p2``) a Redis Cluster.
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
  current count), in exact arithmetic. What ``get_sliding_window`` returns is derived from
  the module's own answer (a peek and a DRYRUN), so that limits' ``test()`` agrees with
  ``hit()`` and the reset time limits computes (Flask-Limiter's ``Retry-After``, slowapi's)
  is the module's ``retry_after_ms`` rounded up to whole seconds, never earlier.

Each strategy has keys of its own (``<prefix>:fixed:``, ``<prefix>:moving:``,
``<prefix>:sliding:`` before limits' key): switching the strategy of a live app starts the
new strategy afresh instead of meeting the old one's keys (``WRONGTYPE``).
"""

from __future__ import annotations

import math
import time
from typing import Any, Dict, List, Optional, Tuple

import redis
import redis.asyncio
from limits.aio.storage import MovingWindowSupport as AioMovingWindowSupport
from limits.aio.storage import SlidingWindowCounterSupport as AioSlidingWindowCounterSupport
from limits.aio.storage import Storage as AioStorage
from limits._storage_scheme import parse_storage_uri
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
    base = scheme.replace("async+", "", 1).replace("+ratelimit", "", 1).replace("+cluster", "")
    return f"{base}{sep}{rest}"


def _cluster_nodes(uri: str) -> List[Tuple[str, int]]:
    locations = parse_storage_uri(uri).locations
    if not locations:
        raise ValueError(f"no host:port in {uri}")
    return locations


def _client(uri: str, options: Dict[str, Any], asyncio: bool) -> Any:
    """redis-py's client for the URL: a cluster client for the ``+cluster`` schemes."""
    if "+cluster" in uri.partition("://")[0]:
        scheme = uri.partition("://")[0]
        if scheme.startswith("async+"):
            scheme = scheme[len("async+"):]
        ssl = scheme.startswith("rediss")
        if asyncio:
            from redis.asyncio.cluster import ClusterNode as AsyncNode
            from redis.asyncio.cluster import RedisCluster as AsyncCluster

            return AsyncCluster(startup_nodes=[AsyncNode(h, p) for h, p in _cluster_nodes(uri)],
                                ssl=ssl, **options)
        from redis.cluster import ClusterNode, RedisCluster

        nodes = [ClusterNode(h, p) for h, p in _cluster_nodes(uri)]  # type: ignore[no-untyped-call]
        return RedisCluster(startup_nodes=nodes, ssl=ssl, **options)
    if asyncio:
        return redis.asyncio.Redis.from_url(_url(uri), **options)
    return redis.Redis.from_url(_url(uri), **options)


#: The key segment of each strategy: a strategy switch on a live app never meets the keys
#: (another algorithm's state) of the previous one.
FIXED, MOVING, SLIDING = "fixed", "moving", "sliding"


class _Commands:
    """The arguments of each operation and the meaning of each reply (no I/O)."""

    prefix: str

    def k(self, key: str, strategy: str = FIXED) -> str:
        return f"{self.prefix}:{strategy}:{key}"

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
        """The window's end (fixed window: the module's retry_after_ms of a refused hit),
        in whole seconds rounded up from now: Flask-Limiter floors what it sends in
        Retry-After, which must never come before the module admits again."""
        return time.time() + -(-max(0, int(pttl)) // 1000)

    # moving window (RL.LOG)
    def log_args(self, key: str, limit: int, expiry: int, cost: int, dryrun: bool
                 ) -> List[Any]:
        return ["RL.LOG", self.k(key, MOVING), limit, expiry * 1000, "COST", cost,
                *(["DRYRUN"] if dryrun else [])]

    @staticmethod
    def window_start(expiry: int, reply: Any) -> float:
        """From a DRYRUN of ``limit - count + 1`` units, refused: its retry is when the
        oldest unit ages out, i.e. the window started ``expiry - retry`` ago. The retry is
        rounded up to whole seconds (limits' reset, Flask-Limiter's Retry-After: never
        before the module's retry_after_ms)."""
        d = Decision.from_reply(reply)
        return time.time() - expiry + -(-d.retry_after_ms // 1000)

    # sliding window counter (RL.SLIDING)
    def sliding_args(self, key: str, limit: int, expiry: int, amount: int,
                     dryrun: bool = False) -> List[Any]:
        return ["RL.SLIDING", self.k(key, SLIDING), limit, expiry * 1000, "COST", amount,
                *(["DRYRUN"] if dryrun else [])]

    def sliding_probe_plan(self, key: str, expiry: int) -> Optional[List[List[Any]]]:
        """The module's view of a sliding window counter without writing: a peek (``COST
        0``: how many units fit now) and a DRYRUN of one unit (when it would fit). None
        when the key does not show the limit (not built by ``limits``)."""
        limit = limit_from_key(key)
        if limit is None:
            return None
        return [self.sliding_args(key, limit, expiry, 0),
                self.sliding_args(key, limit, expiry, 1, dryrun=True)]

    @staticmethod
    def sliding_view(limit: int, expiry: int, peek: Any, dry: Any
                     ) -> Tuple[float, float, int, float]:
        """(previous count, previous TTL s, current count, current TTL s) for limits'
        ``SlidingWindowCounterRateLimiter``, built from the module's answers so that what
        limits computes from them is what the module decides:

        * the weighted count limits computes is ``limit - fit + r/u`` (``fit``: units that
          fit now, ``0 <= r/u < 1``): ``test(cost)`` is True exactly when ``hit(cost)``
          would admit, and ``remaining`` is ``fit``;
        * the reset limits computes (``previous TTL % (window / previous count)``) is
          ``r``: when nothing fits, the module's ``retry_after_ms`` rounded up to whole
          seconds (so a client that honours Retry-After is admitted); else when quota comes
          back (the end of the current window, as the draft-10 ``t`` of a sliding rule).

        The previous count is 1 (a fraction when ``r`` is a window or more: the module's
        wait can exceed the window, limits' modulo cannot); the current count is 0.
        """
        p = Decision.from_reply(peek)
        fit = p.remaining
        spent = limit - fit
        if spent <= 0:
            return 0, 0.0, 0, 0.0
        if fit == 0:
            r_ms = Decision.from_reply(dry).retry_after_ms
        else:  # admitted: when more quota comes back (decision 3, SLIDING)
            w_ms = expiry * 1000
            reset = p.reset_after_ms
            r_ms = reset - w_ms if reset > w_ms else reset
        r = float(max(1, -(-r_ms // 1000)))
        w = float(expiry)
        prev = 1.0 if r < w else w / (r + w)
        u = w / prev  # limits' "time one previous unit takes to age out"
        return prev, spent * u + r, 0, 0.0

    def clock_probe_args(self, key: str = "") -> List[Any]:
        """A DRYRUN on a key that never exists, with the longest window the module takes:
        its reset is the time to the next multiple of 10^12 ms, which gives the module's own
        clock (the server's, or the test clock) without writing anything. The probe key is
        in the slot of ``key`` (its hash tag), so that in a cluster it asks the same node."""
        full = self.k(key)
        i = full.find("{")
        j = full.find("}", i + 1) if i >= 0 else -1
        if i >= 0 and j > i + 1:
            tag = full[i + 1:j]
        elif "}" not in full:
            tag = full
        else:
            tag = self.prefix
        return ["RL.FIXED", f"{{{tag}}}:rl-clock-probe", 1, _PROBE_MS, "DRYRUN"]

    @staticmethod
    def module_now_ms(probe_reply: Any) -> int:
        reset = Decision.from_reply(probe_reply).reset_after_ms
        here = int(time.time() * 1000)
        # now = k * 10^12 + (10^12 - reset): the k that lands nearest to this host's clock
        base = _PROBE_MS - reset
        k = round((here - base) / _PROBE_MS)
        return k * _PROBE_MS + base

    @staticmethod
    def sliding_window(expiry: int, info_reply: Any, now: int
                       ) -> Tuple[int, float, int, float]:
        """(previous count, previous TTL s, current count, current TTL s) as limits wants
        them (its Redis storage: the current window's key lives until the end of the next
        window, the previous one's until the end of the current), from RL.INFO and the
        module's clock ``now`` (ms)."""
        info = parse_info(info_reply)
        if not info or info.get("algorithm") != "sliding":
            return 0, 0.0, 0, 0.0
        w = expiry * 1000
        start, prev, cur = (int(info["window_start_ms"]), int(info["previous_count"]),
                            int(info["current_count"]))
        if now >= start + 2 * w:
            return 0, 0.0, 0, 0.0
        if now >= start + w:
            start, prev, cur = start + w, cur, 0
        left_ms = start + w - now
        return prev, left_ms / 1000, cur, (left_ms + w) / 1000


_PROBE_MS = 10**12


class RateLimitStorage(_Commands, Storage, MovingWindowSupport, SlidingWindowCounterSupport):
    """limits storage (sync) on the module: ``redis+ratelimit://host:port/db``."""

    STORAGE_SCHEME = ["redis+ratelimit", "rediss+ratelimit", "redis+ratelimit+cluster",
                      "rediss+ratelimit+cluster"]
    DEPENDENCIES = ["redis"]

    def __init__(self, uri: str, key_prefix: str = "LIMITS", wrap_exceptions: bool = False,
                 client: Any = None, **options: Any) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self.prefix = key_prefix
        self.redis = client if client is not None else _client(uri, options, asyncio=False)

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
        # limits clears fixed and moving windows with this one method
        self.redis.delete(self.k(key, FIXED))
        self.redis.delete(self.k(key, MOVING))

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

    def get_sliding_window(self, key: str, expiry: int) -> Tuple[Any, float, int, float]:
        plan = self.sliding_probe_plan(key, expiry)
        pipe = self.redis.pipeline(transaction=False)
        if plan is not None:
            for args in plan:
                pipe.execute_command(*args)
            peek, dry = pipe.execute()
            return self.sliding_view(limit_from_key(key) or 0, expiry, peek, dry)
        pipe.execute_command("RL.INFO", self.k(key, SLIDING))
        pipe.execute_command(*self.clock_probe_args(key))
        info, probe = pipe.execute()
        return self.sliding_window(expiry, info, self.module_now_ms(probe))

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        self.redis.delete(self.k(key, SLIDING))


class AsyncRateLimitStorage(_Commands, AioStorage, AioMovingWindowSupport,
                            AioSlidingWindowCounterSupport):
    """limits.aio storage on the module: ``async+redis+ratelimit://host:port/db``."""

    STORAGE_SCHEME = ["async+redis+ratelimit", "async+rediss+ratelimit",
                      "async+redis+ratelimit+cluster", "async+rediss+ratelimit+cluster"]
    DEPENDENCIES = ["redis"]

    def __init__(self, uri: str, key_prefix: str = "LIMITS", wrap_exceptions: bool = False,
                 client: Any = None, **options: Any) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self.prefix = key_prefix
        self.redis = client if client is not None else _client(uri, options, asyncio=True)

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
        # limits clears fixed and moving windows with this one method
        await self.redis.delete(self.k(key, FIXED))
        await self.redis.delete(self.k(key, MOVING))

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
                                 ) -> Tuple[Any, float, int, float]:
        plan = self.sliding_probe_plan(key, expiry)
        pipe = self.redis.pipeline(transaction=False)
        if plan is not None:
            for args in plan:
                pipe.execute_command(*args)
            peek, dry = await pipe.execute()
            return self.sliding_view(limit_from_key(key) or 0, expiry, peek, dry)
        pipe.execute_command("RL.INFO", self.k(key, SLIDING))
        pipe.execute_command(*self.clock_probe_args(key))
        info, probe = await pipe.execute()
        return self.sliding_window(expiry, info, self.module_now_ms(probe))

    async def clear_sliding_window(self, key: str, expiry: int) -> None:
        await self.redis.delete(self.k(key, SLIDING))


def _chunks(it: Any, n: int = 500) -> Any:
    batch: List[Any] = []
    for x in it:
        batch.append(x)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


# ------------------------------------------------------------------ draft-10 headers


def draft10_headers(item: Any, window: Any, breached: bool, name: Optional[str] = None,
                    now: Optional[float] = None) -> Dict[str, str]:
    """draft-10 headers for a ``limits`` item and its ``WindowStats`` (reset time, remaining).

    ``t`` is the time to the window stats' reset, which limits computes as the time until
    quota comes back: the window's end (fixed), the oldest entry's expiry (moving window),
    the next unit of the weighted count (sliding window counter).
    """
    now = time.time() if now is None else now
    reset_at, remaining = window[0], window[1]
    t = max(0, math.ceil(reset_at - now))
    w = item.get_expiry()
    label = name or f"{item.amount}-per-{item.multiples}-{item.GRANULARITY.name}"
    label = '"' + label.replace("\\", "\\\\").replace('"', '\\"') + '"'
    h = {"RateLimit-Policy": f"{label};q={item.amount};w={w}",
         "RateLimit": f"{label};r={max(0, remaining)};t={min(t, w)}"}  # t never above w
    if breached:
        h["Retry-After"] = str(max(1, t))
    return h


def flask_limiter_headers(app: Any, limiter: Any) -> None:
    """Adds draft-10 headers for Flask-Limiter's current limit to every response (429s
    included); Flask-Limiter itself sends only the X-RateLimit-* ones."""

    @app.after_request  # type: ignore[untyped-decorator]
    def _add(resp: Any) -> Any:
        lim = limiter.current_limit
        if lim is not None:
            resp.headers.update(draft10_headers(lim.limit, lim.window, lim.breached))
        return resp


class SlowapiHeadersMiddleware:
    """ASGI middleware adding draft-10 headers for slowapi's limit of the request
    (``request.state.view_rate_limit``) to the response, 429s included::

        app.add_middleware(SlowapiHeadersMiddleware)   # after app.state.limiter = limiter
    """

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_wrapper(msg: Any) -> None:
            if msg["type"] == "http.response.start":
                view = (scope.get("state") or {}).get("view_rate_limit")
                limiter = getattr(scope["app"].state, "limiter", None)
                if view is not None and limiter is not None:
                    item, args = view
                    window = limiter.limiter.get_window_stats(item, *args)
                    h = draft10_headers(item, window, msg["status"] == 429)
                    msg = dict(msg)
                    msg["headers"] = [*msg.get("headers", ()),
                                      *((k.lower().encode(), v.encode()) for k, v in h.items())]
            await send(msg)

        await self.app(scope, receive, send_wrapper)
