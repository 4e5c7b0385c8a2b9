"""A 3-node Redis Cluster of the same server binary, each node with the module: the API
(sync and asyncio cluster clients) and the middleware's RL.ALL under one hash tag."""

from __future__ import annotations

import pytest
import redis
from redis.exceptions import RedisClusterException

from conftest import run
from redis_ratelimit import (AsyncRateLimiter, Config, Decision, Limit, RateLimiter, Request,
                             Rule)
from redis_ratelimit.middleware import Engine, run_async, run_sync

def test_commands_route_by_key(rc):
    rl = RateLimiter(rc)
    keys = [f"user:{i}" for i in range(30)]  # spread over the three nodes
    assert {rc.keyslot(k) // 5461 for k in keys} == {0, 1, 2}
    for k in keys:
        assert rl.gcra(k, 2, 1, 1000) == Decision(True, 2, 1, 0, 1000)
        assert rl.info(k)["algorithm"] == "gcra"
    lease = rl.acquire("jobs", 1, 1000)
    assert rl.release("jobs", lease.token)


def test_all_needs_one_slot(rc):
    rl = RateLimiter(rc)
    res = rl.all([("rl:{org:7}:user:42", Rule.gcra(10, 1, 1000)),
                  ("rl:{org:7}", Rule.sliding(1000, 60_000))])
    assert res.allowed
    # CROSSSLOT: redis-py's cluster client refuses it before sending
    with pytest.raises(RedisClusterException, match="same key slot"):
        rl.all([("a", Rule.fixed(1, 1000)), ("b", Rule.fixed(1, 1000))])


def test_async_cluster(cluster_ports, rc):
    async def main():
        c = redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster_ports[0])
        try:
            rl = AsyncRateLimiter(c)
            for i in range(10):
                assert (await rl.fixed(f"k{i}", 1, 1000)).allowed
                assert not (await rl.fixed(f"k{i}", 1, 1000)).allowed
            res = await rl.all([("{t}a", Rule.fixed(1, 1000)), ("{t}b", Rule.fixed(1, 1000))])
            assert res.allowed
        finally:
            await c.aclose()

    run(main())


def _user(req: Request):
    return req.header("x-user")


def _org(req: Request):
    return req.header("x-org")


def test_middleware_engine_on_a_cluster(rc, cluster_ports):
    limits = [Limit("user", Rule.fixed(2, 60_000), _user),
              Limit("org", Rule.fixed(3, 60_000), _org)]
    req = Request("GET", "/", {"x-user": ["alice"], "x-org": ["acme"]}, "127.0.0.1")
    # with the org as hash tag: one atomic RL.ALL
    tagged = Engine(Config(limits=limits, hash_tag=_org))
    plan = tagged.plan(req)
    assert [c.key for c in plan.calls] == ["rl:{acme}:user:alice", "rl:{acme}:org:acme"]
    assert len(tagged.batches(plan, cluster=True)) == 1
    assert [run_sync(tagged, rc, plan).status for _ in range(3)] == [None, None, 429]
    # without a hash tag the keys live on different slots: one command per limit
    plain = Engine(Config(limits=limits))
    plan = plain.plan(req)
    assert len(plain.batches(plan, cluster=True)) == 2
    assert run_sync(plain, rc, plan).status is None

    async def via_async():
        c = redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster_ports[0])
        try:
            return (await run_async(plain, c, plan)).status
        finally:
            await c.aclose()

    assert run(via_async()) is None
    assert run(via_async()) == 429
