"""The module's commands as argument lists and their replies as typed values.

Everything here is pure (no I/O): the sync and asyncio clients send the same arguments and
parse the same replies, so both live here once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

Arg = Union[str, int, bytes]

#: The rate algorithms: name in RL.ALL -> command.
ALGORITHMS = {
    "GCRA": "RL.GCRA",
    "TOKENBUCKET": "RL.TOKENBUCKET",
    "SLIDING": "RL.SLIDING",
    "FIXED": "RL.FIXED",
    "LOG": "RL.LOG",
    "QUEUE": "RL.QUEUE",
}
_STAGGERED = frozenset({"SLIDING", "FIXED"})


@dataclass(frozen=True)
class Options:
    """The options of a rate command (commands.md, "Beyond yes or no").

    ``cost`` 1 is the default and is not sent; ``cost=0`` sends ``COST 0`` (a peek).
    ``refund`` sends ``REFUND n`` instead of ``COST``. ``partial`` sends ``PARTIAL`` (the
    reply gains ``granted``), ``reserve`` ``RESERVE r``, ``block_ms`` ``BLOCK ms`` and
    ``stagger`` ``STAGGER`` (FIXED and SLIDING only). ``wait_ms`` sends ``WAIT ms`` (held in
    the server until admitted or ``ms`` pass; the reply gains ``waited_ms``), ``probe``
    ``PROBE`` (the reply gains ``probe``). The client only passes them on: the
    server decides, and a server without the option answers ``ERR syntax error``.
    """

    cost: int = 1
    dryrun: bool = False
    refund: Optional[int] = None
    partial: bool = False
    reserve: Optional[int] = None
    block_ms: Optional[int] = None
    stagger: bool = False
    wait_ms: Optional[int] = None
    probe: bool = False

    def args(self, algorithm: str, *, in_all: bool = False) -> List[Arg]:
        if in_all:
            taken = [n for n, v in (("block_ms", self.block_ms), ("refund", self.refund),
                                    ("partial", self.partial), ("wait_ms", self.wait_ms),
                                    ("probe", self.probe)) if v not in (None, False)]
            if taken:
                raise ValueError(f"RL.ALL takes no {', '.join(taken)}: check a rule with "
                                 "them in a command of its own (the middleware does that "
                                 "for Limit(block_ms=...) and Limit(wait_ms=...))")
        out: List[Arg] = []
        if self.refund is not None:
            if self.cost != 1:
                raise ValueError("refund replaces cost: give one of them")
            out += ["REFUND", _int(self.refund, "refund")]
        elif self.cost != 1:
            out += ["COST", _int(self.cost, "cost")]
        if self.partial:
            out.append("PARTIAL")
        if self.reserve is not None:
            out += ["RESERVE", _int(self.reserve, "reserve")]
        if self.block_ms is not None:
            out += ["BLOCK", _int(self.block_ms, "block_ms")]
        if self.stagger:
            if algorithm not in _STAGGERED:
                raise ValueError("stagger applies to FIXED and SLIDING only")
            out.append("STAGGER")
        if self.dryrun and not in_all:
            out.append("DRYRUN")
        if self.probe:
            out.append("PROBE")
        if self.wait_ms is not None:
            out += ["WAIT", _int(self.wait_ms, "wait_ms")]
        return out


def _int(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    return v


@dataclass(frozen=True)
class Rule:
    """One rate rule: an algorithm, its numbers (the arguments after the key) and options.

    Build it with the class methods, e.g. ``Rule.gcra(10, 5, 1000)`` (10 at once, then 5 per
    second). A rule is what ``RL.ALL`` takes per key and what a middleware ``Limit`` applies.
    """

    algorithm: str  # GCRA, TOKENBUCKET, SLIDING, FIXED, LOG or QUEUE
    params: Tuple[int, ...]
    options: Options = field(default_factory=Options)

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {self.algorithm!r}")
        for p in self.params:
            _int(p, "rule parameter")

    @classmethod
    def gcra(cls, burst: int, count: int, period_ms: int, **opts: Any) -> "Rule":
        """``burst`` at once, then ``count`` per ``period_ms``."""
        return cls("GCRA", (burst, count, period_ms), Options(**opts))

    @classmethod
    def tokenbucket(cls, capacity: int, refill_tokens: int, refill_period_ms: int,
                    **opts: Any) -> "Rule":
        return cls("TOKENBUCKET", (capacity, refill_tokens, refill_period_ms), Options(**opts))

    @classmethod
    def sliding(cls, limit: int, window_ms: int, **opts: Any) -> "Rule":
        return cls("SLIDING", (limit, window_ms), Options(**opts))

    @classmethod
    def fixed(cls, limit: int, window_ms: int, **opts: Any) -> "Rule":
        return cls("FIXED", (limit, window_ms), Options(**opts))

    @classmethod
    def log(cls, limit: int, window_ms: int, **opts: Any) -> "Rule":
        return cls("LOG", (limit, window_ms), Options(**opts))

    @classmethod
    def queue(cls, capacity: int, interval_ms: int, **opts: Any) -> "Rule":
        return cls("QUEUE", (capacity, interval_ms), Options(**opts))

    @property
    def command(self) -> str:
        return ALGORITHMS[self.algorithm]

    @property
    def limit(self) -> int:
        """The reply's ``limit``: burst, capacity or window limit (the first number)."""
        return self.params[0]

    @property
    def cost(self) -> int:
        return self.options.cost

    def with_options(self, **opts: Any) -> "Rule":
        cur = self.options.__dict__.copy()
        cur.update(opts)
        return Rule(self.algorithm, self.params, Options(**cur))

    def command_args(self, key: str) -> List[Arg]:
        return [self.command, key, *self.params, *self.options.args(self.algorithm)]

    def all_args(self) -> List[Arg]:
        """This rule as one rule of ``RL.ALL`` (``GCRA 10 5 1000 [COST n] ...``)."""
        return [self.algorithm, *self.params, *self.options.args(self.algorithm, in_all=True)]

    def parse(self, reply: Sequence[Any]) -> "Decision":
        o = self.options
        return Decision.from_reply(reply, delay=self.algorithm == "QUEUE", granted=o.partial,
                                   probe=o.probe, waited=o.wait_ms is not None)

    @property
    def wait_ms(self) -> Optional[int]:
        """The rule's ``WAIT ms`` (None: answered at once)."""
        return self.options.wait_ms

    def unspent(self, d: "Decision") -> "Decision":
        """An RL.ALL rule that would have admitted a refused request answered as if it had
        spent its cost (as DRYRUN does); nothing was spent: its real state has ``cost``
        more remaining and, for the GCRA family, ``cost`` emission intervals less to reset."""
        if not d.allowed:
            return d
        reset = d.reset_after_ms
        ei = self.emission_interval_ms()
        if ei is not None:
            num, den = ei
            reset = max(0, -(-(reset * den - self.cost * num) // den))
        return Decision(d.allowed, d.limit, min(d.limit, d.remaining + self.cost),
                        d.retry_after_ms, reset, d.delay_ms, d.token, d.granted, d.probe,
                        d.waited_ms)

    # ---- numbers derived from the rule (headers, in-memory fallback)

    def emission_interval_ms(self) -> Optional[Tuple[int, int]]:
        """For the GCRA family (GCRA, TOKENBUCKET, QUEUE): the time one unit takes to come
        back, as the exact fraction (numerator, denominator) in ms; None for windows."""
        if self.algorithm in ("GCRA", "TOKENBUCKET"):
            return (self.params[2], self.params[1])
        if self.algorithm == "QUEUE":
            return (self.params[1], 1)
        return None

    def window_ms(self) -> int:
        """The time an exhausted key takes to be fresh again (for ``w`` of RateLimit-Policy):
        the window for SLIDING/FIXED/LOG, ``limit`` emission intervals for the GCRA family."""
        ei = self.emission_interval_ms()
        if ei is None:
            return self.params[1]
        num, den = ei
        return -(-self.limit * num // den)


@dataclass(frozen=True)
class Decision:
    """A rate command's reply: the five standard fields, and the extra ones when present.

    ``delay_ms`` (RL.QUEUE), ``token`` (RL.ACQUIRE; None when refused), ``granted``
    (with ``partial=True``), ``probe`` (with ``probe=True``: True when this request is the
    probe of a paused key) and ``waited_ms`` (with ``wait_ms``: how long the server held the
    request, 0 when answered at once) are None when the command does not send them.
    """

    allowed: bool
    limit: int
    remaining: int
    retry_after_ms: int
    reset_after_ms: int
    delay_ms: Optional[int] = None
    token: Optional[str] = None
    granted: Optional[int] = None
    probe: Optional[bool] = None
    waited_ms: Optional[int] = None

    def __bool__(self) -> bool:
        return self.allowed

    @classmethod
    def from_reply(cls, reply: Sequence[Any], *, delay: bool = False, token: bool = False,
                   granted: bool = False, probe: bool = False,
                   waited: bool = False) -> "Decision":
        """The extra fields, when sent, come in the module's order: ``delay_ms``, ``token``,
        ``granted``, ``probe``, ``waited_ms``."""
        if not isinstance(reply, (list, tuple)) or len(reply) < 5:
            raise ValueError(f"not a rate-limit reply: {reply!r}")
        a, lim, rem, retry, reset = (int(x) for x in reply[:5])
        i = 5
        d = t = g = p = w = None
        if delay:
            d, i = int(reply[i]), i + 1
        if token:
            t, i = _str(reply[i]), i + 1
        if granted:
            g, i = int(reply[i]), i + 1
        if probe:
            p, i = int(reply[i]) == 1, i + 1
        if waited:
            w, i = int(reply[i]), i + 1
        return cls(a == 1, lim, rem, retry, reset, d, t, g, p, w)


@dataclass(frozen=True)
class AllDecision:
    """``RL.ALL``'s reply: ``allowed``, ``refused_by`` (the module's value, unchanged: the
    1-based index of the first rule that refused, 0 when admitted) and each rule's own
    decision, in the order given (``decisions[refused_by - 1]`` is the refusing one)."""

    allowed: bool
    refused_by: int
    decisions: Tuple[Decision, ...]

    def __bool__(self) -> bool:
        return self.allowed

    @property
    def remaining(self) -> int:
        return min(d.remaining for d in self.decisions)

    @property
    def retry_after_ms(self) -> int:
        return max(d.retry_after_ms for d in self.decisions)


def all_args(rules: Sequence[Tuple[str, Any]], dryrun: bool) -> List[Arg]:
    """``rules``: ``(key, Rule)`` or ``(key, Policy)`` (anything with ``all_args()``)."""
    if not rules:
        raise ValueError("RL.ALL needs at least one (key, rule)")
    keys = [k for k, _ in rules]
    args: List[Arg] = ["RL.ALL", len(keys), *keys]
    for _, rule in rules:
        args += rule.all_args()
    if dryrun:
        args.append("DRYRUN")
    return args


def parse_all(rules: Sequence[Tuple[str, Any]], reply: Sequence[Any]) -> AllDecision:
    allowed, refused_by = int(reply[0]) == 1, int(reply[1])
    decisions = tuple(rule.parse(r) for (_, rule), r in zip(rules, reply[2:]))
    return AllDecision(allowed, refused_by, decisions)


def acquire_args(key: str, limit: int, lease_ms: int, dryrun: bool,
                 wait_ms: Optional[int] = None, probe: bool = False) -> List[Arg]:
    return ["RL.ACQUIRE", key, _int(limit, "limit"), _int(lease_ms, "lease_ms"),
            *(["DRYRUN"] if dryrun else []), *(["PROBE"] if probe else []),
            *(["WAIT", _int(wait_ms, "wait_ms")] if wait_ms is not None else [])]


def parse_acquire(reply: Sequence[Any], wait_ms: Optional[int] = None,
                  probe: bool = False) -> Decision:
    return Decision.from_reply(reply, token=True, probe=probe, waited=wait_ms is not None)


def pause_args(key: str, ms: int, probe_ms: Optional[int] = None) -> List[Arg]:
    """``RL.PAUSE key ms [PROBE probe_ms]``."""
    return ["RL.PAUSE", key, _int(ms, "ms"),
            *(["PROBE", _int(probe_ms, "probe_ms")] if probe_ms is not None else [])]


def throttle_args(key: str, max_burst: int, count_per_period: int, period_s: int,
                  quantity: Optional[int]) -> List[Arg]:
    q = [] if quantity is None else [_int(quantity, "quantity")]
    return ["CL.THROTTLE", key, _int(max_burst, "max_burst"),
            _int(count_per_period, "count_per_period"), _int(period_s, "period_s"), *q]


def parse_throttle(reply: Sequence[Any]) -> Decision:
    """CL.THROTTLE's reply (limited, limit, remaining, retry_after s or -1, reset_after s)
    as a Decision: allowed = not limited, the seconds times 1000 (so whole seconds)."""
    limited, lim, rem, retry, reset = (int(x) for x in reply[:5])
    return Decision(limited == 0, lim, rem, max(retry, 0) * 1000, reset * 1000)


def parse_info(reply: Any) -> Optional[Dict[str, Any]]:
    """RL.INFO's field/value pairs (RESP2) or map (RESP3) as a dict of str -> int or str."""
    if reply is None:
        return None
    items = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2])
    out: Dict[str, Any] = {}
    for k, v in items:
        out[_str(k)] = v if isinstance(v, int) else _str(v)
    return out


def _str(v: Any) -> Any:
    return v.decode() if isinstance(v, (bytes, bytearray)) else v
