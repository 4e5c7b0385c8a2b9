"""The API over every command, sync and asyncio, RESP2 and RESP3, on a real server."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio

from conftest import NOW_MS, run
from redis_ratelimit import AsyncRateLimiter, Decision, RateLimiter, Rule


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def rl(request, r, redis_port):
    c = redis.Redis(port=redis_port, protocol=request.param)
    yield RateLimiter(c)
    c.close()


def test_gcra(rl):
    assert rl.gcra("k", 3, 1, 10_000) == Decision(True, 3, 2, 0, 10_000)
    assert rl.gcra("k", 3, 1, 10_000, cost=2) == Decision(True, 3, 0, 0, 30_000)
    d = rl.gcra("k", 3, 1, 10_000)
    assert d == Decision(False, 3, 0, 10_000, 30_000) and not d
    assert rl.gcra("k", 3, 1, 10_000, dryrun=True).allowed is False


def test_decision_is_frozen(rl):
    d = rl.gcra("k", 3, 1, 1000)
    with pytest.raises(AttributeError):
        d.allowed = False  # type: ignore[misc]


def test_tokenbucket_equals_gcra(rl, r):
    assert rl.tokenbucket("tb", 5, 1, 1000, cost=5) == Decision(True, 5, 0, 0, 5000)
    assert rl.tokenbucket("tb", 5, 1, 1000) == Decision(False, 5, 0, 1000, 5000)
    r.execute_command("RL.CLOCK", "ADVANCE", 2000)
    assert rl.info("tb")["tokens"] == 2


def test_sliding_fixed_log(rl, r):
    assert rl.sliding("s", 100, 60_000, dryrun=True) == Decision(True, 100, 99, 0, 120_000)
    assert r.exists("s") == 0
    assert rl.fixed("f", 2, 60_000) == Decision(True, 2, 1, 0, 60_000)
    assert rl.fixed("f", 2, 60_000, cost=2) == Decision(False, 2, 1, 60_000, 60_000)
    assert rl.log("l", 2, 10_000, cost=2) == Decision(True, 2, 0, 0, 10_000)
    r.execute_command("RL.CLOCK", "ADVANCE", 4000)
    assert rl.log("l", 2, 10_000) == Decision(False, 2, 0, 6000, 6000)


def test_queue_delays(rl, r):
    ds = [rl.queue("q", 5, 1000) for _ in range(8)]
    assert [d.delay_ms for d in ds] == [0, 1000, 2000, 3000, 4000, 0, 0, 0]
    assert [d.allowed for d in ds] == [True] * 5 + [False] * 3
    r.execute_command("RL.CLOCK", "ADVANCE", 1000)
    d = rl.queue("q", 5, 1000)
    assert (d.allowed, d.delay_ms) == (True, 4000)
    assert rl.queue("q", 5, 1000).allowed is False


def test_leases(rl):
    a = rl.acquire("jobs", 2, 30_000)
    b = rl.acquire("jobs", 2, 30_000)
    c = rl.acquire("jobs", 2, 30_000)
    assert (a.allowed, b.allowed, c.allowed) == (True, True, False)
    assert isinstance(a.token, str) and a.token.startswith(f"{NOW_MS}-")
    assert c.token is None and c.retry_after_ms == 30_000
    assert rl.renew("jobs", a.token, 60_000) is True
    assert rl.release("jobs", a.token) is True
    assert rl.release("jobs", a.token) is False
    assert rl.acquire("jobs", 2, 30_000, dryrun=True).allowed is True
    with pytest.raises(redis.ResponseError, match="token must be"):
        rl.release("jobs", "nonsense")


def test_throttle_is_redis_cell(rl):
    # redis-cell: CL.THROTTLE user 15 30 60 -> 0 16 15 -1 2
    assert rl.throttle("cell", 15, 30, 60) == Decision(True, 16, 15, 0, 2000)
    assert rl.throttle("cell", 15, 30, 60, quantity=15).remaining == 0
    d = rl.throttle("cell", 15, 30, 60)
    assert (d.allowed, d.retry_after_ms) == (False, 2000)


def test_all(rl, r):
    rules = [("rl:{org:7}:user:42", Rule.gcra(10, 1, 1000)),
             ("rl:{org:7}", Rule.sliding(2, 60_000))]
    res = rl.all(rules)
    assert res.allowed and res.refused_by == 0  # the module's value: 0 when admitted
    assert res.decisions == (Decision(True, 10, 9, 0, 1000), Decision(True, 2, 1, 0, 120_000))
    assert rl.all(rules).allowed
    res = rl.all(rules)
    assert (res.allowed, res.refused_by) == (False, 2)  # 1-based: the second rule
    assert res.decisions[res.refused_by - 1].allowed is False
    assert rl.all(rules, dryrun=True).refused_by == 2
    # A queue rule's reply carries delay_ms
    res = rl.all([("qq", Rule.queue(3, 500)), ("qq2", Rule.fixed(5, 1000, cost=2))])
    assert res.decisions[0].delay_ms == 0 and res.decisions[1].remaining == 3


def test_info(rl, r):
    assert rl.info("missing") is None
    rl.gcra("g", 3, 1, 1000)
    info = rl.info("g")
    assert info["algorithm"] == "gcra"
    assert (info["burst"], info["count"], info["period_ms"]) == (3, 1, 1000)
    assert info["tat_ns"] == (NOW_MS + 1000) * 1_000_000  # a Python int: exact
    assert 0 < info["ttl_ms"] <= 1000


def test_errors_propagate(rl, r):
    with pytest.raises(redis.ResponseError, match="COST must not exceed"):
        rl.gcra("k", 3, 1, 1000, cost=4)
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        rl.gcra("str", 3, 1, 1000)
    with pytest.raises(ValueError):
        Rule.gcra(3, 1, 1000, cost=2, refund=1).command_args("k")
    with pytest.raises(ValueError):
        Rule.gcra(3, 1, 1000, stagger=True).command_args("k")


def test_clock(rl, r):
    assert int(rl.clock_get()) == NOW_MS
    rl.clock_advance(5)
    assert int(rl.clock_get()) == NOW_MS + 5


# ------------------------------------------------------------------ asyncio


@pytest.mark.parametrize("protocol", [2, 3])
def test_async_api(r, redis_port, protocol):
    async def main():
        c = redis.asyncio.Redis(port=redis_port, protocol=protocol)
        rl = AsyncRateLimiter(c)
        try:
            assert await rl.gcra("k", 3, 1, 1000) == Decision(True, 3, 2, 0, 1000)
            assert (await rl.tokenbucket("t", 3, 1, 1000)).remaining == 2
            assert (await rl.sliding("s", 3, 1000)).remaining == 2
            assert (await rl.fixed("f", 3, 1000)).remaining == 2
            assert (await rl.log("l", 3, 1000)).remaining == 2
            assert (await rl.queue("q", 3, 1000)).delay_ms == 0
            lease = await rl.acquire("a", 1, 1000)
            assert lease.token and await rl.renew("a", lease.token, 2000)
            assert await rl.release("a", lease.token)
            assert (await rl.throttle("c", 1, 1, 1)).limit == 2
            res = await rl.all([("x", Rule.fixed(1, 1000)), ("y", Rule.fixed(1, 1000))])
            assert res.allowed
            assert (await rl.info("k"))["algorithm"] == "gcra"
            assert int(await rl.clock_get()) == NOW_MS
        finally:
            await c.aclose()

    run(main())


# ------------------------------------------------------------------ the options
# "Beyond yes or no" (commands.md): peek, refund, partial, reserve, block, stagger. The
# module implements them; the client sends the contract's syntax.


def test_peek_cost_0(rl, r):
    assert rl.gcra("p", 3, 1, 1000, cost=0) == Decision(True, 3, 3, 0, 0)
    assert r.exists("p") == 0
    rl.gcra("p", 3, 1, 1000)
    assert rl.gcra("p", 3, 1, 1000, cost=0) == Decision(True, 3, 2, 0, 1000)


def test_refund(rl, r):
    rl.gcra("k", 3, 1, 1000, cost=3)
    d = rl.gcra("k", 3, 1, 1000, refund=2)
    assert (d.allowed, d.remaining, d.reset_after_ms) == (True, 2, 1000)
    assert rl.fixed("f", 5, 60_000, cost=4).remaining == 1
    assert rl.fixed("f", 5, 60_000, refund=10).remaining == 5  # never past fresh


def test_partial_granted(rl, r):
    rl.gcra("k", 5, 1, 1000, cost=3)
    d = rl.gcra("k", 5, 1, 1000, cost=4, partial=True)
    assert (d.allowed, d.granted, d.remaining) == (True, 2, 0)
    d = rl.gcra("k", 5, 1, 1000, cost=4, partial=True)
    assert (d.allowed, d.granted) == (False, 0)
    q = rl.queue("q", 5, 1000, cost=2, partial=True)  # granted after delay_ms
    assert (q.delay_ms, q.granted) == (0, 2)


def test_reserve(rl, r):
    assert rl.fixed("f", 10, 60_000, cost=6, reserve=4).allowed
    d = rl.fixed("f", 10, 60_000, reserve=4)
    assert d.allowed is False
    assert rl.fixed("f", 10, 60_000).allowed  # interactive traffic may use it all
    res = rl.all([("a", Rule.fixed(10, 60_000, reserve=9))])
    assert res.allowed


def test_block(rl, r):
    for _ in range(2):
        assert rl.fixed("login", 2, 60_000, block_ms=900_000).allowed
    d = rl.fixed("login", 2, 60_000, block_ms=900_000)
    assert d.allowed is False and d.retry_after_ms >= 900_000
    assert rl.info("login")["blocked_until_ms"] == NOW_MS + 900_000


def test_stagger(rl, r):
    from redis.crc import key_slot

    key, w = "stag", 60_000
    offset = key_slot(key.encode()) * w // 16384
    d = rl.fixed(key, 5, w, stagger=True)
    start = (NOW_MS - offset) // w * w + offset
    assert d.reset_after_ms == start + w - NOW_MS
