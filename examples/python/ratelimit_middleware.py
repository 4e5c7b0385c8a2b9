"""Per-request rate limiting for Flask with the redis-ratelimit module (redis-py).

    limiter = RateLimiter(app, redis=connect("redis://127.0.0.1:6379/0"), config=Config(...))

Each request is checked against the limits that apply to it:

* authenticated (``Authorization: Bearer <token>``, mapped by ``Config.identify`` to a user
  and, optionally, the user's organisation): the ``user`` limit and the ``org`` limit;
* anonymous: the ``ip`` limit, keyed by the client address. Behind proxies the address is
  read from ``X-Forwarded-For``, counting ``Config.trusted_proxies`` entries from the right
  (entries further left were written by the client and are ignored).

A refused request gets ``429 Too Many Requests`` with ``Retry-After`` (whole seconds,
rounded up) and an RFC 9457 problem body. Every checked response carries the headers of
draft-ietf-httpapi-ratelimit-headers (``RateLimit-Policy`` and ``RateLimit``, one item per
limit) and the older ``RateLimit-Limit``, ``RateLimit-Remaining`` and ``RateLimit-Reset``
(for the tightest limit).

When Redis cannot be reached within ``Config.redis_timeout`` (50 ms by default, set on the
client by ``connect``), ``Config.fail_open`` decides: True lets the request through without
rate-limit headers and logs a warning; False answers ``503 Service Unavailable``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Optional, Sequence

import redis
from flask import Flask, Request, Response, g, request
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger("ratelimit")

QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded"


# --------------------------------------------------------------------------- limits


@dataclass(frozen=True)
class Limit:
    """One rule: a policy name (used in the headers), a module command and its numbers.

    ``quota`` and ``window_s`` are what ``RateLimit-Policy`` advertises (``q`` and ``w``).
    """

    name: str
    command: str  # "RL.GCRA" or "RL.SLIDING" (any rate command with the standard reply works)
    args: tuple[int, ...]  # the command's arguments after the key
    quota: int
    window_s: int

    @classmethod
    def gcra(cls, name: str, burst: int, count: int, period_ms: int) -> "Limit":
        """``burst`` at once, then ``count`` per ``period_ms``. The advertised window is the
        time an exhausted key takes to refill completely: burst * period_ms / count."""
        return cls(name, "RL.GCRA", (burst, count, period_ms), burst,
                   _ceil_div(burst * period_ms, count * 1000))

    @classmethod
    def sliding(cls, name: str, limit: int, window_ms: int) -> "Limit":
        """``limit`` per trailing ``window_ms`` (sliding window counter)."""
        return cls(name, "RL.SLIDING", (limit, window_ms), limit, _ceil_div(window_ms, 1000))

    def policy_item(self) -> str:
        return f'"{self.name}";q={self.quota};w={self.window_s}'


@dataclass(frozen=True)
class Decision:
    """The module's standard reply for one limit (the first five fields)."""

    limit: Limit
    key: str
    allowed: bool
    quota: int  # reply field 2, `limit`
    remaining: int
    retry_after_ms: int
    reset_after_ms: int

    @classmethod
    def from_reply(cls, limit: Limit, key: str, reply: Sequence[int]) -> "Decision":
        allowed, quota, remaining, retry_after_ms, reset_after_ms = (int(x) for x in reply[:5])
        return cls(limit, key, allowed == 1, quota, remaining, retry_after_ms, reset_after_ms)

    def seconds(self) -> int:
        """The ``t`` of the ``RateLimit`` item: when refused, seconds until this request would
        be admitted (the same as ``Retry-After``); when admitted, seconds until the key is
        fresh again (full quota)."""
        return _ceil_div(self.retry_after_ms if not self.allowed else self.reset_after_ms, 1000)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------- Redis


def connect(url: str, timeout: float = 0.05) -> redis.Redis:
    """A client that gives up quickly: ``timeout`` seconds to connect and per reply, and no
    retries (redis-py retries 3 times by default), so a dead Redis costs one timeout."""
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def check(r: redis.Redis, calls: Sequence[tuple[Limit, str]]) -> list[Decision]:
    """Checks and spends one unit of every limit in ``calls`` ((limit, key) pairs), all or
    nothing: if any limit refuses, nothing is spent on the others either (a request refused
    by its organisation's limit must not eat into the user's own quota).

    This is the only function that talks to Redis. The module will get an atomic multi-limit
    command, ``RL.ALL numkeys key [key ...] rule [rule ...]`` (rules like ``GCRA 10 5 1000``
    or ``SLIDING 100 60000``); it does not exist yet. Until then, several limits take two
    round trips: a DRYRUN of every limit, then, only if all would admit, the real calls. A
    concurrent request can slip in between the two; then the second pass refuses one limit
    after another has already spent its unit. Switching to RL.ALL is a change to this
    function alone: send one ``RL.ALL`` with every key and rule, and build the Decisions from
    the per-rule replies it returns after its ``allowed`` and ``refused index`` fields.
    (In Redis Cluster, RL.ALL needs all keys in one slot: give them a common {hash tag}.)
    """
    if len(calls) == 1:  # one command is atomic already: check and spend in one call
        return _run(r, calls, dryrun=False)
    probe = _run(r, calls, dryrun=True)
    if not all(d.allowed for d in probe):
        # Nothing was spent. A DRYRUN reply's `remaining` is counted after the request it
        # imagines (cost 1), so the quota left right now is one more for a would-admit limit.
        return [d if not d.allowed else _unspent(d) for d in probe]
    return _run(r, calls, dryrun=False)


def _unspent(d: Decision) -> Decision:
    return Decision(d.limit, d.key, d.allowed, d.quota, min(d.quota, d.remaining + 1),
                    d.retry_after_ms, d.reset_after_ms)


def _run(r: redis.Redis, calls: Sequence[tuple[Limit, str]], dryrun: bool) -> list[Decision]:
    pipe = r.pipeline(transaction=False)  # one round trip for all limits
    for limit, key in calls:
        pipe.execute_command(limit.command, key, *limit.args, *(("DRYRUN",) if dryrun else ()))
    replies = pipe.execute()
    return [Decision.from_reply(limit, key, reply) for (limit, key), reply in zip(calls, replies)]


# --------------------------------------------------------------------------- client address


def client_ip(peer: str, forwarded_for: Iterable[str], trusted_proxies: int) -> str:
    """The client's address, given the TCP peer, the ``X-Forwarded-For`` header lines (in
    order) and how many proxies in front of the app are trusted to append to that header.

    Each trusted proxy appends the address it received the request from, so the client is
    the ``trusted_proxies``-th entry from the right; anything left of it was sent by the
    client and may be forged. With 0 trusted proxies the header is ignored. With fewer
    entries than trusted proxies, or an entry that is not an address, the peer is used.
    """
    if trusted_proxies <= 0:
        return _normalize(peer) or peer
    hops = [h.strip() for line in forwarded_for for h in line.split(",") if h.strip()]
    if len(hops) < trusted_proxies:
        return _normalize(peer) or peer
    return _normalize(hops[-trusted_proxies]) or _normalize(peer) or peer


def _normalize(addr: str) -> Optional[str]:
    """Canonical text of an address; strips a port ("1.2.3.4:80", "[::1]:80") and maps
    IPv4-mapped IPv6 (::ffff:1.2.3.4) to IPv4. None if it is not an address."""
    a = addr.strip()
    if a.startswith("["):
        a = a[1:].split("]", 1)[0]
    elif a.count(":") == 1:
        a = a.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(a)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    # Each IPv6 client usually owns a whole /64; key on that prefix instead if clients
    # rotate addresses inside it.
    return str(ip)


# --------------------------------------------------------------------------- headers


def rate_limit_headers(decisions: Sequence[Decision]) -> dict[str, str]:
    """The response headers for a set of decisions.

    ``RateLimit-Policy`` and ``RateLimit`` list every limit. The older single-valued
    ``RateLimit-Limit/-Remaining/-Reset`` describe the tightest one: a refusing limit first
    (the one with the longest wait), else the one with the fewest remaining. ``Retry-After``
    (only when refused) is the longest wait of the refusing limits, rounded up to seconds.
    """
    headers = {
        "RateLimit-Policy": ", ".join(d.limit.policy_item() for d in decisions),
        "RateLimit": ", ".join(
            f'"{d.limit.name}";r={d.remaining};t={d.seconds()}' for d in decisions
        ),
    }
    tightest = min(decisions, key=lambda d: (d.allowed, d.remaining, -d.retry_after_ms,
                                             -d.reset_after_ms))
    headers["RateLimit-Limit"] = str(tightest.quota)
    headers["RateLimit-Remaining"] = str(tightest.remaining)
    headers["RateLimit-Reset"] = str(tightest.seconds())
    refused = [d for d in decisions if not d.allowed]
    if refused:
        headers["Retry-After"] = str(_ceil_div(max(d.retry_after_ms for d in refused), 1000))
    return headers


# --------------------------------------------------------------------------- middleware


@dataclass(frozen=True)
class Identity:
    user: str
    org: Optional[str] = None


def bearer_tokens(tokens: Mapping[str, Identity]) -> Callable[[Request], Optional[Identity]]:
    """An ``identify`` function for ``Config``: ``Authorization: Bearer <token>`` looked up
    in ``tokens``. Stands in for the application's real authentication (a session, a JWT's
    ``sub`` and ``org`` claims, an API key table). An unknown token counts as anonymous."""

    def identify(req: Request) -> Optional[Identity]:
        scheme, _, token = req.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        return tokens.get(token.strip())

    return identify


@dataclass
class Config:
    user: Limit = field(default_factory=lambda: Limit.gcra("user", 100, 100, 60_000))
    org: Limit = field(default_factory=lambda: Limit.sliding("org", 1000, 60_000))
    ip: Limit = field(default_factory=lambda: Limit.gcra("ip", 20, 20, 60_000))
    identify: Callable[[Request], Optional[Identity]] = field(
        default_factory=lambda: bearer_tokens({}))
    trusted_proxies: int = 0  # proxies in front of the app that append to X-Forwarded-For
    fail_open: bool = True  # Redis unreachable: True = let requests through, False = 503
    key_prefix: str = "rl:"

    def calls(self, who: Optional[Identity], ip: str) -> list[tuple[Limit, str]]:
        """The (limit, key) pairs that apply to a request."""
        p = self.key_prefix
        if who is None:
            return [(self.ip, f"{p}ip:{ip}")]
        calls = [(self.user, f"{p}user:{who.user}")]
        if who.org is not None:
            calls.append((self.org, f"{p}org:{who.org}"))
        return calls


class RateLimiter:
    """Flask extension: checks every request before its view runs and adds the headers to
    every response it checked (including 429s and the view's own errors)."""

    def __init__(self, app: Optional[Flask] = None, *, redis: redis.Redis,
                 config: Optional[Config] = None):
        self.redis = redis
        self.config = config or Config()
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        app.before_request(self._before)
        app.after_request(self._after)

    def _before(self) -> Optional[Response]:
        cfg = self.config
        ip = client_ip(request.remote_addr or "", request.headers.getlist("X-Forwarded-For"),
                       cfg.trusted_proxies)
        calls = cfg.calls(cfg.identify(request), ip)
        try:
            decisions = check(self.redis, calls)
        except redis.RedisError as e:
            if cfg.fail_open:
                log.warning("rate limiting skipped, Redis unavailable (failing open): %s", e)
                return None
            log.error("request refused, Redis unavailable (failing closed): %s", e)
            return _json(503, {"title": "Rate limiter unavailable"}, {"Retry-After": "1"})
        g.rate_limit_decisions = decisions
        refused = [d.limit.name for d in decisions if not d.allowed]
        if refused:
            return _json(429, {
                "type": QUOTA_EXCEEDED,
                "title": "Request cannot be satisfied as assigned quota has been exceeded",
                "violated-policies": refused,
            }, {"Content-Type": "application/problem+json"})
        return None

    def _after(self, response: Response) -> Response:
        decisions = g.pop("rate_limit_decisions", None)
        if decisions:
            response.headers.update(rate_limit_headers(decisions))
        return response


def _json(status: int, body: dict, headers: dict[str, str]) -> Response:
    resp = Response(json.dumps(body), status=status, mimetype="application/json")
    resp.headers.update(headers)
    return resp
