"""The in-memory limiter against the module, option by option and RL.ALL by RL.ALL: random
costs (0 peeks), DRYRUN, RESERVE and PARTIAL, random clock steps; every reply equal."""

from __future__ import annotations

import random
from typing import Any, Dict

import pytest

from conftest import NOW_MS
from redis_ratelimit import MemoryLimiter, RateLimiter, Rule
from redis_ratelimit._protocol import all_args, parse_all
from redis_ratelimit.memory import MemoryClient

RULES = [Rule.gcra(5, 2, 1000), Rule.tokenbucket(4, 3, 1000), Rule.queue(4, 300),
         Rule.fixed(5, 1000), Rule.sliding(6, 1000), Rule.log(5, 1000),
         Rule.gcra(3, 7, 1000), Rule.sliding(3, 700)]


def random_opts(rnd: random.Random, limit: int) -> Dict[str, Any]:
    kind = rnd.choice(["plain", "plain", "peek", "dryrun", "reserve", "partial", "partial"])
    if kind == "peek":
        return {"cost": 0}
    if kind == "partial":
        o: Dict[str, Any] = {"cost": rnd.choice([1, 2, limit, limit + 3]), "partial": True}
        if rnd.random() < 0.3:
            o["reserve"] = rnd.randrange(limit)
        return o
    cost = rnd.choice([1, 1, 2, limit])
    if kind == "reserve" and cost < limit:
        return {"cost": cost, "reserve": rnd.randrange(limit - cost + 1) if cost < limit else 0}
    return {"cost": cost, "dryrun": kind == "dryrun"}


def step_clock(r: Any, rnd: random.Random, now: list) -> None:
    step = rnd.choice([0, 0, 1, 7, 99, 250, 333, 1000])
    r.execute_command("RL.CLOCK", "ADVANCE", step)
    now[0] += step * 1000


@pytest.mark.parametrize("rule", RULES, ids=lambda x: f"{x.algorithm}{x.params}")
def test_memory_options_like_the_module(r, rule):
    now = [NOW_MS * 1000]
    mem = MemoryLimiter(clock=lambda: now[0])
    rnd = random.Random(f"opts{rule.algorithm}{rule.params}")
    for i in range(300):
        rr = rule.with_options(**random_opts(rnd, rule.limit))
        pipe = r.pipeline(transaction=True)  # the key lives while the clock is frozen
        pipe.execute_command(*rr.command_args("k"))
        pipe.pexpire("k", 3_600_000)
        reply = pipe.execute()[0]
        assert mem.decide("k", rr) == rr.parse(reply), f"step {i}: {rr.options}"
        step_clock(r, rnd, now)


def test_memory_all_like_the_module(r):
    now = [NOW_MS * 1000]
    mem = MemoryClient(MemoryLimiter(clock=lambda: now[0]))
    rnd = random.Random("all")
    in_memory = RateLimiter(mem)
    for i in range(400):
        picked = rnd.sample(RULES[:6], rnd.choice([1, 2, 3]))
        rules = []
        for j, rule in enumerate(picked):
            o = random_opts(rnd, rule.limit)
            o.pop("partial", None)
            o.pop("dryrun", None)
            if o.get("cost", 1) > rule.limit:
                o["cost"] = rule.limit
            if "reserve" in o and o["cost"] + o["reserve"] > rule.limit:
                del o["reserve"]
            if o.get("cost") == 0:
                o.pop("reserve", None)
            rules.append((f"k{rule.algorithm}", rule.with_options(**o)))
        dry = rnd.random() < 0.2
        got = in_memory.all(rules, dryrun=dry)
        pipe = r.pipeline(transaction=True)  # the keys live while the clock is frozen
        pipe.execute_command(*all_args(rules, dry))
        for k, _ in rules:
            pipe.pexpire(k, 3_600_000)
        want = parse_all(rules, pipe.execute()[0])
        assert got == want, f"step {i}: {rules} dryrun={dry}"
        step_clock(r, rnd, now)
