"""The framework-independent part of the HTTP middleware.

A request goes through three steps; only the middle one does I/O, and it exists twice (sync
for WSGI/Django, asyncio for ASGI), everything else once:

1. :meth:`Engine.plan` — which limits apply (the defaults plus the matching route's, or the
   route's alone with ``replace=True``; none on an exempt path), under which keys (each
   limit's key function; None = not applicable) and at which cost.
2. running the plan's commands (:func:`run_sync` / :func:`run_async`): one rate command for
   one limit, one atomic ``RL.ALL`` for several (all or nothing: a request refused by its
   organisation's limit spends nothing of its user's). Shadow limits run in a command of
   their own, so that their refusals never keep the enforced limits from spending. A limit
   with a ``block_ms`` penalty, or a ``wait_ms`` (held in the server until admitted), runs in
   its own command (``RL.ALL`` takes no ``BLOCK`` nor ``WAIT``), after the other enforced
   limits admitted the request.
3. :meth:`Engine.finish` — the outcome: pass (with the draft-10 headers to add) or refuse
   (429 with ``Retry-After``, or 503 when a fail-closed limit could not be checked).

A request whose cost for some enforced limit is above that limit's ``limit`` (burst,
capacity or window limit) can never be admitted: it is refused with 429 before Redis is
asked (nothing is spent on any limit; no ``Retry-After``, no RateLimit headers).

A limit may name a policy stored in the server (``Limit("api", Policy("api"), key)``): it
is sent as ``POLICY api [COST n]`` in the request's ``RL.ALL`` (``RL.ALLOW`` alone). Its
headers need the version's rule (q and w): read with ``RL.POLICY GET`` and cached per
middleware (:class:`_PolicyCache`); a version in shadow mode gets no header item. An unknown
policy (``ERR no such policy``) takes the failure path, like a Redis failure (but does not
open the breaker: Redis answered).

When Redis fails (unreachable, timeout, ``OOM``, ...: :func:`is_unavailable`), each limit
decides alone: with a ``fallback`` rule it is checked in process memory instead; else
``fail_open`` admits (no headers for it) or refuses with 503. Every decision is reported to
``on_decision``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, List, Literal, Optional, Pattern, Sequence, Tuple,
                    Union)

import redis

from ._protocol import Decision, Rule, all_args, parse_all
from ._wait import execute_waiting, execute_waiting_async
from .headers import Item, _ceil_div, render
from .keys import KeyFunc, Request
from .memory import MemoryLimiter
from .policies import Policy, Unspent, is_unknown_policy, parse_get, parse_rule

log = logging.getLogger("redis_ratelimit")

QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded"
QUOTA_TITLE = "Request cannot be satisfied as assigned quota has been exceeded"
REDUCED_CAPACITY = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"


@dataclass(frozen=True)
class Limit:
    """One limit: a policy ``name`` (headers, keys, metrics), a :class:`Rule` (or a
    :class:`~redis_ratelimit.Policy`: a rule stored in the server, by name), a key function.

    ``fail_open``: when Redis cannot answer, admit (True) or answer 503 (False).
    ``fallback``: a rule checked in process memory when Redis cannot answer (takes
    precedence over ``fail_open``; size it per process). ``shadow``: spend and report, never
    refuse, send no headers for it (None, the default: ``Config.shadow``; False enforces
    this limit even under ``Config(shadow=True)``, as the Node package's ``shadow: false``).
    ``cost``: units a request spends, an int or a function of the request (e.g. an AI
    token estimate from a header); 0 peeks. ``block_ms``: a penalty (``BLOCK ms``): when this
    limit refuses, its key refuses everything for ``block_ms`` (the login brute-force
    pattern); checked in a command of its own after the other limits admitted (also when
    the rule itself carries ``block_ms``). ``wait_ms``: hold the HTTP request up to
    ``wait_ms`` for room instead of answering 429 at once (``WAIT ms``: the server admits
    waiters in arrival order); checked the same way, in a command of its own after the
    other limits admitted; the headers come from the final reply. Not with ``block_ms``;
    a shadow limit is sent without ``WAIT`` (it never refuses, nor holds a request).
    """

    name: str
    rule: Union[Rule, Policy]
    key: KeyFunc
    fail_open: bool = True
    fallback: Optional[Rule] = None
    shadow: Optional[bool] = None  # None: Config.shadow; True / False: this limit's own
    cost: Union[int, Callable[[Request], int]] = 1
    block_ms: Optional[int] = None
    wait_ms: Optional[int] = None

    def __post_init__(self) -> None:
        if self.block_ms is not None and (isinstance(self.block_ms, bool)
                                          or not isinstance(self.block_ms, int)
                                          or self.block_ms < 1):
            raise ValueError("block_ms must be a positive int (milliseconds)")
        if self.wait_ms is not None and (isinstance(self.wait_ms, bool)
                                         or not isinstance(self.wait_ms, int)
                                         or not 0 <= self.wait_ms <= 86_400_000):
            raise ValueError("wait_ms must be an int from 0 to 86400000 (milliseconds)")
        if self.waits and self.blocks:
            raise ValueError(f"limit {self.name!r}: wait_ms and block_ms do not go together "
                             "(the module answers WAIT with BLOCK with ERR syntax error)")
        if not callable(self.cost) and (isinstance(self.cost, bool)
                                        or not isinstance(self.cost, int) or self.cost < 0):
            raise ValueError("cost must be an int >= 0 or a function of the request")
        if isinstance(self.rule, Policy) and self.block_ms is not None:
            raise ValueError("a policy's BLOCK is part of the policy (RL.POLICY SET ... "
                             "BLOCK ms): no block_ms on a Limit that names a policy")

    @property
    def blocks(self) -> bool:
        """True when a refusal blocks the key (``BLOCK ms``): run in a command of its own."""
        if isinstance(self.rule, Policy):
            return False  # the module applies a policy's BLOCK, inside RL.ALL too
        return self.block_ms is not None or self.rule.options.block_ms is not None

    @property
    def waits(self) -> bool:
        """True when the limit holds a request for room (``WAIT ms``)."""
        return self.wait_ms is not None or self.rule.wait_ms is not None

    def cost_of(self, req: Request) -> int:
        c = self.cost(req) if callable(self.cost) else self.cost
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            raise ValueError(f"cost of limit {self.name!r} must be an int >= 0, not {c!r}")
        return c

    def rule_for(self, cost: int, shadow: bool = False) -> Union[Rule, Policy]:
        """The rule as sent for one request: with its cost, block penalty and wait (none in
        shadow mode)."""
        opts: Dict[str, Any] = {}
        if cost != self.rule.cost:
            opts["cost"] = cost
        wait = None if shadow else (self.wait_ms if self.wait_ms is not None
                                    else self.rule.wait_ms)
        if wait != self.rule.wait_ms:
            opts["wait_ms"] = wait
        if isinstance(self.rule, Policy):
            return self.rule.with_options(**opts) if opts else self.rule
        if self.block_ms is not None and self.rule.options.block_ms != self.block_ms:
            opts["block_ms"] = self.block_ms
        return self.rule.with_options(**opts) if opts else self.rule


PathMatch = Union[str, Pattern[str]]


def _path_matches(m: PathMatch, path: str) -> bool:
    if isinstance(m, str):
        if m.endswith("/*") and path == m[:-2]:
            return True  # "/admin/*" covers "/admin" itself
        return path.startswith(m[:-1]) if m.endswith("*") else path == m
    return m.fullmatch(path) is not None


@dataclass(frozen=True)
class Route:
    """Limits for some paths: ``path`` is exact (``"/login"``), a prefix ending in ``*``
    (``"/api/*"``: also ``/api`` itself) or a compiled regex (full match). ``methods`` None =
    every method. Paths are those the app sees where the middleware is mounted (WSGI
    ``PATH_INFO``, ASGI ``path`` without ``root_path``, Django ``request.path_info``).

    The route's ``limits`` apply **in addition to** the default limits (a default limit
    never silently stops applying); one named like a default limit replaces that one.
    ``replace=True``: the route's limits replace the defaults. ``limits=False``: the route
    is exempt.
    """

    path: PathMatch
    limits: Union[Sequence[Limit], Literal[False]]
    methods: Optional[Sequence[str]] = None
    replace: bool = False

    def matches(self, req: Request) -> bool:
        if self.methods is not None and req.method.upper() not in {m.upper() for m in
                                                                    self.methods}:
            return False
        return _path_matches(self.path, req.path)


@dataclass(frozen=True)
class Event:
    """What ``on_decision`` gets, once per applicable limit and request.

    ``source``: ``redis``, ``fallback`` (in-memory), ``fail-open``, ``fail-closed`` (Redis
    failed), or ``cost`` (the request's cost is above the limit's limit: refused without
    asking Redis, ``decision`` None). ``refused``: the limit refused (in shadow mode: would
    have refused).
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

    ``limits`` apply to every request; the first ``routes`` entry that matches adds its own
    (see :class:`Route`: ``replace=True`` replaces them, ``limits=False`` exempts).
    ``exempt``: paths (as in :class:`Route`) or predicates that are never limited (health
    checks, webhooks), whatever the routes say. Keys are ``key_prefix + name + ":" + identity``;
    with ``hash_tag`` (a key function, e.g. the organisation) ``key_prefix + "{" + tag + "}:"
    + name + ":" + identity``, so that one request's keys share a Redis Cluster slot and
    ``RL.ALL`` can check them together there.
    """

    limits: Sequence[Limit] = ()
    routes: Sequence[Route] = ()
    exempt: Sequence[Union[PathMatch, Callable[[Request], bool]]] = ()
    key_prefix: str = "rl:"
    hash_tag: Optional[KeyFunc] = None
    shadow: bool = False  # every limit in shadow mode, but one with its own shadow=False
    on_decision: Optional[Callable[[Event], None]] = None
    legacy_headers: bool = False  # also X-RateLimit-Limit / -Remaining / -Reset
    # X-RateLimit-Reset: "epoch" (default) the Unix time in s, rounded up, of the tightest
    # limit's full reset (as express-rate-limit and Flask-Limiter); "delta": seconds to it
    legacy_reset: str = "epoch"
    memory: MemoryLimiter = field(default_factory=MemoryLimiter)
    # After Redis failed, requests go straight to their failure path (fallback, fail open or
    # closed) for this long instead of each waiting for a timeout; then one request tries
    # Redis again. 0: try Redis on every request.
    breaker_ms: int = 1000
    clock: Callable[[], float] = time.monotonic  # seconds, for the breaker and the cache
    # A policy's rule (for the headers) is read with RL.POLICY GET and cached this long; it
    # is read again sooner when a reply's limit matches none of the cached versions.
    policy_refresh_ms: int = 5000

    def __post_init__(self) -> None:
        if self.legacy_reset not in ("epoch", "delta"):
            raise ValueError('legacy_reset must be "epoch" (the default) or "delta"')


@dataclass(frozen=True)
class Call:
    limit: Limit
    key: str
    rule: Union[Rule, Policy]  # the limit's rule with this request's cost (and BLOCK)
    shadow: bool = False  # the limit's own shadow, else Config.shadow (as Node's)


@dataclass(frozen=True)
class Plan:
    request: Request
    calls: Tuple[Call, ...]  # the limits Redis decides
    shadow_all: bool
    tagged: bool = False  # the keys carry a hash tag (one cluster slot)
    # limits whose cost for this request is above their limit: never admissible, not sent
    oversized: Tuple[Call, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """``status`` None: let the request through and add ``headers`` to its response."""

    status: Optional[int]
    headers: Dict[str, str]
    body: bytes = b""
    delay_ms: int = 0  # an admitted QUEUE rule's delay: wait this long, then proceed


@dataclass(frozen=True)
class Batch:
    """One command: the calls it decides, its arguments, the reply's parser; ``gated``:
    run only when every enforced decision so far admitted (a BLOCK limit)."""

    calls: Tuple[Call, ...]
    args: List[Any]
    parse: Callable[[Any], List[Decision]]
    gated: bool = False
    wait_ms: Optional[int] = None  # WAIT ms: sent with a read timeout that outlasts it

    def should_run(self, results: Sequence[Tuple[Call, "Result"]]) -> bool:
        return not self.gated or all(
            c.shadow or isinstance(r, BaseException) or r.allowed for c, r in results)


Result = Union[Decision, BaseException]


class CircuitOpen(redis.ConnectionError):
    """Redis failed less than ``Config.breaker_ms`` ago: not tried for this request."""


@dataclass(frozen=True)
class _Version:
    rule: Optional[Rule]  # None: no rate rule (CONCURRENCY)
    mode: str  # "enforce" or "shadow"


class _PolicyCache:
    """The rules of the policies the middleware sends (for the headers' q and w): one
    ``RL.POLICY GET`` per policy, then cached; read again when older than
    ``policy_refresh_ms`` or when a reply's ``limit`` matches neither the cached current
    version's nor the candidate's (an operator changed it)."""

    def __init__(self, config: Config):
        self.config = config
        self.entries: Dict[str, Tuple[float, Tuple[_Version, ...]]] = {}

    def stale(self, name: str, limit: int) -> bool:
        e = self.entries.get(name)
        if e is None or self.config.clock() - e[0] >= self.config.policy_refresh_ms / 1000:
            return True
        return self.version(name, limit) is None

    def store(self, name: str, reply: Any) -> None:
        info = parse_get(reply)
        versions: Tuple[_Version, ...] = ()
        if info is not None:
            versions = (_Version(parse_rule(info.rule), info.mode),)
            if info.candidate_version:
                versions += (_Version(parse_rule(info.candidate_rule), info.candidate_mode),)
        self.entries[name] = (self.config.clock(), versions)

    def version(self, name: str, limit: int) -> Optional[_Version]:
        """The cached version whose rule's limit is the reply's (the current one first)."""
        e = self.entries.get(name)
        for v in e[1] if e else ():
            if v.rule is not None and v.rule.limit == limit:
                return v
        return None

    def reads(self, results: Sequence[Tuple[Call, "Result"]]) -> List[Tuple[str, str]]:
        """``(policy, key)`` to read before the headers: one per stale policy."""
        out: Dict[str, str] = {}
        for c, res in results:
            if (isinstance(c.rule, Policy) and isinstance(res, Decision)
                    and c.rule.name not in out and self.stale(c.rule.name, res.limit)):
                out[c.rule.name] = c.key
        return list(out.items())


def _get_policy(client: Any, name: str, key: str) -> Tuple[List[Any], Dict[str, Any]]:
    """RL.POLICY GET, on a cluster on the node that holds ``key`` (policies are per node)."""
    kw = {"target_nodes": client.get_node_from_key(key)} if _is_cluster(client) else {}
    return ["RL.POLICY", "GET", name], kw


class Engine:
    def __init__(self, config: Config):
        self.config = config
        self._open_until = 0.0
        self.policies = _PolicyCache(config)

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
        limits = self.limits_for(req)
        if not limits:
            return None
        tag = cfg.hash_tag(req) if cfg.hash_tag else None
        base = cfg.key_prefix + (f"{{{tag}}}:" if tag else "")
        calls, oversized = [], []
        for lim in limits:
            ident = lim.key(req)
            if ident is not None:
                shadow = cfg.shadow if lim.shadow is None else lim.shadow
                call = Call(lim, f"{base}{lim.name}:{ident}",
                            lim.rule_for(lim.cost_of(req), shadow), shadow)
                # the module answers ERR COST must not exceed ...: decided here, for every
                # algorithm, from the rule's limit (burst, capacity or window limit)
                # (a policy's limit is the server's: not known here, the module decides)
                big = isinstance(call.rule, Rule) and call.rule.cost > call.rule.limit
                (oversized if big else calls).append(call)
        if not calls and not oversized:
            return None
        return Plan(req, tuple(calls), cfg.shadow, bool(tag), tuple(oversized))

    def refuse_oversized(self, plan: Plan) -> Optional[Outcome]:
        """A request whose cost is above an enforced limit's limit can never be admitted:
        429 by that limit, before Redis is asked (nothing spent anywhere), without
        ``Retry-After`` (waiting does not help) nor RateLimit headers. A shadow limit in
        that case only reports a would-be refusal (and is not sent)."""
        refused = []
        for call in plan.oversized:
            shadow = call.shadow
            self._report(Event(plan.request, call.limit.name, call.key, "cost", True, shadow))
            if not shadow:
                refused.append(call)
        if not refused:
            return None
        detail = "; ".join(f"request cost {c.rule.cost} exceeds limit {c.limit.name!r} "
                           f"({c.rule.limit}): it can never be admitted" for c in refused)
        return _problem(429, QUOTA_EXCEEDED, QUOTA_TITLE, [c.limit.name for c in refused],
                        {}, detail)

    def limits_for(self, req: Request) -> Sequence[Limit]:
        """The defaults, then the first matching route's limits (a route limit named like a
        default replaces it); only the route's with ``replace=True``; none with
        ``limits=False``."""
        cfg = self.config
        route = next((r for r in cfg.routes if r.matches(req)), None)
        if route is None:
            return cfg.limits
        if route.limits is False:
            return ()
        if route.replace:
            return route.limits
        names = {lim.name for lim in route.limits}
        return [*(lim for lim in cfg.limits if lim.name not in names), *route.limits]

    def batches(self, plan: Plan, cluster: bool) -> List[Batch]:
        """Enforced limits in one command, shadow limits in another. In a cluster, keys
        without a hash tag are checked one command per limit, whatever slots they happen
        to hash to (not all or nothing; give the config a ``hash_tag`` for one RL.ALL), so
        that the behaviour never depends on the key names.

        Limits with a BLOCK penalty or a WAIT each get a command of their own (RL.ALL takes
        neither); an enforced one is *gated*: it runs only when every enforced decision
        before it admitted (a request the others refuse does not hit the penalty, nor wait
        for room it would not use)."""
        out: List[Batch] = []
        for shadow in (False, True):
            group = tuple(c for c in plan.calls if c.shadow == shadow)
            plain = tuple(c for c in group if not _alone(c))
            if len(plain) > 1 and cluster and not plan.tagged:
                out += [_batch((c,)) for c in plain]
            elif plain:
                out.append(_batch(plain))
            out += [_batch((c,), gated=not shadow) for c in group if _alone(c)]
        return out

    # ---- 3. finish

    def finish(self, plan: Plan, results: Sequence[Tuple[Call, Result]]) -> Outcome:
        cfg = self.config
        order = {id(c): i for i, c in enumerate(plan.calls)}  # headers in the limits' order
        results = sorted(results, key=lambda cr: order[id(cr[0])])
        items: List[Item] = []
        refused: List[str] = []
        closed: List[str] = []
        unlisted: List[Decision] = []
        for call, res in results:
            lim = call.limit
            shadow = call.shadow
            err: Optional[BaseException] = None
            if isinstance(res, BaseException):
                err = res
                if lim.fallback is not None:
                    fb = lim.fallback
                    # the in-memory limiter takes 1 <= cost <= limit: a peek spends 1 there
                    cost = min(max(call.rule.cost, 1), fb.limit)
                    if cost != fb.cost:
                        fb = fb.with_options(cost=cost)
                    res, source = cfg.memory.decide(call.key, fb), "fallback"
                else:
                    source = "fail-open" if lim.fail_open else "fail-closed"
                    log.warning("rate limit %s not checked, %s (%s): %s", lim.name,
                                "unknown policy" if is_unknown_policy(err)
                                else "Redis unavailable", source, err)
                    self._report(Event(plan.request, lim.name, call.key, source,
                                       not lim.fail_open, shadow, None, err))
                    if not lim.fail_open and not shadow:
                        closed.append(lim.name)
                    continue
            else:
                source = "redis"
            d = res
            rule: Optional[Rule]
            if source == "fallback" and lim.fallback:
                rule = lim.fallback
            elif isinstance(call.rule, Policy):
                # the applying version: the one whose limit is the reply's (current first)
                ver = self.policies.version(call.rule.name, d.limit)
                rule = ver.rule if ver else None
                if isinstance(d, Unspent):  # from a refused RL.ALL: nothing was spent
                    d = Decision(d.allowed, d.limit, d.remaining, d.retry_after_ms,
                                 d.reset_after_ms, d.delay_ms, d.token, d.granted, d.probe,
                                 d.waited_ms)
                    if rule is not None:
                        d = rule.with_options(cost=call.rule.cost).unspent(d)
                if ver is not None and ver.mode == "shadow":
                    shadow = True  # a shadow version: never refuses, no header item
            else:
                rule = call.rule
            self._report(Event(plan.request, lim.name, call.key, source, not d.allowed,
                               shadow, d, err))
            if shadow:
                continue
            if rule is not None:
                items.append(Item(lim.name, rule, d))
            else:  # a policy whose rule could not be read: no header item
                unlisted.append(d)
            if not d.allowed:
                refused.append(lim.name)
        headers = render(items, legacy=cfg.legacy_headers, legacy_reset=cfg.legacy_reset)
        waits = [d.retry_after_ms for d in unlisted if not d.allowed]
        if waits and "Retry-After" not in headers:
            headers["Retry-After"] = str(_ceil_div(max(waits), 1000))
        if refused:
            return _problem(429, QUOTA_EXCEEDED, QUOTA_TITLE, refused, headers)
        if closed:
            return _problem(503, REDUCED_CAPACITY, "Rate limiter unavailable", closed,
                            {"Retry-After": "1"})
        delay = max((d.delay_ms or 0 for d in [*(i.decision for i in items), *unlisted]),
                    default=0)
        return Outcome(None, headers, b"", delay)

    def _report(self, ev: Event) -> None:
        hook = self.config.on_decision
        if hook is None:
            return
        try:
            hook(ev)
        except Exception:  # a metrics hook must never break a request
            log.exception("on_decision hook failed")


def _problem(status: int, type_: str, title: str, policies: List[str],
             headers: Dict[str, str], detail: Optional[str] = None) -> Outcome:
    """An RFC 9457 problem: ``type``, ``title``, ``status``, ``violated-policies`` (and
    ``detail`` for a cost above a limit), the same members as the Node package's."""
    body: Dict[str, Any] = {"type": type_, "title": title, "status": status,
                            "violated-policies": policies}
    if detail is not None:
        body["detail"] = detail
    return Outcome(status, {**headers, "Content-Type": "application/problem+json"},
                   json.dumps(body).encode())


def _alone(c: Call) -> bool:
    """A call that needs a command of its own: a BLOCK penalty or a WAIT."""
    return c.limit.blocks or c.rule.wait_ms is not None


def _batch(calls: Tuple[Call, ...], gated: bool = False) -> Batch:
    if len(calls) == 1:
        (c,) = calls
        return Batch(calls, c.rule.command_args(c.key), lambda r: [c.rule.parse(r)], gated,
                     c.rule.wait_ms)
    rules = [(c.key, c.rule) for c in calls]

    def parse(reply: Any) -> List[Decision]:
        res = parse_all(rules, reply)
        if res.allowed:
            return list(res.decisions)
        # Refused: nothing was spent anywhere; report each rule's real state.
        return [rule.unspent(d) for d, (_, rule) in zip(res.decisions, rules)]

    return Batch(calls, all_args(rules, False), parse)


#: Error replies that mean the server cannot serve now (the same list as the Node package).
UNAVAILABLE_REPLIES = ("OOM", "LOADING", "MISCONF", "READONLY", "CLUSTERDOWN", "MASTERDOWN",
                       "BUSY", "NOREPLICAS", "TRYAGAIN")
# redis-py raises these replies as their own classes, without the code in the message
_UNAVAILABLE_CLASSES = (redis.exceptions.OutOfMemoryError, redis.exceptions.BusyLoadingError,
                        redis.exceptions.ReadOnlyError, redis.exceptions.TryAgainError,
                        redis.exceptions.ClusterDownError)  # also MasterDownError


def is_unavailable(e: BaseException) -> bool:
    """Whether an error takes the failure path (fallback, fail open, fail closed): a
    connection error or a timeout (no reply; also a server that refuses the connection with
    ``ERR max number of clients reached``), or an error reply whose code is one of
    :data:`UNAVAILABLE_REPLIES`. Every other error reply (``ERR ...``, ``WRONGTYPE``,
    ``NOAUTH``, ``WRONGPASS``, ``NOPERM``, ...) is a bug, not an outage: it propagates (500).
    """
    if isinstance(e, _UNAVAILABLE_CLASSES):
        return True
    if isinstance(e, redis.AuthenticationError):  # the NOAUTH / WRONGPASS replies
        return False
    if isinstance(e, redis.ResponseError):  # MISCONF, BUSY, NOREPLICAS keep their code
        return str(e).split(" ", 1)[0] in UNAVAILABLE_REPLIES
    if isinstance(e, (redis.ConnectionError, redis.TimeoutError, OSError)):
        return True
    if isinstance(e, redis.exceptions.SlotNotCoveredError):
        return True  # a cluster being reconfigured: no node to ask
    # redis-py's other failures to get a reply (a cluster without a reachable node, a
    # broken reply); a DataError is a wrong argument (a bug)
    return isinstance(e, redis.RedisError) and not isinstance(e, redis.DataError)


def _failure(engine: Engine, e: BaseException) -> bool:
    """Whether ``e`` takes the failure path; a Redis failure also opens the breaker. An
    unknown policy (``ERR no such policy``) takes the failure path (as configured per
    limit) but leaves the breaker closed: Redis answered."""
    if is_unavailable(e):
        engine.trip()
        return True
    return is_unknown_policy(e)


def _is_cluster(client: Any) -> bool:
    return hasattr(client, "get_default_node") and hasattr(client, "get_nodes")


def run_sync(engine: Engine, client: Any, plan: Plan) -> Outcome:
    refused = engine.refuse_oversized(plan)
    if refused is not None:
        return refused
    results: List[Tuple[Call, Result]] = []
    for b in engine.batches(plan, _is_cluster(client)):
        if not b.should_run(results):
            continue
        if engine.circuit_open():
            results += [(c, CircuitOpen("Redis failed recently")) for c in b.calls]
            continue
        try:
            reply = (execute_waiting(client, b.args, b.wait_ms) if b.wait_ms
                     else client.execute_command(*b.args))
            results += zip(b.calls, b.parse(reply))
        except Exception as e:
            if not _failure(engine, e):
                raise
            results += [(c, e) for c in b.calls]
    for name, key in engine.policies.reads(results):
        try:
            args, kw = _get_policy(client, name, key)
            engine.policies.store(name, client.execute_command(*args, **kw))
        except Exception as e:  # no header item for it; the decision stands
            log.warning("RL.POLICY GET %s failed: %s", name, e)
    return engine.finish(plan, results)


async def run_async(engine: Engine, client: Any, plan: Plan) -> Outcome:
    refused = engine.refuse_oversized(plan)
    if refused is not None:
        return refused
    results: List[Tuple[Call, Result]] = []
    for b in engine.batches(plan, _is_cluster(client)):
        if not b.should_run(results):
            continue
        if engine.circuit_open():
            results += [(c, CircuitOpen("Redis failed recently")) for c in b.calls]
            continue
        try:
            reply = (await execute_waiting_async(client, b.args, b.wait_ms) if b.wait_ms
                     else await client.execute_command(*b.args))
            results += zip(b.calls, b.parse(reply))
        except Exception as e:
            if not _failure(engine, e):
                raise
            results += [(c, e) for c in b.calls]
    for name, key in engine.policies.reads(results):
        try:
            args, kw = _get_policy(client, name, key)
            engine.policies.store(name, await client.execute_command(*args, **kw))
        except Exception as e:  # no header item for it; the decision stands
            log.warning("RL.POLICY GET %s failed: %s", name, e)
    return engine.finish(plan, results)
