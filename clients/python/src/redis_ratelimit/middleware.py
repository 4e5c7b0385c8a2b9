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

import dataclasses
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, List, Literal, Optional, Pattern, Sequence, Tuple,
                    Union)

import redis

from ._protocol import Decision, Rule, all_args, parse_all
from ._wait import execute_waiting, execute_waiting_async
from .headers import Item, _ceil_div, render
from .keys import KeyFunc, Request
from .lease import Lease, Leases, LocalRefusals, check_leasable, wall_ms
from .limitstr import parse_limits
from .memory import MemoryLimiter
from .policies import Policy, Unspent, is_unknown_policy, parse_get, parse_rule

log = logging.getLogger("redis_ratelimit")

QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded"
QUOTA_TITLE = "Request cannot be satisfied as assigned quota has been exceeded"
REDUCED_CAPACITY = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"

#: What a Limit's rule may be: a Rule, a Policy, a limit string ("10/second; 1000/day"), or
#: a function of the request returning one of those (a limit computed per request).
RuleSpec = Union[Rule, Policy, str, Callable[[Request], Union[Rule, Policy, str]]]


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

    ``rule`` may also be a limit string (``"10/second; 1000/day"``: several items become the
    limits ``name-1``, ``name-2``, ... checked in one ``RL.ALL``; ``algorithm`` says which
    rule each item makes: ``"sliding"`` by default, ``"fixed"`` or ``"gcra"``), or a function
    of the request returning a Rule, a Policy or a string (a limit computed per request).
    ``lease``: a :class:`~redis_ratelimit.Lease` (leased allowance: GCRA, TOKENBUCKET and
    FIXED rules only). ``allow``: identities that skip this limit; ``deny``: identities
    refused at once with 403 (no Redis call).
    """

    name: str
    rule: RuleSpec
    key: KeyFunc
    fail_open: bool = True
    fallback: Optional[Rule] = None
    shadow: Optional[bool] = None  # None: Config.shadow; True / False: this limit's own
    cost: Union[int, Callable[[Request], int]] = 1
    block_ms: Optional[int] = None
    wait_ms: Optional[int] = None
    lease: Optional[Lease] = None
    allow: Sequence[str] = ()
    deny: Sequence[str] = ()
    algorithm: str = "sliding"  # the rules a limit string makes

    def __post_init__(self) -> None:
        if isinstance(self.allow, str) or isinstance(self.deny, str):
            raise ValueError("allow and deny are lists of identities, not a string")
        object.__setattr__(self, "allow", frozenset(self.allow))
        object.__setattr__(self, "deny", frozenset(self.deny))
        if isinstance(self.rule, str):
            parse_limits(self.rule, self.algorithm)  # a bad string fails here
            return
        if not isinstance(self.rule, (Rule, Policy)):
            if not callable(self.rule):
                raise TypeError(f"limit {self.name!r}: rule must be a Rule, a Policy, a "
                                "limit string or a function of the request")
            return  # resolved (and checked) per request
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
        if self.lease is not None:
            check_leasable(self.name, self.rule, self.lease, waits=self.waits,
                           blocks=self.blocks, shadow=self.shadow)

    def expand(self, req: Optional[Request] = None) -> List["Limit"]:
        """The limits this one stands for: itself with a Rule or a Policy; the rules of a
        limit string (``name-1``, ``name-2``, ... for several); a function's result for
        ``req``."""
        rule = self.rule
        if not isinstance(rule, (Rule, Policy, str)):
            if req is None:
                raise ValueError(f"limit {self.name!r}: its rule is computed per request")
            rule = rule(req)  # type: ignore[operator]
            if not isinstance(rule, (Rule, Policy, str)):
                raise TypeError(f"limit {self.name!r}: the rule function returned {rule!r}")
        if isinstance(rule, str):
            rules = parse_limits(rule, self.algorithm)
            if len(rules) == 1:
                return [dataclasses.replace(self, rule=rules[0])]
            return [dataclasses.replace(self, name=f"{self.name}-{i}", rule=r)
                    for i, r in enumerate(rules, 1)]
        return [self if rule is self.rule else dataclasses.replace(self, rule=rule)]

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
    # The package clock, integer ms (leases and local refusals); tests pass one that follows
    # the module's test clock.
    clock_ms: Callable[[], int] = wall_ms
    # After the server refused a (limit, identity) with retry_after_ms R > 0, refuse it in
    # the process for R ms without asking Redis: True (10000 keys at most) or the most keys.
    local_refusals: Union[bool, int] = False
    # Leases that lapsed are given back by a background sweep (a thread for WSGI and
    # Django, a task for ASGI) every this many ms of real time, as well as on the next
    # request for the key and on close(); 0: no sweep.
    lease_sweep_ms: int = 1000

    def __post_init__(self) -> None:
        if self.legacy_reset not in ("epoch", "delta"):
            raise ValueError('legacy_reset must be "epoch" (the default) or "delta"')
        lr = self.local_refusals
        if not isinstance(lr, (bool, int)) or (not isinstance(lr, bool) and lr < 1):
            raise ValueError("local_refusals: True, False, or the most keys (an int >= 1)")


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
    denied: Tuple[Call, ...] = ()  # the identity is on a limit's deny list: 403


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
    lease: bool = False  # a leased limit: admitted from the lease, or a claim

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
        self.leases = Leases()
        lr = config.local_refusals
        self.local: Optional[LocalRefusals] = (
            None if lr is False else LocalRefusals(10_000 if lr is True else int(lr)))
        # limit strings expanded once (a function of the request: per request)
        self._defaults = self._expand(config.limits)
        self._routes = {id(r): self._expand(r.limits) for r in config.routes
                        if r.limits is not False}
        for lim in [*self._defaults, *(x for v in self._routes.values() for x in v)]:
            self.check_limit(lim)
        self._sweeper: Any = None
        self.closed = False

    @staticmethod
    def _expand(limits: Sequence[Limit]) -> List[Limit]:
        out: List[Limit] = []
        for lim in limits:
            out += lim.expand() if isinstance(lim.rule, (Rule, Policy, str)) else [lim]
        return out

    def check_limit(self, lim: Limit) -> None:
        """A leased limit is never in shadow mode (``Config(shadow=True)`` included)."""
        if lim.lease is not None and isinstance(lim.rule, (Rule, Policy)):
            shadow = self.config.shadow if lim.shadow is None else lim.shadow
            check_leasable(lim.name, lim.rule, lim.lease, waits=lim.waits, blocks=lim.blocks,
                           shadow=shadow)

    # ---- the lease sweep: lapsed leases are given back without traffic

    def start_sweeper(self, client: Any, is_async: bool) -> None:
        ms = self.config.lease_sweep_ms
        if self._sweeper is not None or ms <= 0 or self.closed:
            return
        if is_async:
            import asyncio

            async def loop() -> None:
                while True:
                    await asyncio.sleep(ms / 1000)
                    try:
                        await sweep_async(self, client)
                    except Exception:  # never kill the loop
                        log.exception("lease sweep failed")

            self._sweeper = asyncio.get_running_loop().create_task(loop())
            return
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(ms / 1000):
                try:
                    sweep_sync(self, client)
                except Exception:
                    log.exception("lease sweep failed")

        t = threading.Thread(target=run, name="redis-ratelimit-lease-sweep", daemon=True)
        self._sweeper = (t, stop)
        t.start()

    def stop_sweeper(self) -> None:
        sw = self._sweeper
        if sw is None:
            return
        if isinstance(sw, tuple):
            sw[1].set()
            sw[0].join(5)
            self._sweeper = None
        else:
            sw.cancel()  # an asyncio task: awaited by close_async

    # ---- the breaker: a dead Redis costs one timeout per breaker_ms, not one per request

    def circuit_open(self) -> bool:
        return self.config.breaker_ms > 0 and self.config.clock() < self._open_until

    def trip(self) -> None:
        self._open_until = self.config.clock() + self.config.breaker_ms / 1000

    # ---- 1. plan

    def plan(self, req: Request, limits: Optional[Sequence[Limit]] = None) -> Optional[Plan]:
        """The plan of a request: the config's limits (routes, exemptions), or ``limits``
        (a decorator's or a dependency's: no routes, no exemptions)."""
        cfg = self.config
        if limits is None:
            for ex in cfg.exempt:
                if ex(req) if callable(ex) else _path_matches(ex, req.path):
                    return None
            limits = self.limits_for(req)
        else:
            limits = self._expand(limits)
        if not limits:
            return None
        resolved: List[Limit] = []
        for lim in limits:
            if isinstance(lim.rule, (Rule, Policy)):
                resolved.append(lim)
            else:  # a function of the request
                for x in lim.expand(req):
                    self.check_limit(x)
                    resolved.append(x)
        tag = cfg.hash_tag(req) if cfg.hash_tag else None
        base = cfg.key_prefix + (f"{{{tag}}}:" if tag else "")
        calls, oversized, denied = [], [], []
        for lim in resolved:
            ident = lim.key(req)
            if ident is not None and ident in lim.allow:
                continue  # an allowed identity skips this limit
            if ident is not None:
                shadow = cfg.shadow if lim.shadow is None else lim.shadow
                if ident in lim.deny:
                    denied.append(Call(lim, f"{base}{lim.name}:{ident}", lim.rule_for(1),
                                       shadow))
                    continue
                call = Call(lim, f"{base}{lim.name}:{ident}",
                            lim.rule_for(lim.cost_of(req), shadow), shadow)
                # the module answers ERR COST must not exceed ...: decided here, for every
                # algorithm, from the rule's limit (burst, capacity or window limit)
                # (a policy's limit is the server's: not known here, the module decides)
                big = isinstance(call.rule, Rule) and call.rule.cost > call.rule.limit
                (oversized if big else calls).append(call)
        if not calls and not oversized and not denied:
            return None
        return Plan(req, tuple(calls), cfg.shadow, bool(tag), tuple(oversized), tuple(denied))

    def refuse_early(self, plan: Plan) -> Optional[Outcome]:
        """Refusals decided in the process, before Redis (nothing spent anywhere): a
        denied identity (403), a cost above a limit (429), a local refusal (429)."""
        if plan.denied:
            for call in plan.denied:
                self._report(Event(plan.request, call.limit.name, call.key, "deny", True,
                                   False))
            return _problem(403, "about:blank", "Forbidden",
                            [c.limit.name for c in plan.denied], {})
        out = self.refuse_oversized(plan)
        if out is not None or self.local is None:
            return out
        now = self.config.clock_ms()
        items: List[Item] = []
        for call in plan.calls:
            if call.shadow or _waits(call):
                continue
            hit = self.local.check((call.limit.name, call.key), call.rule.cost, now)
            if hit is None:
                continue
            left, rule = hit
            d = Decision(False, rule.limit, 0, left, left)
            self._report(Event(plan.request, call.limit.name, call.key, "local", True, False,
                               d))
            items.append(Item(call.limit.name, rule, d))
        if not items:
            return None
        headers = render(items, legacy=self.config.legacy_headers,
                         legacy_reset=self.config.legacy_reset)
        return _problem(429, QUOTA_EXCEEDED, QUOTA_TITLE, [i.name for i in items], headers)

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
            return self._defaults
        if route.limits is False:
            return ()
        own = self._routes[id(route)]
        if route.replace:
            return own
        names = {lim.name for lim in own}
        return [*(lim for lim in self._defaults if lim.name not in names), *own]

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
        # leased limits last: after every other limit admitted (a refusal spends no lease)
        leased = [b for b in out if b.lease]
        return [*(b for b in out if not b.lease), *leased]

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
                    # a cost above the fallback rule's limit spends that whole limit
                    cost = min(call.rule.cost, fb.limit)
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
            if self.local is not None and source == "redis" and not _waits(call):
                k = (lim.name, call.key)
                if d.allowed:
                    self.local.admitted(k)
                elif rule is not None and d.retry_after_ms > 0:
                    self.local.refused(k, _cost(call), d.retry_after_ms, rule,
                                       self.config.clock_ms())
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
    """A call that needs a command of its own: a BLOCK penalty, a WAIT or a lease."""
    return c.limit.blocks or c.rule.wait_ms is not None or _leased(c)


def _leased(c: Call) -> bool:
    return c.limit.lease is not None and not c.shadow


def _waits(c: Call) -> bool:
    return c.rule.wait_ms is not None


def _cost(c: Call) -> int:
    return c.rule.cost


def _batch(calls: Tuple[Call, ...], gated: bool = False) -> Batch:
    if len(calls) == 1:
        (c,) = calls
        if _leased(c):
            return Batch(calls, [], lambda r: [r], True, None, True)
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
    refused = engine.refuse_early(plan)
    if refused is not None:
        return refused
    results: List[Tuple[Call, Result]] = []
    for b in engine.batches(plan, _is_cluster(client)):
        if not b.should_run(results):
            continue
        if b.lease:
            try:
                results.append((b.calls[0], lease_sync(engine, client, b.calls[0])))
            except Exception as e:
                if not _failure(engine, e):
                    raise
                results.append((b.calls[0], e))
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
    refused = engine.refuse_early(plan)
    if refused is not None:
        return refused
    results: List[Tuple[Call, Result]] = []
    for b in engine.batches(plan, _is_cluster(client)):
        if not b.should_run(results):
            continue
        if b.lease:
            try:
                results.append((b.calls[0], await lease_async(engine, client, b.calls[0])))
            except Exception as e:
                if not _failure(engine, e):
                    raise
                results.append((b.calls[0], e))
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


# ---------------------------------------------------------------- leased limits


def lease_sync(engine: Engine, client: Any, call: Call) -> Decision:
    """A leased limit (see :mod:`redis_ratelimit.lease`): a lapsed lease is given back,
    then the request is admitted from the lease, or the process claims ``COST chunk
    PARTIAL``. One request per key at a time in this process (a striped lock)."""
    lim, rule = call.limit, call.rule
    assert lim.lease is not None and isinstance(rule, Rule)
    leases, k = engine.leases, (lim.name, call.key)
    engine.start_sweeper(client, False)
    with leases.lock_for(k):
        now = engine.config.clock_ms()
        refund = leases.release(k, now, rule)
        if refund is not None:
            _refund_sync(engine, client, refund)
        d = leases.take(k, rule.cost, now)
        if d is not None:
            return d
        if engine.circuit_open():
            raise CircuitOpen("Redis failed recently")
        if rule.cost == 0:  # a peek claims nothing
            return rule.parse(client.execute_command(*rule.command_args(call.key)))
        crule, args = leases.claim(k, rule, rule.cost, lim.lease)
        reply = crule.parse(client.execute_command(*args))
        return leases.claimed(k, rule, reply, rule.cost, lim.lease, now)


async def lease_async(engine: Engine, client: Any, call: Call) -> Decision:
    """The asyncio twin of :func:`lease_sync`."""
    lim, rule = call.limit, call.rule
    assert lim.lease is not None and isinstance(rule, Rule)
    leases, k = engine.leases, (lim.name, call.key)
    engine.start_sweeper(client, True)
    async with leases.alock_for(k):
        now = engine.config.clock_ms()
        refund = leases.release(k, now, rule)
        if refund is not None:
            await _refund_async(engine, client, refund)
        d = leases.take(k, rule.cost, now)
        if d is not None:
            return d
        if engine.circuit_open():
            raise CircuitOpen("Redis failed recently")
        if rule.cost == 0:  # a peek claims nothing
            return rule.parse(await client.execute_command(*rule.command_args(call.key)))
        crule, args = leases.claim(k, rule, rule.cost, lim.lease)
        reply = crule.parse(await client.execute_command(*args))
        return leases.claimed(k, rule, reply, rule.cost, lim.lease, now)


def _refund_sync(engine: Engine, client: Any, args: List[Any]) -> None:
    try:
        client.execute_command(*args)
    except Exception as e:  # the units are lost: fewer admitted, never more
        log.warning("lease refund %s failed: %s", args[1], e)


async def _refund_async(engine: Engine, client: Any, args: List[Any]) -> None:
    try:
        await client.execute_command(*args)
    except Exception as e:
        log.warning("lease refund %s failed: %s", args[1], e)


def sweep_sync(engine: Engine, client: Any, force: bool = False) -> int:
    """Gives back every lease that lapsed (``force``: every lease, as on close);
    returns the refunds sent."""
    n = 0
    leases = engine.leases
    for k in leases.keys():
        with leases.lock_for(k):
            refund = leases.release(k, engine.config.clock_ms(), force=force)
            if refund is not None:
                _refund_sync(engine, client, refund)
                n += 1
    return n


async def sweep_async(engine: Engine, client: Any, force: bool = False) -> int:
    n = 0
    leases = engine.leases
    for k in leases.keys():
        async with leases.alock_for(k):
            refund = leases.release(k, engine.config.clock_ms(), force=force)
            if refund is not None:
                await _refund_async(engine, client, refund)
                n += 1
    return n


def close_sync(engine: Engine, client: Any) -> None:
    """Stops the sweep and gives back every lease (the middleware's ``close()``)."""
    engine.stop_sweeper()
    sweep_sync(engine, client, force=True)
    engine.closed = True


async def close_async(engine: Engine, client: Any) -> None:
    engine.stop_sweeper()
    task, engine._sweeper = engine._sweeper, None
    if task is not None:
        try:
            await task
        except BaseException:  # cancelled (or from another loop)
            pass
    await sweep_async(engine, client, force=True)
    engine.closed = True
