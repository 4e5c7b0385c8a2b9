"""Python client for the redis-ratelimit Redis module.

* :class:`RateLimiter` / :class:`AsyncRateLimiter`: one method per command, typed replies.
* :mod:`redis_ratelimit.headers`: draft-ietf-httpapi-ratelimit-headers-10 rendering.
* :mod:`redis_ratelimit.wsgi`, :mod:`.asgi`, :mod:`.django`: HTTP middleware.
* :mod:`redis_ratelimit.limits_storage`: a storage for ``limits`` (Flask-Limiter, slowapi),
  registered as ``redis+ratelimit://`` when imported.
"""

from ._protocol import AllDecision, Decision, Options, Rule
from .client import AsyncRateLimiter, RateLimiter, connect, connect_async
from .headers import Item, render, reset_seconds
from .keys import Request, by_api_key, by_ip, by_org, by_user, client_address, ip_key
from .lease import Lease
from .leased import AsyncLeasedLimiter, LeasedLimiter
from .limitstr import parse_limits
from .memory import MemoryLimiter
from .middleware import Config, Event, Limit, Route
from .policies import (AsyncPolicies, ClusterPolicy, Policies, Policy, PolicyEntry, PolicyInfo,
                       PolicyNodesError, PolicyStats, PolicyVersion)

__all__ = [
    "AllDecision", "AsyncLeasedLimiter", "AsyncPolicies", "AsyncRateLimiter", "ClusterPolicy", "Policies", "Policy",
    "PolicyEntry", "PolicyInfo", "PolicyNodesError", "PolicyStats", "PolicyVersion", "Config", "Decision", "Event", "Item", "Lease", "LeasedLimiter", "Limit",
    "MemoryLimiter", "Options", "RateLimiter", "Request", "Route", "Rule", "by_api_key",
    "by_ip", "by_org", "by_user", "client_address", "connect", "connect_async", "ip_key",
    "parse_limits", "render", "reset_seconds",
]
__version__ = "0.1.0"
