"""The framework-independent part of the HTTP middleware.

A request goes through three steps; only the middle one does I/O, and it exists twice (sync
for WSGI/Django, asyncio for ASGI), everything else once:

1. :meth:`Engine.plan` — which limits apply (the route's own, else the defaults; none on an
   exempt path) and under which keys (each limit's key function; None = not applicable).
2. running the plan's commands (:func:`run_sync` / :func:`run_async`): one rate command for
   one limit, one atomic ``RL.ALL`` for several (all or nothing: a request refused by its
   organisation's limit spends nothing of its user's). Shadow limits run in a command of
   their own, so that their refusals never keep the enforced limits from spending.
3. :meth:`Engine.finish` — the outcome: pass (with the draft-10 headers to add) or refuse
   (429 with ``Retry-After``, or 503 when a fail-closed limit could not be checked).

When Redis fails (unreachable, timeout, ``OOM``), each limit decides alone: with a
``fallback`` rule it is checked in process memory instead; else ``fail_open`` admits (no
headers for it) or refuses with 503. Every decision is reported to ``on_decision``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, List, Optional, Pattern, Sequence, Tuple, Union)

import redis

from ._protocol import Decision, Rule, all_args, parse_all
from .headers import Item, render
from .keys import KeyFunc, Request
from .memory import MemoryLimiter

log = logging.getLogger("redis_ratelimit")

QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded"
REDUCED_CAPACITY = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"


@dataclass(frozen=True)
class Limit:
    """One limit: a policy ``name`` (headers, keys, metrics), a :class:`Rule`, a key function.

    ``fail_open``: when Redis cannot answer, admit (True) or answer 503 (False).
    ``fallback``: a rule checked in process memory when Redis cannot answer (takes
    precedence over ``fail_open``; size it per process). ``shadow``: spend and report, never
    refuse, send no headers for it.
    """

    name: str
    rule: Rule
    key: KeyFunc
    fail_open: bool = True
    fallback: Optional[Rule] = None
    shadow: bool = False


PathMatch = Union[str, Pattern[str]]


def _path_matches(m: PathMatch, path: str) -> bool:
    if isinstance(m, str):
        return path.startswith(m[:-1]) if m.endswith("*") else path == m
    return m.fullmatch(path) is not None


@dataclass(frozen=True)
class Route:
    """Limits for some paths: ``path`` is exact (``"/login"``), a prefix ending in ``*``
    (``"/api/*"``) or a compiled regex (full match). ``methods`` None = every method."""

    path: PathMatch
    limits: Sequence[Limit]
    methods: Optional[Sequence[str]] = None

    def matches(self, req: Request) -> bool:
        if self.methods is not None and req.method.upper() not in {m.upper() for m in
                                                                    self.methods}:
            return False
        return _path_matches(self.path, req.path)


@dataclass(frozen=True)
class Event:
    """What ``on_decision`` gets, once per applicable limit and request.

    ``source``: ``redis``, ``fallback`` (in-memory), ``fail-open`` or ``fail-closed``.
    ``refused``: the limit refused (in shadow mode: would have refused).
    """

    request: Request
    limit: str
    key: str
    source: str
    refused: bool
    shadow: bool
    decision: Optional[Decision] = None
    error: Optional[BaseException] = None


@dataclass
class Config:
    """What the middleware enforces.

    ``limits`` apply to every request that no ``routes`` entry matches (the first matching
    route wins). ``exempt``: paths (as in :class:`Route`) or predicates that are never
    limited (health checks, webhooks). Keys are ``key_prefix + name + ":" + identity``;
    with ``hash_tag`` (a key function, e.g. the organisation) ``key_prefix + "{" + tag + "}:"
    + name + ":" + identity``, so that one request's keys share a Redis Cluster slot and
    ``RL.ALL`` can check them together there.
    """

    limits: Sequence[Limit] = ()
    routes: Sequence[Route] = ()
    exempt: Sequence[Union[PathMatch, Callable[[Request], bool]]] = ()
    key_prefix: str = "rl:"
    hash_tag: Optional[KeyFunc] = None
    shadow: bool = False  # every limit in shadow mode
    on_decision: Optional[Callable[[Event], None]] = None
    legacy_headers: bool = False  # also X-RateLimit-Limit / -Remaining / -Reset
    legacy_reset: str = "delta"  # or "epoch"
    memory: MemoryLimiter = field(default_factory=MemoryLimiter)
    # After Redis failed, requests go straight to their failure path (fallback, fail open or
    # closed) for this long instead of each waiting for a timeout; then one request tries
    # Redis again. 0: try Redis on every request.
    breaker_ms: int = 1000
    clock: Callable[[], float] = time.monotonic  # seconds, for the breaker


@dataclass(frozen=True)
class Call:
    limit: Limit
    key: str

    @property
    def shadow(self) -> bool:
        return self.limit.shadow


@dataclass(frozen=True)
class Plan:
    request: Request
    calls: Tuple[Call, ...]
    shadow_all: bool


@dataclass(frozen=True)
class Outcome:
    """``status`` None: let the request through and add ``headers`` to its response."""

    status: Optional[int]
    headers: Dict[str, str]
    body: bytes = b""
    delay_ms: int = 0  # an admitted QUEUE rule's delay: wait this long, then proceed


# A batch: the calls it decides, the command's arguments, and the reply's parser.
Batch = Tuple[Tuple[Call, ...], List[Any], Callable[[Any], List[Decision]]]
Result = Union[Decision, BaseException]


class CircuitOpen(redis.ConnectionError):
    """Redis failed less than ``Config.breaker_ms`` ago: not tried for this request."""


class Engine:
    def __init__(self, config: Config):
        self.config = config
        self._open_until = 0.0

    # ---- the breaker: a dead Redis costs one timeout per breaker_ms, not one per request

    def circuit_open(self) -> bool:
        return self.config.breaker_ms > 0 and self.config.clock() < self._open_until

    def trip(self) -> None:
        self._open_until = self.config.clock() + self.config.breaker_ms / 1000

    # ---- 1. plan

    def plan(self, req: Request) -> Optional[Plan]:
        cfg = self.config
        for ex in cfg.exempt:
            if ex(req) if callable(ex) else _path_matches(ex, req.path):
                return None
        limits = next((r.limits for r in cfg.routes if r.matches(req)), cfg.limits)
        tag = cfg.hash_tag(req) if cfg.hash_tag else None
        base = cfg.key_prefix + (f"{{{tag}}}:" if tag else "")
        calls = []
        for lim in limits:
            ident = lim.key(req)
            if ident is not None:
                calls.append(Call(lim, f"{base}{lim.name}:{ident}"))
        return Plan(req, tuple(calls), cfg.shadow) if calls else None

    def batches(self, plan: Plan, cluster: bool) -> List[Batch]:
        """Enforced limits in one command, shadow limits in another. In a cluster, keys
        that do not share a slot cannot go in one RL.ALL: each limit is then its own
        command (not all or nothing; give the config a ``hash_tag`` to avoid that)."""
        out: List[Batch] = []
        for shadow in (False, True):
            group = tuple(c for c in plan.calls if (c.shadow or plan.shadow_all) == shadow)
            if not group:
                continue
            if len(group) > 1 and cluster and not _one_slot([c.key for c in group]):
                out += [_batch((c,)) for c in group]
            else:
                out.append(_batch(group))
        return out

    # ---- 3. finish

    def finish(self, plan: Plan, results: Sequence[Tuple[Call, Result]]) -> Outcome:
        cfg = self.config
        items: List[Item] = []
        refused: List[str] = []
        closed: List[str] = []
        for call, res in results:
            lim = call.limit
            shadow = lim.shadow or plan.shadow_all
            err: Optional[BaseException] = None
            if isinstance(res, BaseException):
                err = res
                if lim.fallback is not None:
                    res, source = cfg.memory.decide(call.key, lim.fallback), "fallback"
                else:
                    source = "fail-open" if lim.fail_open else "fail-closed"
                    log.warning("rate limit %s not checked, Redis unavailable (%s): %s",
                                lim.name, source, err)
                    self._report(Event(plan.request, lim.name, call.key, source,
                                       not lim.fail_open, shadow, None, err))
                    if not lim.fail_open and not shadow:
                        closed.append(lim.name)
                    continue
            else:
                source = "redis"
            d = res
            rule = lim.fallback if source == "fallback" and lim.fallback else lim.rule
            self._report(Event(plan.request, lim.name, call.key, source, not d.allowed,
                               shadow, d, err))
            if shadow:
                continue
            items.append(Item(lim.name, rule, d))
            if not d.allowed:
                refused.append(lim.name)
        headers = render(items, legacy=cfg.legacy_headers, legacy_reset=cfg.legacy_reset)
        if refused:
            body = {"type": QUOTA_EXCEEDED,
                    "title": "Request cannot be satisfied as assigned quota has been exceeded",
                    "violated-policies": refused}
            return Outcome(429, {**headers, "Content-Type": "application/problem+json"},
                           json.dumps(body).encode())
        if closed:
            body = {"type": REDUCED_CAPACITY, "title": "Rate limiter unavailable",
                    "violated-policies": closed}
            return Outcome(503, {"Content-Type": "application/problem+json",
                                 "Retry-After": "1"}, json.dumps(body).encode())
        delay = max((i.decision.delay_ms or 0 for i in items), default=0)
        return Outcome(None, headers, b"", delay)

    def _report(self, ev: Event) -> None:
        hook = self.config.on_decision
        if hook is None:
            return
        try:
            hook(ev)
        except Exception:  # a metrics hook must never break a request
            log.exception("on_decision hook failed")


def _one_slot(keys: Sequence[str]) -> bool:
    from redis.crc import key_slot

    return len({key_slot(k.encode()) for k in keys}) == 1


def _batch(calls: Tuple[Call, ...]) -> Batch:
    if len(calls) == 1:
        (c,) = calls
        return calls, c.limit.rule.command_args(c.key), lambda r: [c.limit.rule.parse(r)]
    rules = [(c.key, c.limit.rule) for c in calls]

    def parse(reply: Any) -> List[Decision]:
        res = parse_all(rules, reply)
        if res.allowed:
            return list(res.decisions)
        # Refused: nothing was spent anywhere; report each rule's real state.
        return [rule.unspent(d) for d, (_, rule) in zip(res.decisions, rules)]

    return calls, all_args(rules, False), parse


#: What counts as "Redis cannot answer": connection errors, timeouts, and errors of the
#: server's state (OOM, LOADING, READONLY, ...). A wrong argument is a bug: it propagates.
def is_unavailable(e: BaseException) -> bool:
    if isinstance(e, (redis.ConnectionError, redis.TimeoutError, OSError)):
        return True
    if isinstance(e, redis.ResponseError):
        msg = str(e)
        return msg.startswith(("OOM", "LOADING", "READONLY", "MASTERDOWN", "BUSY",
                               "CLUSTERDOWN", "TRYAGAIN", "NOREPLICAS"))
    return isinstance(e, redis.RedisError)


def _is_cluster(client: Any) -> bool:
    return hasattr(client, "get_default_node") and hasattr(client, "get_nodes")


def run_sync(engine: Engine, client: Any, plan: Plan) -> Outcome:
    results: List[Tuple[Call, Result]] = []
    for calls, args, parse in engine.batches(plan, _is_cluster(client)):
        if engine.circuit_open():
            results += [(c, CircuitOpen("Redis failed recently")) for c in calls]
            continue
        try:
            results += zip(calls, parse(client.execute_command(*args)))
        except Exception as e:
            if not is_unavailable(e):
                raise
            engine.trip()
            results += [(c, e) for c in calls]
    return engine.finish(plan, results)


async def run_async(engine: Engine, client: Any, plan: Plan) -> Outcome:
    results: List[Tuple[Call, Result]] = []
    for calls, args, parse in engine.batches(plan, _is_cluster(client)):
        if engine.circuit_open():
            results += [(c, CircuitOpen("Redis failed recently")) for c in calls]
            continue
        try:
            results += zip(calls, parse(await client.execute_command(*args)))
        except Exception as e:
            if not is_unavailable(e):
                raise
            engine.trip()
            results += [(c, e) for c in calls]
    return engine.finish(plan, results)
