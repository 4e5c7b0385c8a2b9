"""Policies: named rules stored in the server (``RL.POLICY``, ``RL.ALLOW``, ``POLICY`` in
``RL.ALL``), so that operators change a limit once, for every service, without a deploy.

* :class:`Policy` — a rule value naming a policy: ``rl.all([(key, Policy("api", cost=2))])``,
  ``Limit("api", Policy("api"), by_user(...))`` in the middleware.
* :class:`Policies` / :class:`AsyncPolicies` — the operator's API (``rl.policies``):
  ``set``, ``rollout``, ``rollback``, ``get``, ``delete``, ``list``, ``history``, ``stats``.
  On a Redis Cluster client every write goes to every primary (policies are per node, like
  ``FUNCTION LOAD``) and the reads answer per node, flagging drift.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import (Any, Dict, Generic, List, Optional, Sequence, Tuple, Type, TypeVar,
                    Union)

import redis

from ._protocol import ALGORITHMS, Arg, Decision, Options, Rule, _int, _str

T = TypeVar("T")
RuleSpec = Union[Rule, str, Sequence[Arg]]


# ---------------------------------------------------------------- the rule value


@dataclass(frozen=True)
class Policy:
    """A policy referenced by name, in place of a :class:`Rule`: one rule of ``RL.ALL``
    (``POLICY name [COST n] [RESERVE r]``), or ``RL.ALLOW key name`` on its own. The numbers
    (and the algorithm) are the server's: the reply's ``limit`` is the applying version's."""

    name: str
    cost: int = 1
    reserve: Optional[int] = None
    wait_ms: Optional[int] = None  # RL.ALLOW ... WAIT ms (alone only: RL.ALL takes no WAIT)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a policy name is a non-empty str")
        _int(self.cost, "cost")
        if self.reserve is not None:
            _int(self.reserve, "reserve")
        if self.wait_ms is not None:
            _int(self.wait_ms, "wait_ms")

    def with_options(self, **opts: Any) -> "Policy":
        cur = {"cost": self.cost, "reserve": self.reserve, "wait_ms": self.wait_ms}
        cur.update(opts)
        return Policy(self.name, **cur)

    def _options(self) -> Options:
        return Options(cost=self.cost, reserve=self.reserve, wait_ms=self.wait_ms)

    def all_args(self) -> List[Arg]:
        """This policy as one rule of ``RL.ALL``."""
        return ["POLICY", self.name, *self._options().args("POLICY", in_all=True)]

    def command_args(self, key: str) -> List[Arg]:
        """``RL.ALLOW key name [COST n] [RESERVE r]``."""
        return ["RL.ALLOW", key, self.name, *self._options().args("POLICY")]

    def parse(self, reply: Sequence[Any]) -> Decision:
        return parse_allow(reply, waited=self.wait_ms is not None)

    def unspent(self, d: Decision) -> Decision:
        """In a refused ``RL.ALL`` a policy that would have admitted spent nothing; its real
        state needs the version's rule (the middleware resolves it later): marked here."""
        return Unspent(*(getattr(d, f.name) for f in fields(Decision))) if d.allowed else d


class Unspent(Decision):
    """A policy's decision from a refused ``RL.ALL`` (nothing spent), before the middleware
    knows the version's rule (see :meth:`redis_ratelimit.Rule.unspent`)."""


def allow_args(key: str, policy: str, *, cost: int = 1, dryrun: bool = False,
               partial: bool = False, reserve: Optional[int] = None,
               refund: Optional[int] = None, wait_ms: Optional[int] = None,
               probe: bool = False) -> List[Arg]:
    opts = Options(cost=cost, dryrun=dryrun, refund=refund, partial=partial, reserve=reserve,
                   wait_ms=wait_ms, probe=probe)
    return ["RL.ALLOW", key, policy, *opts.args("POLICY")]


def parse_allow(reply: Sequence[Any], partial: bool = False, probe: bool = False,
                waited: bool = False) -> Decision:
    """``RL.ALLOW``'s reply: the five fields, then (by the policy's algorithm) QUEUE's
    ``delay_ms`` (an integer) or CONCURRENCY's ``token`` (a string, nil when refused), then
    ``granted`` with PARTIAL, ``probe`` with PROBE, ``waited_ms`` with WAIT. The client does
    not know the algorithm: the fields it asked for are taken from the end, and the shape of
    what is left tells."""
    if not isinstance(reply, (list, tuple)) or len(reply) < 5:
        raise ValueError(f"not a rate-limit reply: {reply!r}")
    a, lim, rem, retry, reset = (int(x) for x in reply[:5])
    extra = list(reply[5:])
    waited_ms = int(extra.pop()) if waited and extra else None
    probed = int(extra.pop()) == 1 if probe and extra else None
    granted = int(extra.pop()) if partial and extra else None
    delay = token = None
    if extra:
        x = extra[0]
        if isinstance(x, int) and not isinstance(x, bool):
            delay = x
        else:
            token = _str(x)
    return Decision(a == 1, lim, rem, retry, reset, delay, token, granted, probed, waited_ms)


def rule_args(rule: RuleSpec) -> List[Arg]:
    """The ``rule`` of ``RL.POLICY SET``: a :class:`Rule` (its numbers, ``stagger`` and
    ``block_ms``; the per-call options cost, dryrun, refund, partial and reserve are not part
    of a policy), a string (``"GCRA 10 1 1000"``, ``"CONCURRENCY 5 30000"``) or a list."""
    if isinstance(rule, Rule):
        o = rule.options
        if (o.cost != 1 or o.dryrun or o.refund is not None or o.partial
                or o.reserve is not None):
            raise ValueError("a policy stores a rule's numbers, stagger and block_ms; cost, "
                             "dryrun, refund, partial and reserve are options of each call")
        out: List[Arg] = [rule.algorithm, *rule.params]
        if o.stagger:
            out.append("STAGGER")
        if o.block_ms is not None:
            out += ["BLOCK", o.block_ms]
        return out
    if isinstance(rule, str):
        out = list(rule.split())
    else:
        out = list(rule)
    if not out:
        raise ValueError("empty policy rule")
    return out


def parse_rule(text: str) -> Optional[Rule]:
    """A policy's rule as ``RL.POLICY GET`` shows it (``"GCRA 3 1 20000"``, ``"FIXED 10
    60000 STAGGER BLOCK 1000"``) as a :class:`Rule`; None for CONCURRENCY (no rate rule)
    or anything unknown."""
    parts = (text or "").split()
    if not parts or parts[0].upper() not in ALGORITHMS:
        return None
    alg = parts[0].upper()
    n = 3 if alg in ("GCRA", "TOKENBUCKET") else 2
    try:
        params = tuple(int(x) for x in parts[1:1 + n])
        rest = [p.upper() for p in parts[1 + n:]]
        opts: Dict[str, Any] = {}
        i = 0
        while i < len(rest):
            if rest[i] == "STAGGER":
                opts["stagger"] = True
                i += 1
            elif rest[i] == "BLOCK":
                opts["block_ms"] = int(rest[i + 1])
                i += 2
            else:
                return None
        if len(params) != n:
            return None
        return Rule(alg, params, Options(**opts))
    except (ValueError, IndexError):
        return None


# ---------------------------------------------------------------- replies


def _fields(reply: Any) -> Dict[str, Any]:
    """Field/value pairs (RESP2) or a map (RESP3) as a dict of str -> int / str / list."""
    items = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2])
    return {_str(k): _str(v) for k, v in items}


def _build(cls: Type[T], reply: Any) -> T:
    f = _fields(reply)
    return cls(**{x.name: f[x.name] for x in fields(cls)})  # type: ignore


@dataclass(frozen=True)
class PolicyInfo:
    """``RL.POLICY GET``: the current version (``rule``, ``mode`` ``enforce`` / ``shadow``)
    and the candidate being rolled out to ``rollout`` per cent of keys (``candidate_version``
    0, ``candidate_rule`` "" and ``rollout`` 0 when there is none). ``digest``: nodes that
    show the same digest hold the same policy."""

    name: str
    version: int
    rule: str
    mode: str
    digest: str
    candidate_version: int
    candidate_rule: str
    candidate_mode: str
    rollout: int


@dataclass(frozen=True)
class PolicyEntry:
    """One entry of ``RL.POLICY LIST``."""

    name: str
    version: int
    digest: str
    mode: str
    candidate_version: int
    rollout: int


@dataclass(frozen=True)
class PolicyVersion:
    """One entry of ``RL.POLICY HISTORY``: ``status`` candidate, current or previous;
    ``set_ms`` on the module's clock."""

    version: int
    rule: str
    mode: str
    set_ms: int
    status: str


@dataclass(frozen=True)
class PolicyStats:
    """``RL.POLICY STATS`` (this node's, since the last reset). ``top_refused``: up to 10
    ``(key, count)``, most refused first; a count is at most ``top_error_bound`` above the
    true count, never below."""

    requests: int
    admitted: int
    refused: int
    shadow_refusals: int
    units_spent: int
    top_refused: Tuple[Tuple[str, int], ...]
    top_error_bound: int


def parse_get(reply: Any) -> Optional[PolicyInfo]:
    return None if reply is None else _build(PolicyInfo, reply)


def parse_list(reply: Any) -> List[PolicyEntry]:
    return [_build(PolicyEntry, e) for e in reply or ()]


def parse_history(reply: Any) -> List[PolicyVersion]:
    return [_build(PolicyVersion, e) for e in reply or ()]


def parse_stats(reply: Any) -> PolicyStats:
    f = _fields(reply)
    top = tuple((_str(k), int(c)) for k, c in (f.get("top_refused") or ()))
    return PolicyStats(f["requests"], f["admitted"], f["refused"], f["shadow_refusals"],
                       f["units_spent"], top, f["top_error_bound"])


def set_args(name: str, rule: RuleSpec, shadow: bool = False,
             rollout: Optional[int] = None) -> List[Arg]:
    out: List[Arg] = ["RL.POLICY", "SET", name, *rule_args(rule)]
    if shadow:
        out.append("SHADOW")
    if rollout is not None:
        out += ["ROLLOUT", _int(rollout, "rollout")]
    return out


# ---------------------------------------------------------------- cluster: per node


@dataclass(frozen=True)
class ClusterPolicy(Generic[T]):
    """One policy as every primary of a cluster holds it: ``nodes`` maps each primary
    (``"host:port"``) to its :class:`PolicyInfo` (``get``) or :class:`PolicyEntry`
    (``list``), None where the policy is missing. ``drift``: the primaries disagree (a
    different version or digest, or missing on some): set it again on every primary."""

    name: str
    nodes: Dict[str, Optional[T]]
    drift: bool

    @property
    def value(self) -> Optional[T]:
        """The policy when every primary holds the same one, else None."""
        return None if self.drift else next(iter(self.nodes.values()), None)


def _drift(values: Sequence[Any]) -> bool:
    seen = {None if v is None else (v.version, v.digest) for v in values}
    return len(seen) > 1


class PolicyNodesError(redis.ResponseError):
    """A write on a cluster that some primaries refused (or could not answer). ``replies``:
    every primary's answer, the value or the exception; the others did apply it (``list()``
    shows the drift until it is set again)."""

    def __init__(self, replies: Dict[str, Any]):
        self.replies = replies
        bad = {n: str(v) for n, v in replies.items() if isinstance(v, BaseException)}
        super().__init__(f"RL.POLICY failed on {len(bad)} of {len(replies)} primaries: {bad}")


def _is_cluster(client: Any) -> bool:
    return hasattr(client, "get_primaries") and hasattr(client, "get_nodes")


def _per_node(replies: Dict[str, Any]) -> Dict[str, Any]:
    if any(isinstance(v, BaseException) for v in replies.values()):
        raise PolicyNodesError(replies)
    return replies


def _cluster_get(name: str, replies: Dict[str, Any]) -> Optional[ClusterPolicy[PolicyInfo]]:
    nodes = {n: parse_get(v) for n, v in _per_node(replies).items()}
    if all(v is None for v in nodes.values()):
        return None
    return ClusterPolicy(name, nodes, _drift(list(nodes.values())))


def _cluster_list(replies: Dict[str, Any]) -> List[ClusterPolicy[PolicyEntry]]:
    per = {n: {e.name: e for e in parse_list(v)} for n, v in _per_node(replies).items()}
    names = sorted({name for entries in per.values() for name in entries})
    out = []
    for name in names:
        nodes = {n: entries.get(name) for n, entries in per.items()}
        out.append(ClusterPolicy(name, nodes, _drift(list(nodes.values()))))
    return out


# ---------------------------------------------------------------- the operator's API


class Policies:
    """``RL.POLICY`` over a sync client (``rl.policies``). On a single server the replies,
    typed. On ``redis.cluster.RedisCluster``: writes go to every primary and return
    ``{"host:port": reply}`` (:class:`PolicyNodesError` if some primary refused); ``get``
    and ``list`` return :class:`ClusterPolicy` (per node, with ``drift``); ``history`` and
    ``stats`` a dict per primary."""

    def __init__(self, client: Any):
        self.redis = client

    def _x(self, *args: Any) -> Any:
        if not _is_cluster(self.redis):
            return self.redis.execute_command(*args)
        out: Dict[str, Any] = {}
        for node in self.redis.get_primaries():
            try:
                out[node.name] = self.redis.execute_command(*args, target_nodes=node)
            except redis.RedisError as e:
                out[node.name] = e
        return out

    @property
    def cluster(self) -> bool:
        return _is_cluster(self.redis)

    def _each(self, args: List[Arg], parse: Any) -> Any:
        r = self._x(*args)
        if self.cluster:
            return {n: parse(v) for n, v in _per_node(r).items()}
        return parse(r)

    def set(self, name: str, rule: RuleSpec, shadow: bool = False,
            rollout: Optional[int] = None) -> Any:
        """``RL.POLICY SET``: the new version (int; per primary on a cluster)."""
        return self._each(set_args(name, rule, shadow, rollout), int)

    def rollout(self, name: str, percent: int) -> Any:
        """``RL.POLICY ROLLOUT``: the candidate's version."""
        return self._each(["RL.POLICY", "ROLLOUT", name, _int(percent, "percent")], int)

    def rollback(self, name: str) -> Any:
        """``RL.POLICY ROLLBACK``: the current version."""
        return self._each(["RL.POLICY", "ROLLBACK", name], int)

    def delete(self, name: str) -> Any:
        """``RL.POLICY DEL``: True if it existed."""
        return self._each(["RL.POLICY", "DEL", name], lambda v: int(v) == 1)

    def get(self, name: str) -> Any:
        """``Optional[PolicyInfo]``; on a cluster ``Optional[ClusterPolicy[PolicyInfo]]``
        (None when no primary has it)."""
        r = self._x("RL.POLICY", "GET", name)
        return _cluster_get(name, r) if self.cluster else parse_get(r)

    def list(self, pattern: Optional[str] = None) -> Any:
        """``List[PolicyEntry]`` by name; on a cluster ``List[ClusterPolicy[PolicyEntry]]``,
        one per name any primary has."""
        r = self._x("RL.POLICY", "LIST", *([pattern] if pattern is not None else []))
        return _cluster_list(r) if self.cluster else parse_list(r)

    def history(self, name: str) -> Any:
        """``List[PolicyVersion]``, the candidate first, then newest first."""
        return self._each(["RL.POLICY", "HISTORY", name], parse_history)

    def stats(self, name: str, reset: bool = False) -> Any:
        """``PolicyStats`` (with ``reset=True``: then zeroed). Per node on a cluster."""
        return self._each(["RL.POLICY", "STATS", name, *(["RESET"] if reset else [])],
                          parse_stats)


class AsyncPolicies:
    """:class:`Policies` for ``redis.asyncio.Redis`` / ``redis.asyncio.RedisCluster``: the
    same methods as coroutines, the same results."""

    def __init__(self, client: Any):
        self.redis = client

    @property
    def cluster(self) -> bool:
        return _is_cluster(self.redis)

    async def _x(self, *args: Any) -> Any:
        if not self.cluster:
            return await self.redis.execute_command(*args)
        await self.redis.initialize()  # the primaries are known once initialised
        out: Dict[str, Any] = {}
        for node in self.redis.get_primaries():
            try:
                out[node.name] = await self.redis.execute_command(*args, target_nodes=node)
            except redis.RedisError as e:
                out[node.name] = e
        return out

    async def _each(self, args: List[Arg], parse: Any) -> Any:
        r = await self._x(*args)
        if self.cluster:
            return {n: parse(v) for n, v in _per_node(r).items()}
        return parse(r)

    async def set(self, name: str, rule: RuleSpec, shadow: bool = False,
                  rollout: Optional[int] = None) -> Any:
        return await self._each(set_args(name, rule, shadow, rollout), int)

    async def rollout(self, name: str, percent: int) -> Any:
        return await self._each(["RL.POLICY", "ROLLOUT", name, _int(percent, "percent")], int)

    async def rollback(self, name: str) -> Any:
        return await self._each(["RL.POLICY", "ROLLBACK", name], int)

    async def delete(self, name: str) -> Any:
        return await self._each(["RL.POLICY", "DEL", name], lambda v: int(v) == 1)

    async def get(self, name: str) -> Any:
        r = await self._x("RL.POLICY", "GET", name)
        return _cluster_get(name, r) if self.cluster else parse_get(r)

    async def list(self, pattern: Optional[str] = None) -> Any:
        r = await self._x("RL.POLICY", "LIST", *([pattern] if pattern is not None else []))
        return _cluster_list(r) if self.cluster else parse_list(r)

    async def history(self, name: str) -> Any:
        return await self._each(["RL.POLICY", "HISTORY", name], parse_history)

    async def stats(self, name: str, reset: bool = False) -> Any:
        return await self._each(["RL.POLICY", "STATS", name, *(["RESET"] if reset else [])],
                                parse_stats)


def is_unknown_policy(e: BaseException) -> bool:
    """``ERR no such policy 'name'`` (redis-py drops the ``ERR``)."""
    if not isinstance(e, redis.ResponseError):
        return False
    msg = str(e)
    return msg.startswith("no such policy") or msg.startswith("ERR no such policy")
