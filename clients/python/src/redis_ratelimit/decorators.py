"""What the per-view decorators (Flask, Django) and the FastAPI dependency share: a limiter
that holds one :class:`~redis_ratelimit.middleware.Engine` (its leases, its local refusals,
its breaker) and turns ``limit("10/minute", key=...)`` into :class:`Limit` objects, as
Flask-Limiter and slowapi write them.

The limits of one view (stacked decorators, or one string of several items) are checked in
one atomic ``RL.ALL``: all admit or nothing is spent.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Union

from .keys import KeyFunc, Request, by_ip
from .lease import Lease
from .middleware import Config, Engine, Limit, RuleSpec

CostSpec = Union[int, Callable[[Request], int]]


class BaseLimiter:
    """``redis``: the client (sync for Flask and Django, asyncio for FastAPI). ``key``: the
    default key function (default :func:`~redis_ratelimit.by_ip`: the client address).
    ``config``: the defaults of :class:`Config` (``key_prefix``, ``on_decision``,
    ``local_refusals``, ``clock_ms``, ``breaker_ms``, ``legacy_headers``, ...); its
    ``limits`` and ``routes`` are not used here (that is the middleware's way)."""

    def __init__(self, redis: Any, key: KeyFunc = by_ip, config: Optional[Config] = None,
                 **config_kw: Any):
        self.redis = redis
        self.key = key
        self.config = config if config is not None else Config(**config_kw)
        self.engine = Engine(self.config)

    def limits(self, rule: RuleSpec, *, key: Optional[KeyFunc] = None, cost: CostSpec = 1,
               name: str, lease: Optional[Lease] = None, allow: Sequence[str] = (),
               deny: Sequence[str] = (), algorithm: str = "sliding",
               shadow: Optional[bool] = None, fail_open: bool = True,
               block_ms: Optional[int] = None, wait_ms: Optional[int] = None) -> List[Limit]:
        """The :class:`Limit` of one ``limit(...)`` (checked when the limiter is built:
        a bad string or a lease on a sliding rule fails at import, not at the first
        request)."""
        lim = Limit(name, rule, key or self.key, fail_open=fail_open, shadow=shadow,
                    cost=cost, block_ms=block_ms, wait_ms=wait_ms, lease=lease, allow=allow,
                    deny=deny, algorithm=algorithm)
        if not callable(rule) or isinstance(rule, str):
            for x in lim.expand():
                self.engine.check_limit(x)
        return [lim]


def view_name(fn: Any, taken: int = 0) -> str:
    """The default limit name of a view: its function's name (``checkout``, as Flask names
    the endpoint); the second limit stacked on it without a name is ``checkout-b``, ..."""
    name = getattr(fn, "__name__", None) or "view"
    return name if taken == 0 else f"{name}-{chr(ord('a') + taken)}"


LIMITS_ATTR = "__redis_ratelimit_limits__"


def stacked(fn: Any) -> Optional[List[Limit]]:
    """The limits list of a function already wrapped by one of our decorators (stacked
    decorators add to one list: one RL.ALL)."""
    return getattr(fn, LIMITS_ATTR, None)
