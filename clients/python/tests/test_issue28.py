"""Issue 28 over real HTTP with the real frameworks and a real server (the package's own
pytest plugin, ``ratelimit_server`` / ``ratelimit_redis``): leased allowance (WSGI, ASGI,
the typed API), local refusals, key lists, the Flask and Django decorators, the FastAPI
dependency, limit strings, and the testing helpers themselves. The conformance cases
(lease.json, local.json, ergonomics.json) check the exact numbers; these check what the
cases cannot say (concurrency, sweeps, rule changes, lifespans, the decorators' APIs).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from typing import Any, Dict, List, Optional

import httpx
import pytest
import redis

from conftest import free_port
from redis_ratelimit import (AsyncLeasedLimiter, Config, Event, Lease, LeasedLimiter, Limit,
                             Request, Rule, connect, connect_async)
from redis_ratelimit.lease import LocalRefusals
from redis_ratelimit.testing import CLOCK_MS, RedisServer, ServerNotFound, find_module


class Clock:
    """The package clock following the module's: advance() moves both."""

    def __init__(self, srv: RedisServer):
        self.srv = srv
        self.now = CLOCK_MS

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.srv.clock_advance(ms)
        self.now += ms


def by_user(req: Request) -> Optional[str]:
    return req.header("x-user")


def peek(r: Any, key: str, rule: Rule) -> List[int]:
    """The key's state as a cost-0 request sees it (nothing written)."""
    return [int(x) for x in r.execute_command(*rule.with_options(cost=0).command_args(key))[:5]]


def until(cond: Any, what: str, timeout: float = 10.0) -> None:
    """Polls ``cond`` (no sleeps to wait for a condition: poll it)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def flask_app(srv: RedisServer, cfg: Config) -> Any:
    from flask import Flask

    from redis_ratelimit.wsgi import RateLimitMiddleware

    app = Flask("leased")

    @app.route("/", defaults={"path": ""})
    @app.route("/<path:path>")
    def ok(path: str) -> Any:
        return "ok"

    mw = RateLimitMiddleware(app.wsgi_app, redis=connect(srv.url, 1.0), config=cfg)
    app.wsgi_app = mw  # type: ignore[method-assign]
    return app, mw


# ------------------------------------------------------------------ leases: the middleware


def test_lease_bound_two_processes_concurrently(ratelimit_server, ratelimit_redis,
                                                serve_wsgi):
    """Two processes (apps) hammer one key with 40 requests each from 8 threads: exactly
    the rule's 20 are admitted in all (never more: a claim is counted when made), with a
    claim per chunk of 5, not a call per request."""
    clock = Clock(ratelimit_server)
    rule = Rule.gcra(20, 20, 60_000)
    cfg = Config(limits=[Limit("user", rule, by_user, lease=Lease(5, 30_000))],
                 clock_ms=clock, lease_sweep_ms=0)
    apps = [flask_app(ratelimit_server, cfg) for _ in range(2)]
    urls = [serve_wsgi(app).url for app, _ in apps]

    def hit(url: str) -> int:
        with httpx.Client(timeout=10) as c:
            return c.get(url + "/x", headers={"x-user": "alice"}).status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(hit, [u for u in urls for _ in range(40)]))
    assert codes.count(200) == 20 and codes.count(429) == 60
    assert peek(ratelimit_redis, "rl:user:alice", rule)[2] == 0
    # at least 4 claims of 5; every other call a refused claim (one per 429 at most)
    assert 4 <= ratelimit_server.calls() <= 4 + 60 + 2
    for _, mw in apps:
        mw.close()  # nothing held: nothing given back
    assert peek(ratelimit_redis, "rl:user:alice", rule)[2] == 0


def test_lease_early_refusal_then_close_gives_back(ratelimit_server, ratelimit_redis,
                                                   serve_wsgi, http):
    """The bound's other half: p2 is refused while p1 holds unspent units, and admitted
    again once p1 closes (its units refunded)."""
    clock = Clock(ratelimit_server)
    rule = Rule.fixed(10, 60_000)
    cfg = Config(limits=[Limit("user", rule, by_user, lease=Lease(4, 30_000))],
                 clock_ms=clock, lease_sweep_ms=0)
    (a1, m1), (a2, m2) = flask_app(ratelimit_server, cfg), flask_app(ratelimit_server, cfg)
    u1, u2 = serve_wsgi(a1).url, serve_wsgi(a2).url
    h = {"x-user": "bob"}
    assert http.get(u1 + "/", headers=h).status_code == 200  # p1 holds 3
    codes = [http.get(u2 + "/", headers=h).status_code for _ in range(7)]
    assert codes == [200] * 6 + [429]  # 10 - 4 claimed by p1 = 6; then early
    assert ratelimit_server.calls() == 1 + 2 + 1  # p1's claim, p2's 2 claims, 1 refused
    m1.close()
    assert ratelimit_server.calls() == 5  # REFUND 3
    assert http.get(u2 + "/", headers=h).status_code == 200  # the given-back units


def test_lease_rule_change_gives_back(ratelimit_server, ratelimit_redis, serve_wsgi, http):
    """A limit computed per request: when its rule changes, the units held under the old
    rule are given back (REFUND with the old rule) before the new rule claims."""
    clock = Clock(ratelimit_server)

    def plan_rule(req: Request) -> Rule:
        return Rule.fixed(20, 60_000) if req.header("x-plan") == "pro" else Rule.fixed(10, 60_000)

    cfg = Config(limits=[Limit("user", plan_rule, by_user, lease=Lease(5, 30_000))],
                 clock_ms=clock, lease_sweep_ms=0)
    app, mw = flask_app(ratelimit_server, cfg)
    url = serve_wsgi(app).url
    r1 = http.get(url + "/", headers={"x-user": "al", "x-plan": "pro"})
    assert r1.headers["RateLimit"] == '"user";r=19;t=60'  # count 5, holds 4
    r2 = http.get(url + "/", headers={"x-user": "al", "x-plan": "free"})
    # REFUND 4 under the old rule (count 1), then COST 5 PARTIAL under the new (count 6)
    assert ratelimit_server.calls() == 3
    assert r2.headers["RateLimit"] == '"user";r=8;t=60'  # remaining 4 + 4 held
    assert peek(ratelimit_redis, "rl:user:al", Rule.fixed(10, 60_000))[2] == 4
    with pytest.raises(ValueError, match="lease is only for"):
        mw.engine.plan(Request("GET", "/", {"x-user": ["al"]}, "", {}),
                       [Limit("bad", lambda req: Rule.sliding(5, 60_000), by_user,
                              lease=Lease(2))])


def test_lease_peek_claims_nothing(ratelimit_server, ratelimit_redis, serve_wsgi, http):
    """Cost 0 on a leased limit is a peek: without a lease it is sent as COST 0 (nothing
    claimed); with one it is answered from the lease."""
    clock = Clock(ratelimit_server)
    rule = Rule.fixed(10, 60_000)
    cfg = Config(limits=[Limit("user", rule, by_user, lease=Lease(4, 30_000),
                               cost=lambda req: int(req.header("x-cost") or 1))],
                 clock_ms=clock, lease_sweep_ms=0)
    app, mw = flask_app(ratelimit_server, cfg)
    url = serve_wsgi(app).url
    r = http.get(url + "/", headers={"x-user": "pk", "x-cost": "0"})
    assert r.status_code == 200 and r.headers["RateLimit"] == '"user";r=10;t=0'
    assert ratelimit_server.calls() == 1 and not ratelimit_redis.exists("rl:user:pk")
    http.get(url + "/", headers={"x-user": "pk"})  # claims 4, holds 3
    r = http.get(url + "/", headers={"x-user": "pk", "x-cost": "0"})
    assert r.headers["RateLimit"] == '"user";r=9;t=60'  # from the lease: 6 + 3
    assert ratelimit_server.calls() == 2
    mw.close()
    assert peek(ratelimit_redis, "rl:user:pk", rule)[2] == 9


def test_lease_lapse_given_back_without_traffic_wsgi(ratelimit_server, ratelimit_redis,
                                                     serve_wsgi, http):
    """The background sweep gives a lapsed lease back with no request for it."""
    clock = Clock(ratelimit_server)
    rule = Rule.gcra(10, 10, 60_000)
    cfg = Config(limits=[Limit("user", rule, by_user, lease=Lease(5, 20_000))],
                 clock_ms=clock, lease_sweep_ms=10)
    app, mw = flask_app(ratelimit_server, cfg)
    url = serve_wsgi(app).url
    assert http.get(url + "/", headers={"x-user": "cy"}).status_code == 200
    assert peek(ratelimit_redis, "rl:user:cy", rule)[2] == 5  # 5 claimed, 4 held
    clock.advance(20_000)  # the lease lapses: 20 s later 2 units came back, 4 are given back
    until(lambda: peek(ratelimit_redis, "rl:user:cy", rule)[2] == 10, "the sweep's refund")
    mw.close()


def test_lease_asgi_sweep_and_lifespan_shutdown(ratelimit_server, ratelimit_redis):
    """ASGI: the sweep is a task on the server's loop; the lifespan's shutdown gives every
    lease back (uvicorn with lifespan on, stopped as a deployment stops it)."""
    import uvicorn
    from fastapi import FastAPI

    from redis_ratelimit.asgi import RateLimitMiddleware

    clock = Clock(ratelimit_server)
    rule = Rule.tokenbucket(10, 1, 6_000)
    cfg = Config(limits=[Limit("user", rule, by_user, lease=Lease(4, 20_000))],
                 clock_ms=clock, lease_sweep_ms=10)
    inner = FastAPI()

    @inner.get("/")
    async def ok() -> str:
        return "ok"

    app = RateLimitMiddleware(inner, redis=connect_async(ratelimit_server.url, 1.0),
                              config=cfg)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    t = threading.Thread(target=server.run, daemon=True)
    t.start()
    until(lambda: server.started, "uvicorn")
    url = f"http://127.0.0.1:{port}/"
    with httpx.Client(timeout=10) as c:
        assert c.get(url, headers={"x-user": "di"}).status_code == 200
        assert peek(ratelimit_redis, "rl:user:di", rule)[2] == 6
        clock.advance(20_000)  # lapsed: the task gives back 3; the bucket refilled 3
        until(lambda: peek(ratelimit_redis, "rl:user:di", rule)[2] == 10, "the task's refund")
        assert c.get(url, headers={"x-user": "ed"}).status_code == 200  # ed holds 3
    assert peek(ratelimit_redis, "rl:user:ed", rule)[2] == 6
    server.should_exit = True
    t.join(10)
    assert not t.is_alive()
    assert peek(ratelimit_redis, "rl:user:ed", rule)[2] == 9  # shutdown gave back 3


# ------------------------------------------------------------------ leases: the typed API


def test_leased_limiter_sync_adaptive_and_close(ratelimit_server, ratelimit_redis):
    clock = Clock(ratelimit_server)
    rule = Rule.gcra(100, 100, 60_000)
    hot = LeasedLimiter(connect(ratelimit_server.url), rule, Lease(8, 10_000, adaptive=True),
                        clock_ms=clock)
    for _ in range(24):
        assert hot.rate("t:1").allowed
    # claims of 1, 2, 4, 8, 8 then 8 at the 24th: the chunk doubles when a lease runs out
    assert ratelimit_server.calls() == 6
    assert hot.held("t:1") == 7
    clock.advance(10_000)  # lapsed with 7 left: given back, the next chunk halves (4)
    d = hot.rate("t:1")
    assert d.allowed and hot.held("t:1") == 3
    assert ratelimit_server.calls() == 8  # REFUND 7, COST 4 PARTIAL
    hot.close()
    assert ratelimit_server.calls() == 9
    assert peek(ratelimit_redis, "t:1", rule)[2] == 100 - 25 + 16  # 10 s brought back 16
    with pytest.raises(ValueError, match="lease is only for"):
        LeasedLimiter(None, Rule.log(10, 1000), Lease(2))


def test_leased_limiter_async(ratelimit_server, ratelimit_redis):
    clock = Clock(ratelimit_server)
    rule = Rule.fixed(5, 60_000)

    async def main() -> List[bool]:
        c = connect_async(ratelimit_server.url, 1.0)
        async with AsyncLeasedLimiter(c, rule, Lease(3, 30_000), clock_ms=clock) as hot:
            out = [(await hot.rate("k")).allowed for _ in range(7)]
            assert hot.held("k") == 0
        await c.aclose()
        return out

    assert asyncio.run(main()) == [True] * 5 + [False] * 2
    assert ratelimit_server.calls() == 2 + 2  # claims of 3 and 2 (partial), two refusals


# ------------------------------------------------------------------ local refusals, key lists


def test_local_refusals_metrics_and_bounded_cache(ratelimit_server, ratelimit_redis,
                                                  serve_wsgi, http):
    clock = Clock(ratelimit_server)
    events: List[Event] = []
    cfg = Config(limits=[Limit("user", Rule.fixed(1, 60_000), by_user,
                               deny=["mallory"])],
                 clock_ms=clock, local_refusals=2, on_decision=events.append)
    app, mw = flask_app(ratelimit_server, cfg)
    url = serve_wsgi(app).url
    for u in ("a", "b", "c"):
        assert [http.get(url + "/", headers={"x-user": u}).status_code
                for _ in range(2)] == [200, 429]
    assert len(mw.engine.local) == 2  # bounded: a's entry made room for c's
    assert http.get(url + "/", headers={"x-user": "c"}).status_code == 429
    assert events[-1].source == "local" and events[-1].refused
    assert events[-1].decision is not None and events[-1].decision.retry_after_ms == 60_000
    calls = ratelimit_server.calls()
    assert http.get(url + "/", headers={"x-user": "a"}).status_code == 429  # evicted: asked
    assert ratelimit_server.calls() == calls + 1
    r = http.get(url + "/", headers={"x-user": "mallory"})
    assert r.status_code == 403 and "RateLimit" not in r.headers
    assert r.json()["title"] == "Forbidden"
    assert events[-1].source == "deny" and events[-1].refused
    assert ratelimit_server.calls() == calls + 1


def test_local_refusals_cache_drops_the_soonest():
    cache = LocalRefusals(2)
    rule = Rule.fixed(1, 60_000)
    cache.refused(("u", "a"), 1, 5_000, rule, 0)
    cache.refused(("u", "b"), 1, 1_000, rule, 0)
    cache.refused(("u", "c"), 1, 3_000, rule, 0)  # full: b (ends at 1000) goes
    assert cache.check(("u", "b"), 1, 10) is None
    assert cache.check(("u", "a"), 1, 10) == (4_990, rule)
    assert cache.check(("u", "c"), 0, 10) is None  # a smaller cost is asked
    cache.admitted(("u", "a"))
    assert cache.check(("u", "a"), 1, 10) is None
    assert cache.check(("u", "c"), 1, 3_000) is None  # ended
    with pytest.raises(ValueError):
        Config(local_refusals=0)


# ------------------------------------------------------------------ Flask decorator


def test_flask_decorator(ratelimit_server, ratelimit_redis, serve_wsgi, http):
    from flask import Flask, jsonify

    from redis_ratelimit.flask import Limiter

    clock = Clock(ratelimit_server)
    limiter = Limiter(connect(ratelimit_server.url, 1.0), key=by_user, clock_ms=clock,
                      lease_sweep_ms=0)
    app = Flask("deco")

    @app.get("/two")
    @limiter.limit("2/minute; 3/hour")
    def two() -> Any:
        return jsonify(ok=True)

    @app.get("/stacked")
    @limiter.limit("1/minute", name="burst", algorithm="fixed")
    @limiter.limit("5/hour", name="hourly", algorithm="fixed")
    def stacked() -> Any:
        return "ok"

    @app.get("/plan")
    @limiter.limit(lambda req: "1/minute" if req.header("x-plan") == "free" else "3/minute",
                   cost=lambda req: int(req.header("x-cost") or 1), algorithm="fixed")
    def plan() -> Any:
        return "ok"

    @app.get("/lists")
    @limiter.limit("1/minute", allow=["ops"], deny=["mallory"])
    def lists() -> Any:
        return "ok"

    @app.get("/hot")
    @limiter.limit("100/minute", algorithm="gcra", lease=Lease(10, 30_000))
    def hot() -> Any:
        return "ok"

    url = serve_wsgi(app).url
    A = {"x-user": "alice"}
    r = http.get(url + "/two", headers=A)
    assert r.status_code == 200 and r.json() == {"ok": True}
    assert r.headers["RateLimit"] == '"two-1";r=1;t=60, "two-2";r=2;t=3600'
    assert ratelimit_redis.exists("rl:two-1:alice", "rl:two-2:alice") == 2
    assert ratelimit_server.calls() == 1  # one RL.ALL for both
    http.get(url + "/two", headers=A)
    r = http.get(url + "/two", headers=A)
    assert r.status_code == 429 and r.json()["violated-policies"] == ["two-1"]
    assert r.headers["Content-Type"] == "application/problem+json"
    assert ratelimit_server.calls() == 3

    r = http.get(url + "/stacked", headers=A)
    assert r.headers["RateLimit"] == '"burst";r=0;t=60, "hourly";r=4;t=3600'
    assert ratelimit_server.calls() == 4  # stacked: one RL.ALL
    r = http.get(url + "/stacked", headers=A)
    assert r.status_code == 429 and r.headers["RateLimit"] == '"burst";r=0;t=60, "hourly";r=4;t=3600'

    assert http.get(url + "/plan", headers={**A, "x-plan": "free"}).status_code == 200
    assert http.get(url + "/plan", headers={"x-user": "bo", "x-cost": "3"}).headers[
        "RateLimit"] == '"plan";r=0;t=60'
    r = http.get(url + "/plan", headers={"x-user": "cy", "x-cost": "4"})
    assert r.status_code == 429 and "detail" in r.json()  # a cost above the limit: before Redis

    calls = ratelimit_server.calls()
    assert [http.get(url + "/lists", headers={"x-user": "ops"}).status_code
            for _ in range(3)] == [200] * 3
    assert http.get(url + "/lists", headers={"x-user": "mallory"}).status_code == 403
    assert ratelimit_server.calls() == calls

    for _ in range(10):
        assert http.get(url + "/hot", headers=A).status_code == 200
    assert ratelimit_server.calls() == calls + 1  # one claim of 10
    limiter.close()
    assert ratelimit_server.calls() == calls + 1  # nothing held: nothing given back
    with pytest.raises(ValueError, match="bad limit"):
        limiter.limit("10/fortnight")(lambda: None)


# ------------------------------------------------------------------ Django decorator


def test_django_decorator(ratelimit_server, ratelimit_redis, serve_wsgi, http):
    import services

    wsgi = services.django_app(ratelimit_server.url, Config())  # settings, no middleware limits
    from django.http import HttpResponse
    from django.urls import path

    from redis_ratelimit.django import Limiter, limit

    limiter = Limiter(connect(ratelimit_server.url, 1.0), key=by_user)

    @limiter.limit("2/minute", algorithm="fixed", deny=["mallory"])
    def view(request: Any) -> Any:
        return HttpResponse("ok")

    @limit("1 per minute", key=by_user, name="settings_view")  # the settings' limiter
    def view2(request: Any) -> Any:
        return HttpResponse("ok2")

    services.urlpatterns += [path("deco", view), path("deco2", view2)]
    url = serve_wsgi(wsgi).url
    A = {"x-user": "alice"}
    r = http.get(url + "/deco", headers=A)
    assert r.status_code == 200 and r.text == "ok"
    assert r.headers["RateLimit"] == '"view";r=1;t=60'
    assert http.get(url + "/deco", headers=A).status_code == 200
    r = http.get(url + "/deco", headers=A)
    assert r.status_code == 429 and r.json()["violated-policies"] == ["view"]
    assert r.headers["Retry-After"] == "60"
    assert http.get(url + "/deco", headers={"x-user": "mallory"}).status_code == 403
    assert http.get(url + "/deco2", headers=A).status_code == 200
    assert http.get(url + "/deco2", headers=A).status_code == 429
    assert ratelimit_redis.exists("rl:settings_view:alice") == 1
    assert ratelimit_server.calls() == 5


# ------------------------------------------------------------------ FastAPI dependency


def test_fastapi_dependency(ratelimit_server, ratelimit_redis, serve_asgi, http):
    from fastapi import Depends, FastAPI

    from redis_ratelimit.fastapi import Limiter

    clock = Clock(ratelimit_server)
    limiter = Limiter(connect_async(ratelimit_server.url, 1.0), key=by_user, clock_ms=clock,
                      lease_sweep_ms=0)
    app = FastAPI()
    limiter.install(app)

    @app.get("/search", dependencies=[Depends(limiter.limit("2/minute; 3/hour"))])
    async def search() -> Dict[str, bool]:
        return {"ok": True}

    @app.get("/cost", dependencies=[Depends(limiter.limit(
        lambda req: "5/minute", cost=lambda req: int(req.header("x-cost") or 1),
        algorithm="fixed", name="tokens", deny=["mallory"]))])
    async def cost() -> str:
        return "ok"

    @app.get("/hot", dependencies=[Depends(limiter.limit("100/minute", algorithm="fixed",
                                                         lease=Lease(10, 30_000)))])
    async def hot() -> str:
        return "ok"

    plain = FastAPI()  # without install(): FastAPI's HTTPException answer
    other = Limiter(connect_async(ratelimit_server.url, 1.0), key=by_user)  # its own loop

    @plain.get("/p", dependencies=[Depends(other.limit("1/minute", name="p"))])
    async def p() -> str:
        return "ok"

    url = serve_asgi(app).url
    A = {"x-user": "alice"}
    r = http.get(url + "/search", headers=A)
    assert r.status_code == 200 and r.json() == {"ok": True}
    assert r.headers["RateLimit"] == '"search-1";r=1;t=60, "search-2";r=2;t=3600'
    assert ratelimit_server.calls() == 1
    http.get(url + "/search", headers=A)
    r = http.get(url + "/search", headers=A)
    assert r.status_code == 429 and r.headers["Retry-After"] == "90"
    assert r.headers["Content-Type"] == "application/problem+json"
    assert r.json()["violated-policies"] == ["search-1"]

    r = http.get(url + "/cost", headers={**A, "x-cost": "4"})
    assert r.headers["RateLimit"] == '"tokens";r=1;t=60'
    assert http.get(url + "/cost", headers={**A, "x-cost": "2"}).status_code == 429
    r = http.get(url + "/cost", headers={"x-user": "mallory"})
    assert r.status_code == 403 and r.json()["title"] == "Forbidden"

    calls = ratelimit_server.calls()
    for _ in range(10):
        assert http.get(url + "/hot", headers=A).status_code == 200
    assert ratelimit_server.calls() == calls + 1

    purl = serve_asgi(plain).url
    assert http.get(purl + "/p", headers=A).status_code == 200
    r = http.get(purl + "/p", headers=A)
    # SLIDING 1 per minute: the count of this window weighs on the next one: 2 windows
    assert r.status_code == 429 and r.headers["Retry-After"] == "120"
    assert r.json()["detail"]["violated-policies"] == ["p"]


# ------------------------------------------------------------------ the testing helpers


def test_redis_server_context_manager_outside_the_fixture():
    with RedisServer() as srv:
        c = srv.client()
        srv.reset(1_900_000_000_000)
        assert int(c.execute_command("RL.CLOCK", "GET")) == 1_900_000_000_000
        srv.clock_advance(500)
        assert srv.clock_ms() == 1_900_000_000_500
        assert c.execute_command("RL.FIXED", "k", 1, 1000)[0] == 1
        assert srv.calls() == 1
        c.close()
        port = srv.port
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=port, socket_connect_timeout=1).ping()


def test_redis_server_not_found_is_clear(monkeypatch, tmp_path):
    with pytest.raises(ServerNotFound, match="does not exist"):
        RedisServer(module=str(tmp_path / "nope.so"))
    with pytest.raises(ServerNotFound, match="not found"):
        RedisServer(server=str(tmp_path / "no-server"))
    monkeypatch.setenv("REDIS_RATELIMIT_MODULE", str(tmp_path / "missing.so"))
    with pytest.raises(ServerNotFound, match="missing.so"):
        RedisServer()
    # the defaults: target/release/ in the current directory or above it
    monkeypatch.delenv("REDIS_RATELIMIT_MODULE")
    import os

    mod = os.environ.get("RL_MODULE")
    monkeypatch.delenv("RL_MODULE", raising=False)
    (tmp_path / "target" / "release").mkdir(parents=True)
    (tmp_path / "sub").mkdir()
    if mod:
        (tmp_path / "target" / "release" / "libredis_ratelimit.so").symlink_to(mod)
        monkeypatch.chdir(tmp_path / "sub")
        assert find_module() == str(tmp_path / "target" / "release" / "libredis_ratelimit.so")
    monkeypatch.chdir("/")
    if not os.path.isfile("/usr/lib/redis/modules/libredis_ratelimit.so"):
        with pytest.raises(ServerNotFound, match="REDIS_RATELIMIT_MODULE"):
            find_module()
