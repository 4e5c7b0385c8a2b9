"""Limits written as strings, as Flask-Limiter and slowapi write them: ``"10/second"``,
``"10 per second"``, ``"100/5 minutes"``, several separated by ``;`` or ``,``
(``"10/second; 1000/day"``).

Units: ``second(s)``, ``minute(s)``, ``hour(s)``, ``day(s)`` (anything else is a
``ValueError``). Each item is a SLIDING rule (``limit`` = the count, ``window_ms`` = the
period) unless ``algorithm`` says ``"fixed"`` (FIXED, the same numbers) or ``"gcra"``
(``burst`` = ``count`` = the count, ``period_ms`` = the period).
"""

from __future__ import annotations

import functools
import re
from typing import Tuple

from ._protocol import Rule

UNITS = {"second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
_ITEM = re.compile(r"^\s*(\d+)\s*(?:/|\s+per\s+)\s*(?:(\d+)\s*)?([a-z]+?)s?\s*$", re.I)
ALGORITHMS = ("sliding", "fixed", "gcra")


@functools.lru_cache(maxsize=1024)
def parse_limits(text: str, algorithm: str = "sliding") -> Tuple[Rule, ...]:
    """The rules of a limit string, in its order."""
    alg = algorithm.lower()
    if alg not in ALGORITHMS:
        raise ValueError(f"a limit string makes sliding, fixed or gcra rules, not {algorithm!r}")
    items = [x for x in re.split(r"[;,]", text) if x.strip()]
    if not items:
        raise ValueError(f"empty limit string {text!r}")
    out = []
    for item in items:
        m = _ITEM.match(item)
        unit = m.group(3).lower() if m else ""
        if not m or unit not in UNITS:
            raise ValueError(f"bad limit {item.strip()!r} in {text!r}: write it as '10/second', "
                             "'10 per minute' or '100/5 minutes' (second, minute, hour, day)")
        count, mult = int(m.group(1)), int(m.group(2) or 1)
        if count < 1 or mult < 1:
            raise ValueError(f"bad limit {item.strip()!r}: the count and period must be >= 1")
        period = mult * UNITS[unit]
        if alg == "gcra":
            out.append(Rule.gcra(count, count, period))
        elif alg == "fixed":
            out.append(Rule.fixed(count, period))
        else:
            out.append(Rule.sliding(count, period))
    return tuple(out)
