"""Policies (issue 26): the operator's API (RL.POLICY), RL.ALLOW, POLICY rules in all(), the
middleware's policy-named limits over real HTTP (Flask and FastAPI), and a 3-node cluster
(every primary, drift). The shared cases are in clients/conformance/cases/policy.json."""

from __future__ import annotations

from typing import Any, List

import httpx
import pytest
import redis
import redis.asyncio

import services
from conftest import NOW_MS, run
from redis_ratelimit import (AsyncRateLimiter, Config, Decision, Event, Limit, Policy,
                             PolicyEntry, PolicyInfo, PolicyNodesError, PolicyStats,
                             PolicyVersion, RateLimiter, Request, Rule)
from redis_ratelimit.middleware import Engine, run_async, run_sync
from redis_ratelimit.policies import parse_allow, parse_rule, rule_args


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def rl(request, r, redis_port):
    c = redis.Redis(port=redis_port, protocol=request.param)
    yield RateLimiter(c)
    c.close()


# ------------------------------------------------------------------ pure parts


def test_rule_args_and_parse_rule():
    assert rule_args(Rule.gcra(10, 1, 1000)) == ["GCRA", 10, 1, 1000]
    assert rule_args(Rule.fixed(5, 60_000, stagger=True, block_ms=9000)) == \
        ["FIXED", 5, 60_000, "STAGGER", "BLOCK", 9000]
    assert rule_args("CONCURRENCY 5 30000") == ["CONCURRENCY", "5", "30000"]
    with pytest.raises(ValueError, match="options of each call"):
        rule_args(Rule.gcra(10, 1, 1000, cost=2))
    assert parse_rule("GCRA 3 1 20000") == Rule.gcra(3, 1, 20_000)
    assert parse_rule("SLIDING 5 60000 STAGGER BLOCK 1000") == \
        Rule.sliding(5, 60_000, stagger=True, block_ms=1000)
    assert parse_rule("QUEUE 3 1000") == Rule.queue(3, 1000)
    assert parse_rule("CONCURRENCY 2 1000") is None and parse_rule("") is None
    assert Policy("api", cost=2, reserve=1).all_args() == ["POLICY", "api", "COST", 2,
                                                           "RESERVE", 1]
    assert Policy("api").command_args("k") == ["RL.ALLOW", "k", "api"]
    # the reply's shape tells the algorithm's extra fields
    assert parse_allow([1, 3, 2, 0, 1000, 0]).delay_ms == 0
    assert parse_allow([1, 3, 2, 0, 1000, b"17-0"]).token == "17-0"
    assert parse_allow([0, 3, 0, 5, 1000, None]).token is None
    assert parse_allow([1, 3, 2, 0, 1000, 4, 1], partial=True) == \
        Decision(True, 3, 2, 0, 1000, 4, None, 1)
    with pytest.raises(ValueError, match="BLOCK is part of the policy"):
        Limit("x", Policy("x"), services.ip_of, block_ms=1000)


# ------------------------------------------------------------------ the operator's API


def test_policy_admin_api(rl, r):
    p = rl.policies
    assert p.get("api") is None and p.list() == []
    assert p.set("api", Rule.gcra(3, 1, 20_000)) == 1
    assert p.set("tight", "GCRA 1 1 20000", shadow=True) == 1
    info = p.get("api")
    assert isinstance(info, PolicyInfo)
    assert (info.name, info.version, info.rule, info.mode, info.candidate_version,
            info.candidate_rule, info.rollout) == ("api", 1, "GCRA 3 1 20000", "enforce", 0,
                                                   "", 0)
    assert len(info.digest) == 16
    assert p.get("tight").mode == "shadow"
    assert p.set("api", Rule.gcra(5, 1, 20_000), rollout=50) == 2
    info = p.get("api")
    assert (info.version, info.candidate_version, info.candidate_rule, info.rollout) == \
        (1, 2, "GCRA 5 1 20000", 50)
    entries = p.list()
    assert [e.name for e in entries] == ["api", "tight"]
    assert all(isinstance(e, PolicyEntry) for e in entries)
    assert entries[0].candidate_version == 2 and entries[0].digest == info.digest
    assert [e.name for e in p.list("ti*")] == ["tight"]
    hist = p.history("api")
    assert [(h.version, h.status) for h in hist] == [(2, "candidate"), (1, "current")]
    assert isinstance(hist[0], PolicyVersion) and hist[0].set_ms == NOW_MS
    assert p.rollout("api", 100) == 2
    assert p.get("api").rule == "GCRA 5 1 20000"
    assert p.rollback("api") == 3
    assert p.get("api").rule == "GCRA 3 1 20000"
    # statistics: who the shadow policy would refuse
    for _ in range(3):
        assert rl.allow("rl:tight:alice", "tight").allowed  # shadow: never refuses
    st = p.stats("tight")
    assert isinstance(st, PolicyStats)
    assert (st.requests, st.admitted, st.shadow_refusals, st.units_spent) == (3, 1, 2, 1)
    assert st.top_refused == (("rl:tight:alice", 2),)
    assert p.stats("tight", reset=True).requests == 3
    assert p.stats("tight").requests == 0
    with pytest.raises(redis.ResponseError, match="burst must be a positive integer"):
        p.set("bad", "GCRA 0 1 1000")
    with pytest.raises(redis.ResponseError, match="no such policy"):
        p.rollout("nope", 5)
    assert p.delete("api") is True and p.delete("api") is False
    assert p.get("api") is None


def test_allow(rl, r):
    p = rl.policies
    p.set("api", Rule.gcra(5, 1, 20_000))
    p.set("q", Rule.queue(3, 20_000))
    p.set("c", "CONCURRENCY 2 20000")
    assert rl.allow("k", "api", cost=2) == Decision(True, 5, 3, 0, 40_000)
    assert rl.allow("k", "api", cost=0) == Decision(True, 5, 3, 0, 40_000)
    assert rl.allow("k", "api", cost=3, dryrun=True) == Decision(True, 5, 0, 0, 100_000)
    assert rl.allow("k", "api", cost=4) == Decision(False, 5, 3, 20_000, 40_000)
    assert rl.allow("k", "api", cost=4, partial=True).granted == 3
    assert rl.allow("k", "api", refund=3).remaining == 3
    assert rl.allow("k2", "api", reserve=4).allowed
    assert not rl.allow("k2", "api", reserve=4).allowed  # 1 left after the reserve of 4
    assert rl.allow("kq", "q") == Decision(True, 3, 2, 0, 20_000, 0)
    assert rl.allow("kq", "q").delay_ms == 20_000
    lease = rl.allow("kc", "c")
    assert lease.allowed and lease.token
    assert rl.release("kc", lease.token)
    with pytest.raises(redis.ResponseError, match="no such policy 'nope'"):
        rl.allow("k", "nope")
    assert not r.exists("rl:nope")
    # POLICY rules in all(), beside rules with numbers
    res = rl.all([("a", Policy("api", cost=2)), ("b", Rule.fixed(1, 60_000)),
                  ("aq", Policy("q"))])
    assert res.allowed and res.refused_by == 0
    assert res.decisions == (Decision(True, 5, 3, 0, 40_000), Decision(True, 1, 0, 0, 60_000),
                             Decision(True, 3, 2, 0, 20_000, 0))
    res = rl.all([("a", Policy("api")), ("b", Rule.fixed(1, 60_000))])
    assert (res.allowed, res.refused_by) == (False, 2)
    with pytest.raises(redis.ResponseError, match="no CONCURRENCY policy"):
        rl.all([("a", Policy("c"))])


@pytest.mark.parametrize("protocol", [2, 3])
def test_async_policies(r, redis_port, protocol):
    async def main():
        c = redis.asyncio.Redis(port=redis_port, protocol=protocol)
        rl = AsyncRateLimiter(c)
        try:
            assert await rl.policies.set("api", "GCRA 3 1 20000") == 1
            assert (await rl.policies.get("api")).rule == "GCRA 3 1 20000"
            assert [e.name for e in await rl.policies.list()] == ["api"]
            assert await rl.allow("k", "api") == Decision(True, 3, 2, 0, 20_000)
            res = await rl.all([("k", Policy("api", cost=2)), ("j", Rule.fixed(1, 1000))])
            assert res.allowed and res.decisions[0].remaining == 0
            assert [h.version for h in await rl.policies.history("api")] == [1]
            assert (await rl.policies.stats("api")).requests == 2
            assert await rl.policies.set("api", Rule.gcra(4, 1, 20_000)) == 2
            assert await rl.policies.rollback("api") == 3
            assert await rl.policies.delete("api") is True
            with pytest.raises(redis.ResponseError, match="no such policy"):
                await rl.allow("k", "api")
        finally:
            await c.aclose()

    run(main())


# ------------------------------------------------------------------ middleware over HTTP

FRAMEWORKS = ["flask", "fastapi"]


@pytest.fixture(params=FRAMEWORKS)
def serve(request, redis_port, serve_wsgi, serve_asgi):
    def start(cfg: Config) -> str:
        url = f"redis://127.0.0.1:{redis_port}/0"
        if request.param == "fastapi":
            return serve_asgi(services.fastapi_app(url, cfg)).url
        return serve_wsgi(services.flask_app(url, cfg)).url

    return start


def _user(req: Request):
    return req.header("x-user")


def test_unknown_policy_fails_open_reports_and_keeps_the_breaker_closed(r, serve, http):
    events: List[Event] = []
    cfg = Config(limits=[Limit("user", Policy("missing"), _user),
                         Limit("strict", Policy("missing"), lambda q: q.header("x-strict"),
                               fail_open=False)],
                 on_decision=events.append, breaker_ms=60_000)
    base = serve(cfg)
    resp = http.get(base + "/", headers={"x-user": "alice"})
    assert resp.status_code == 200 and "RateLimit" not in resp.headers
    (ev,) = events
    assert (ev.limit, ev.source, ev.refused) == ("user", "fail-open", False)
    assert "no such policy 'missing'" in str(ev.error)
    resp = http.get(base + "/", headers={"x-strict": "bob"})
    assert resp.status_code == 503 and resp.headers["Retry-After"] == "1"
    assert events[-1].source == "fail-closed"
    # Redis answered: the breaker (60 s) did not open, the next request asks Redis again
    r.execute_command("RL.POLICY", "SET", "missing", "GCRA", "3", "1", "20000")
    resp = http.get(base + "/", headers={"x-user": "alice"})
    assert resp.headers["RateLimit"] == '"user";r=2;t=20'
    assert events[-1].source == "redis"


def test_rule_cached_then_read_again_after_policy_refresh_ms(r, serve, http):
    """A change that keeps the limit (here the period) is seen once the cached rule is older
    than policy_refresh_ms; a change of the limit is seen at once (the conformance case)."""
    now = [1000.0]
    r.execute_command("RL.POLICY", "SET", "api", "GCRA", "3", "1", "20000")
    base = serve(Config(limits=[Limit("user", Policy("api"), _user)], clock=lambda: now[0]))
    def gets() -> int:
        return r.info("commandstats").get("cmdstat_rl.policy|get", {}).get("calls", 0)

    before = gets()
    resp = http.get(base + "/", headers={"x-user": "alice"})
    assert resp.headers["RateLimit-Policy"] == '"user";q=3;w=60'
    r.execute_command("RL.POLICY", "SET", "api", "GCRA", "3", "1", "40000")
    resp = http.get(base + "/", headers={"x-user": "bob"})
    assert resp.headers["RateLimit-Policy"] == '"user";q=3;w=60'  # cached for 5 s
    now[0] += 5.0
    resp = http.get(base + "/", headers={"x-user": "carol"})
    assert resp.headers["RateLimit-Policy"] == '"user";q=3;w=120'
    assert gets() - before == 2  # one GET per read: the first request, the one after 5 s


def test_rollout_candidate_header_follows_the_version_of_the_key(r, rl, serve, http):
    r.execute_command("RL.POLICY", "SET", "api", "GCRA", "3", "1", "20000")
    r.execute_command("RL.POLICY", "SET", "api", "GCRA", "5", "1", "40000", "ROLLOUT", "50")
    by_limit: dict = {}
    for i in range(64):  # which users the candidate applies to (a fixed hash of the key)
        d = rl.allow(f"rl:user:u{i}", "api", dryrun=True)
        by_limit.setdefault(d.limit, f"u{i}")
    assert set(by_limit) == {3, 5}
    base = serve(Config(limits=[Limit("user", Policy("api"), _user)]))
    resp = http.get(base + "/", headers={"x-user": by_limit[3]})
    assert (resp.headers["RateLimit-Policy"], resp.headers["RateLimit"]) == \
        ('"user";q=3;w=60', '"user";r=2;t=20')
    resp = http.get(base + "/", headers={"x-user": by_limit[5]})
    assert (resp.headers["RateLimit-Policy"], resp.headers["RateLimit"]) == \
        ('"user";q=5;w=200', '"user";r=4;t=40')
    # a shadow candidate: no item for the keys it applies to
    r.execute_command("RL.POLICY", "SET", "api", "GCRA", "3", "1", "20000")
    r.execute_command("RL.POLICY", "SET", "api", "GCRA", "1", "1", "40000", "SHADOW",
                      "ROLLOUT", "50")
    for i in range(64):
        if rl.allow(f"rl:user:s{i}", "api", dryrun=True).limit == 1:
            resp = http.get(base + "/", headers={"x-user": f"s{i}"})
            assert resp.status_code == 200 and "RateLimit" not in resp.headers
            break
    else:
        pytest.fail("no key on the candidate")


def test_queue_policy_beside_a_numbers_limit(r, serve, http):
    events: List[Event] = []
    r.execute_command("RL.POLICY", "SET", "shape", "QUEUE", "2", "20000")
    base = serve(Config(limits=[Limit("shape", Policy("shape"), _user),
                                Limit("n", Rule.fixed(9, 60_000), _user)],
                        on_decision=events.append))
    resp = http.get(base + "/", headers={"x-user": "a"})
    assert resp.headers["RateLimit-Policy"] == '"shape";q=2;w=40, "n";q=9;w=60'
    assert events[0].decision.delay_ms == 0
    assert resp.headers["RateLimit"] == '"shape";r=1;t=20, "n";r=8;t=60'
    # (a second request of "a" would wait 20 s: QUEUE's delay_ms, honoured as for a Rule)


# ------------------------------------------------------------------ cluster


def test_cluster_policies_on_every_primary_and_drift(rc, cluster_ports):
    rl = RateLimiter(rc)
    primaries = sorted(n.name for n in rc.get_primaries())
    assert len(primaries) == 3
    versions = rl.policies.set("api", Rule.gcra(3, 1, 20_000))
    assert versions == {n: 1 for n in primaries}
    (entry,) = rl.policies.list()
    assert entry.name == "api" and not entry.drift
    assert sorted(entry.nodes) == primaries
    assert len({e.digest for e in entry.nodes.values()}) == 1
    assert entry.value.version == 1
    got = rl.policies.get("api")
    assert not got.drift and got.value.rule == "GCRA 3 1 20000"
    # RL.ALLOW on keys of every node: each node has the policy
    keys = [f"rl:user:u{i}" for i in range(30)]
    assert {rc.keyslot(k) // 5461 for k in keys} == {0, 1, 2}
    assert all(rl.allow(k, "api") == Decision(True, 3, 2, 0, 20_000) for k in keys)
    # an operator sets it on one node only: drift
    port = cluster_ports[1]
    one = redis.Redis(port=port, decode_responses=True)
    try:
        one.execute_command("RL.POLICY", "SET", "api", "GCRA", "5", "1", "20000")
        one.execute_command("RL.POLICY", "SET", "only-here", "FIXED", "1", "1000")
    finally:
        one.close()
    listed = {e.name: e for e in rl.policies.list()}
    assert listed["api"].drift and listed["api"].value is None
    node = f"127.0.0.1:{port}"
    assert listed["api"].nodes[node].version == 2
    assert {n: e.version for n, e in listed["api"].nodes.items() if n != node} == \
        {n: 1 for n in primaries if n != node}
    assert listed["only-here"].drift
    assert [n for n, e in listed["only-here"].nodes.items() if e is not None] == [node]
    got = rl.policies.get("api")
    assert got.drift and got.nodes[node].rule == "GCRA 5 1 20000"
    # a write some primaries refuse: every answer, the others applied it
    with pytest.raises(PolicyNodesError) as err:
        rl.policies.rollout("only-here", 50)
    assert sorted(err.value.replies) == primaries
    # setting it again everywhere ends the drift (version 2 on two nodes, 3 on one: the
    # digests cover the version number, so they still differ)
    rl.policies.set("api", Rule.gcra(3, 1, 20_000))
    assert rl.policies.get("api").drift
    assert rl.policies.delete("api") == {n: True for n in primaries}
    rl.policies.set("api", Rule.gcra(3, 1, 20_000))
    assert not rl.policies.get("api").drift
    assert set(rl.policies.history("api")) == set(primaries)
    assert all(isinstance(s, PolicyStats) for s in rl.policies.stats("api").values())
    assert rl.policies.get("nothing") is None


def test_cluster_async_policies_and_middleware(rc, cluster_ports):
    async def main():
        c = redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster_ports[0])
        try:
            rl = AsyncRateLimiter(c)
            res = await rl.policies.set("api", "GCRA 3 1 20000")
            assert sorted(res.values()) == [1, 1, 1]
            (entry,) = await rl.policies.list()
            assert not entry.drift
            return (await run_async(engine, c, plan)).headers
        finally:
            await c.aclose()

    engine = Engine(Config(limits=[Limit("user", Policy("api"), _user),
                                   Limit("org", Rule.fixed(3, 60_000),
                                         lambda q: q.header("x-org"))]))
    req = Request("GET", "/", {"x-user": ["alice"], "x-org": ["acme"]}, "127.0.0.1")
    plan = engine.plan(req)
    assert len(engine.batches(plan, cluster=True)) == 2  # no hash tag: one per limit
    headers = run(main())
    assert headers["RateLimit"] == '"user";r=2;t=20, "org";r=2;t=60'
    out = run_sync(engine, rc, plan)
    assert out.headers["RateLimit"] == '"user";r=1;t=20, "org";r=1;t=60'
