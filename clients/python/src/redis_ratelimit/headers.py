"""HTTP headers from decisions, per draft-ietf-httpapi-ratelimit-headers-10.

* ``RateLimit-Policy: "user";q=100;w=60`` — one item per limit: ``q`` the quota (the reply's
  ``limit``), ``w`` the window in seconds (rounded up, at least 1): the window of SLIDING /
  FIXED / LOG, and for the GCRA family (GCRA, TOKENBUCKET, QUEUE) the time an exhausted key
  takes to be fresh again, ``limit`` emission intervals.
* ``RateLimit: "user";r=42;t=3`` — ``r`` the remaining quota, ``t`` the seconds until
  *additional* quota is made available (draft-10 §4.1.2), see :func:`reset_seconds`; never
  above ``w``.
* ``Retry-After`` (only when refused) — the longest ``retry_after_ms`` of the refusing limits,
  in seconds rounded up, so a client that waits that long is admitted.
* ``X-RateLimit-Limit`` / ``-Remaining`` / ``-Reset`` on request (``legacy=True``): the
  tightest limit (a refusing one with the longest wait, else the fewest remaining, then the
  longest reset); ``-Remaining`` the fewest remaining of all; Reset is the Unix time in
  seconds, rounded up, at which that limit is back to full (now + ``reset_after_ms``), as
  express-rate-limit, Flask-Limiter and GitHub send it (the Node package's too). With
  ``legacy_reset="delta"``: the seconds until then, rounded up, instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

from ._protocol import Decision, Rule


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def reset_seconds(rule: Rule, d: Decision) -> int:
    """``t``: whole seconds (rounded up) until additional quota is available, derived from
    the five fields and the rule's own numbers.

    * Refused: ``retry_after_ms`` (this request is admitted then; Retry-After is the same).
    * Nothing spent (``remaining >= limit``, or ``reset_after_ms`` 0): 0.
    * GCRA, TOKENBUCKET, QUEUE (emission interval ``T = period_ms / count``, or
      ``interval_ms``): the next unit comes back when the theoretical arrival time has moved
      to within ``(limit - remaining - 1) * T`` of now, i.e. after
      ``reset_after_ms - (limit - remaining - 1) * T`` ms (exact fraction; the module's
      ``remaining = floor((limit*T - reset) / T)`` makes it land in ``(0, T]``). Not the full
      reset: a bucket that lost 10 units gets its first one back after one interval.
    * FIXED: the window's end, ``reset_after_ms``: nothing comes back before.
    * SLIDING: the current window's end (``reset_after_ms - window_ms`` when the current
      window has a count, which ``reset_after_ms > window_ms`` shows; else
      ``reset_after_ms``): there the current window's count starts to age out. Quota may come
      back earlier, as the previous window's weight fades, which the reply does not show.
    * LOG: ``reset_after_ms``, the latest moment at which units come back (the age of the
      oldest entry is not in the reply; units may come back earlier).

    The header's ``t`` (:attr:`Item.t`) is this clamped to the policy's ``w``.
    """
    if not d.allowed:
        return _ceil_div(d.retry_after_ms, 1000)
    if d.remaining >= d.limit or d.reset_after_ms <= 0:
        return 0
    ei = rule.emission_interval_ms()
    if ei is not None:
        num, den = ei
        ms_num = d.reset_after_ms * den - (d.limit - d.remaining - 1) * num
        return max(0, _ceil_div(ms_num, den * 1000))
    if rule.algorithm == "SLIDING":
        w = rule.params[1]
        ms = d.reset_after_ms - w if d.reset_after_ms > w else d.reset_after_ms
        return _ceil_div(ms, 1000)
    return _ceil_div(d.reset_after_ms, 1000)


def window_seconds(rule: Rule) -> int:
    """``w`` of RateLimit-Policy: the rule's window in whole seconds, rounded up, at least 1."""
    return max(1, _ceil_div(rule.window_ms(), 1000))


def _sf_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def policy_item(name: str, rule: Rule) -> str:
    """``"name";q=<limit>;w=<seconds>``."""
    w = window_seconds(rule)
    return f"{_sf_string(name)};q={rule.limit};w={w}"


@dataclass(frozen=True)
class Item:
    """One limit's part of the headers: its policy name, rule and decision."""

    name: str
    rule: Rule
    decision: Decision

    @property
    def t(self) -> int:
        """``t`` of RateLimit: :func:`reset_seconds`, never above the policy's ``w`` (a
        refusal that waits longer, e.g. a BLOCK penalty, says so in ``Retry-After``). A
        leased limit's ``t`` comes from its last claim's reply (``reply_view``)."""
        d = self.decision
        view = getattr(d, "reply_view", None)
        if view is not None:
            d = view()
        return min(reset_seconds(self.rule, d), window_seconds(self.rule))

    def limit_item(self) -> str:
        return f"{_sf_string(self.name)};r={self.decision.remaining};t={self.t}"


def tightest(items: Sequence[Item]) -> Item:
    """A refusing item with the longest wait, else the one with the fewest remaining; then
    the longest reset; then the first (the Node package's order)."""
    def rank(i: Item) -> Tuple[int, int, int]:
        d = i.decision
        return (int(d.allowed), d.remaining if d.allowed else -d.retry_after_ms,
                -d.reset_after_ms)

    return min(items, key=rank)


def render(items: Sequence[Item], *, legacy: bool = False, legacy_reset: str = "epoch",
           now: Optional[float] = None) -> Dict[str, str]:
    """The response headers for the limits that applied to one request. ``now``: the Unix
    time in seconds for ``X-RateLimit-Reset`` (default ``time.time()``)."""
    if not items:
        return {}
    headers = {
        "RateLimit-Policy": ", ".join(policy_item(i.name, i.rule) for i in items),
        "RateLimit": ", ".join(i.limit_item() for i in items),
    }
    refused = [i.decision for i in items if not i.decision.allowed]
    if refused:
        headers["Retry-After"] = str(_ceil_div(max(d.retry_after_ms for d in refused), 1000))
    if legacy:
        top = tightest(items)
        if legacy_reset not in ("epoch", "delta"):
            raise ValueError('legacy_reset must be "epoch" or "delta"')
        full_ms = max(0, top.decision.reset_after_ms)  # the tightest limit back to full
        if legacy_reset == "epoch":
            now_ms = int((time.time() if now is None else now) * 1000)
            reset = _ceil_div(now_ms + full_ms, 1000)
        else:
            reset = _ceil_div(full_ms, 1000)
        headers["X-RateLimit-Limit"] = str(top.decision.limit)
        headers["X-RateLimit-Remaining"] = str(max(0, min(i.decision.remaining
                                                          for i in items)))
        headers["X-RateLimit-Reset"] = str(reset)
    return headers
