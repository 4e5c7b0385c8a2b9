"""Per-request rate limiting for Flask with the redis-ratelimit module (redis-py).

    limiter = RateLimiter(app, redis=connect("redis://127.0.0.1:6379/0"), config=Config(...))

Each request is checked against the limits that apply to it:

* authenticated (``Authorization: Bearer <token>``, mapped by ``Config.identify`` to a user
  and, optionally, the user's organisation): the ``user`` limit and the ``org`` limit, both
  checked and spent by one atomic ``RL.ALL`` call (all or nothing: a request the
  organisation refuses spends nothing of the user's own quota);
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
    ``cost`` is how many units one request spends (``COST n``; 1 by default).
    """

    name: str
    # One of the rate commands RL.ALL also takes as a rule: "RL.GCRA", "RL.TOKENBUCKET",
    # "RL.SLIDING", "RL.FIXED", "RL.LOG" or "RL.QUEUE".
    command: str
    args: tuple[int, ...]  # the command's arguments after the key
    quota: int
    window_s: int
    cost: int = 1

    @classmethod
    def gcra(cls, name: str, burst: int, count: int, period_ms: int, cost: int = 1) -> "Limit":
        """``burst`` at once, then ``count`` per ``period_ms``. The advertised window is the
        time an exhausted key takes to refill completely: burst * period_ms / count."""
        return cls(name, "RL.GCRA", (burst, count, period_ms), burst,
                   _ceil_div(burst * period_ms, count * 1000), cost)

    @classmethod
    def sliding(cls, name: str, limit: int, window_ms: int, cost: int = 1) -> "Limit":
        """``limit`` per trailing ``window_ms`` (sliding window counter)."""
        return cls(name, "RL.SLIDING", (limit, window_ms), limit, _ceil_div(window_ms, 1000),
                   cost)

    def policy_item(self) -> str:
        return f'"{self.name}";q={self.quota};w={self.window_s}'

    def cost_args(self) -> tuple:
        return ("COST", self.cost) if self.cost != 1 else ()

    def rule(self) -> tuple:
        """This limit as an ``RL.ALL`` rule: ``RL.GCRA`` 10 5 1000 -> ``GCRA 10 5 1000``."""
        prefix, _, algo = self.command.upper().partition(".")
        if prefix != "RL" or algo not in _RULES:
            raise ValueError(f"{self.command} cannot be a rule of RL.ALL")
        return (algo, *self.args, *self.cost_args())


_RULES = frozenset({"GCRA", "TOKENBUCKET", "SLIDING", "FIXED", "LOG", "QUEUE"})


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
    """Checks and spends every limit in ``calls`` ((limit, key) pairs), all or nothing, in
    one call: if any limit refuses, nothing is spent on the others either (a request refused
    by its organisation's limit must not eat into the user's own quota).

    This is the only function that talks to Redis. One limit is one rate command (atomic by
    itself). Several are one ``RL.ALL numkeys key [key ...] rule [rule ...]``: the module
    decides every rule and, only if all admit, spends them all in one atomic step, so no
    concurrent request can slip in between a check and a spend. In Redis Cluster all the
    keys of one call must hash to one slot (``Config.calls`` gives them a common {hash tag}),
    or the server answers CROSSSLOT.
    """
    if len(calls) == 1:
        (limit, key), = calls
        reply = r.execute_command(limit.command, key, *limit.args, *limit.cost_args())
        return [Decision.from_reply(limit, key, reply)]
    keys = [key for _, key in calls]
    rules = [arg for limit, _ in calls for arg in limit.rule()]
    reply = r.execute_command("RL.ALL", len(keys), *keys, *rules)
    # [allowed, refused_by (1-based, 0 when admitted), reply of rule 1, reply of rule 2, ...]
    admitted, per_rule = int(reply[0]) == 1, reply[2:]
    decisions = [Decision.from_reply(limit, key, rule_reply)
                 for (limit, key), rule_reply in zip(calls, per_rule)]
    if admitted:
        return decisions
    # Refused: nothing was spent anywhere. Each rule's reply is what it alone would have
    # decided; a rule that would have admitted counted this request in its `remaining` (as
    # DRYRUN does), so what is really left is its cost more.
    return [_unspent(d) if d.allowed else d for d in decisions]


def _unspent(d: Decision) -> Decision:
    return Decision(d.limit, d.key, d.allowed, d.quota, min(d.quota, d.remaining + d.limit.cost),
                    d.retry_after_ms, d.reset_after_ms)


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
    ``RateLimit-Limit`` and ``RateLimit-Reset`` describe the tightest limit: a refusing limit
    first (the one with the longest wait), else the one with the fewest remaining;
    ``RateLimit-Remaining`` is the fewest remaining of all limits (with cost 1 a refusing
    limit has 0 left, so that is the tightest limit's own). ``Retry-After`` (only when
    refused) is the longest wait of the refusing limits, rounded up to seconds.
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
    headers["RateLimit-Remaining"] = str(min(d.remaining for d in decisions))
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
        """The (limit, key) pairs that apply to a request.

        A user in an organisation is checked together with it in one RL.ALL, so both keys
        carry the organisation as their Redis Cluster hash tag and live in one slot:
        ``rl:{org:acme}:user:alice`` and ``rl:{org:acme}``. A user without an organisation
        (``rl:user:carol``) and an anonymous client (``rl:ip:<address>``) have one key each.
        (Keep ``key_prefix`` free of braces: the first ``{...}`` of a key is its hash tag.)
        """
        p = self.key_prefix
        if who is None:
            return [(self.ip, f"{p}ip:{ip}")]
        if who.org is None:
            return [(self.user, f"{p}user:{who.user}")]
        tag = f"{{org:{who.org}}}"
        return [(self.user, f"{p}{tag}:user:{who.user}"), (self.org, f"{p}{tag}")]


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
