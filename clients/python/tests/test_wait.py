"""Waiting for room, pausing, probing (issue 27): ``wait_ms`` on the API (sync and asyncio,
RESP2 and RESP3), the read timeout and the pool of a held call, the middleware's ``wait_ms``
limits over real HTTP (Flask, Django, FastAPI), a 3-node cluster, and RL.PAUSE / RL.RESUME /
PROBE (skipped when the server has no RL.PAUSE). The module's clock is the test clock: a
held call is released by RL.CLOCK ADVANCE, never by sleeping. The shared cases are in
clients/conformance/cases/wait.json."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, List

import pytest
import redis
import redis.asyncio

import services
from conftest import run
from redis_ratelimit import (AsyncRateLimiter, Config, Decision, Event, Limit, Policy,
                             RateLimiter, Request, Route, Rule, connect, connect_async)
from redis_ratelimit._protocol import Options, acquire_args, pause_args
from redis_ratelimit.middleware import Engine
from redis_ratelimit.policies import parse_allow

SHORT = 0.05  # the request path's timeout (connect()'s default): a held call outlasts it


def waiting(c: Any) -> int:
    return int(c.info("ratelimit")["ratelimit_waiting_clients"])


def until_waiting(c: Any, n: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while waiting(c) != n:
        assert time.monotonic() < deadline, f"{waiting(c)} waiting clients, not {n}"
        time.sleep(0.002)


def in_thread(fn: Callable[[], Any]) -> Any:
    """fn() in a thread; .result() is its value (or raises its exception)."""
    pool = ThreadPoolExecutor(max_workers=1)
    fut = pool.submit(fn)
    pool.shutdown(wait=False)
    return fut


def has_pause(c: Any) -> bool:
    """Whether the server knows RL.PAUSE (COMMAND INFO, read raw: redis-py's parser of
    COMMAND replies fails on the nil of an unknown command)."""
    pool = c.connection_pool
    conn = pool.get_connection()
    try:
        conn.send_command("COMMAND", "INFO", "rl.pause")
        return any(x is not None for x in conn.read_response())
    finally:
        pool.release(conn)


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def rl(request, r, redis_port):
    """The request path's client: connect() with its 50 ms timeouts, RESP2 and RESP3."""
    c = connect(f"redis://127.0.0.1:{redis_port}/0", protocol=request.param)
    yield RateLimiter(c)
    c.close()


# ------------------------------------------------------------------ pure parts


def test_args_and_parsing():
    assert Options(wait_ms=500).args("GCRA") == ["WAIT", 500]
    assert Options(cost=2, probe=True, wait_ms=0).args("GCRA") == ["COST", 2, "PROBE", "WAIT", 0]
    with pytest.raises(ValueError, match="RL.ALL takes no wait_ms, probe"):
        Rule.gcra(1, 1, 1000, wait_ms=5, probe=True).all_args()
    with pytest.raises(ValueError, match="RL.ALL takes no wait_ms"):
        Policy("api", wait_ms=5).all_args()
    assert Policy("api", wait_ms=5).command_args("k") == ["RL.ALLOW", "k", "api", "WAIT", 5]
    assert acquire_args("j", 2, 1000, False, 300, True) == \
        ["RL.ACQUIRE", "j", 2, 1000, "PROBE", "WAIT", 300]
    assert pause_args("k", 5000) == ["RL.PAUSE", "k", 5000]
    assert pause_args("k", 5000, 1000) == ["RL.PAUSE", "k", 5000, "PROBE", 1000]
    # the extra fields' order: delay_ms, token, granted, probe, waited_ms
    q = Rule.queue(3, 1000, partial=True, probe=True, wait_ms=10)
    assert q.parse([1, 3, 2, 0, 1000, 7, 1, 1, 250]) == \
        Decision(True, 3, 2, 0, 1000, 7, None, 1, True, 250)
    assert Rule.gcra(1, 1, 1000).parse([1, 1, 0, 0, 1000]).waited_ms is None
    assert parse_allow([1, 1, 0, 0, 1000, b"9-1", 0, 40], probe=True, waited=True) == \
        Decision(True, 1, 0, 0, 1000, None, "9-1", None, False, 40)
    assert parse_allow([1, 3, 2, 0, 1000, 0, 2, 0], partial=True, waited=True) == \
        Decision(True, 3, 2, 0, 1000, 0, None, 2, None, 0)


def test_limit_wait_ms_validation_and_batches():
    key = lambda req: "a"  # noqa: E731
    with pytest.raises(ValueError, match="do not go together"):
        Limit("x", Rule.gcra(1, 1, 1000), key, wait_ms=100, block_ms=1000)
    with pytest.raises(ValueError, match="wait_ms must be"):
        Limit("x", Rule.gcra(1, 1, 1000), key, wait_ms=-1)
    cfg = Config(limits=[Limit("user", Rule.gcra(1, 1, 1000), key),
                         Limit("org", Rule.gcra(5, 1, 1000), key, wait_ms=2000),
                         Limit("new", Rule.gcra(5, 1, 1000), key, wait_ms=2000, shadow=True)])
    eng = Engine(cfg)
    plan = eng.plan(Request("GET", "/", {}, "1.2.3.4"))
    batches = eng.batches(plan, cluster=False)
    # user alone in its own command (an RL.ALL of one is its rate command), then org with
    # WAIT, gated; the shadow limit without WAIT
    assert [b.args for b in batches] == [
        ["RL.GCRA", "rl:user:a", 1, 1, 1000],
        ["RL.GCRA", "rl:org:a", 5, 1, 1000, "WAIT", 2000],
        ["RL.GCRA", "rl:new:a", 5, 1, 1000]]
    assert [(b.gated, b.wait_ms) for b in batches] == [(False, None), (True, 2000),
                                                       (False, None)]


# ------------------------------------------------------------------ the API, sync


def test_held_then_admitted_beyond_the_short_timeout(rl, r):
    assert rl.gcra("k", 1, 1, 20_000).allowed
    fut = in_thread(lambda: rl.gcra("k", 1, 1, 20_000, wait_ms=30_000))
    until_waiting(r, 1)
    time.sleep(4 * SHORT)  # real time past the connection's 50 ms timeout: still held
    assert not fut.done()
    r.execute_command("RL.CLOCK", "ADVANCE", 20_000)
    assert fut.result(10) == Decision(True, 1, 0, 0, 20_000, waited_ms=20_000)
    until_waiting(r, 0)


def test_timed_out_and_answered_at_once(rl, r):
    assert rl.gcra("k", 1, 1, 20_000, wait_ms=100) == Decision(True, 1, 0, 0, 20_000,
                                                                waited_ms=0)
    assert rl.gcra("k", 1, 1, 20_000, wait_ms=0) == Decision(False, 1, 0, 20_000, 20_000,
                                                              waited_ms=0)
    fut = in_thread(lambda: rl.gcra("k", 1, 1, 20_000, wait_ms=5000))
    until_waiting(r, 1)
    r.execute_command("RL.CLOCK", "ADVANCE", 5000)
    assert fut.result(10) == Decision(False, 1, 0, 15_000, 15_000, waited_ms=5000)
    # every rate method and option passes it on; the module refuses WAIT with BLOCK
    assert rl.tokenbucket("t", 5, 1, 1000, cost=2, wait_ms=10).waited_ms == 0
    assert rl.sliding("s", 2, 60_000, wait_ms=10, partial=True).granted == 1
    assert rl.queue("q", 3, 1000, wait_ms=10).delay_ms == 0
    assert rl.fixed("f", 2, 60_000, wait_ms=10).remaining == 1
    assert rl.log("l", 2, 60_000, wait_ms=10).waited_ms == 0
    with pytest.raises(redis.ResponseError, match="syntax error"):
        rl.gcra("k", 1, 1, 1000, wait_ms=10, block_ms=100)


def test_the_read_timeout_is_the_wait_plus_the_normal_one(rl, r):
    """The clock is frozen: the server holds the call forever; the client gives up after
    wait_ms + 50 ms of real time, and its connection is closed, so the server drops it."""
    rl.gcra("k", 1, 1, 20_000)
    t0 = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        rl.gcra("k", 1, 1, 20_000, wait_ms=200)
    took = time.monotonic() - t0
    assert 0.2 + SHORT - 0.01 <= took < 2, took
    until_waiting(r, 0)
    assert rl.gcra("k2", 1, 1, 20_000).allowed  # the client goes on


def test_acquire_and_allow_wait(rl, r):
    lease = rl.acquire("jobs", 1, 60_000)
    fut = in_thread(lambda: rl.acquire("jobs", 1, 60_000, wait_ms=60_000))
    until_waiting(r, 1)
    assert rl.release("jobs", lease.token)  # wakes the waiter at once
    d = fut.result(10)
    assert d.allowed and d.token and d.waited_ms == 0
    rl.policies.set("api", Rule.gcra(1, 1, 20_000))
    assert rl.allow("u", "api", wait_ms=10).waited_ms == 0
    fut = in_thread(lambda: rl.allow("u", "api", wait_ms=30_000))
    until_waiting(r, 1)
    r.execute_command("RL.CLOCK", "ADVANCE", 20_000)
    assert fut.result(10) == Decision(True, 1, 0, 0, 20_000, waited_ms=20_000)
    # rate() with a Policy value: RL.ALLOW ... WAIT
    assert rl.rate("u2", Policy("api", wait_ms=5)).waited_ms == 0


@pytest.mark.parametrize("single", [False, True], ids=["pool", "single_connection"])
def test_a_held_call_does_not_delay_other_calls_on_the_same_client(r, redis_port, single):
    """redis-py's pool is per-command checkout: the held call has a connection of its own
    (also on a single_connection_client), and the other calls, with their 50 ms timeout,
    answer at once while it is held."""
    c = connect(f"redis://127.0.0.1:{redis_port}/0", single_connection_client=single)
    rl = RateLimiter(c)
    try:
        rl.gcra("held", 1, 1, 20_000)
        fut = in_thread(lambda: rl.gcra("held", 1, 1, 20_000, wait_ms=30_000))
        until_waiting(r, 1)
        for i in range(20):
            assert rl.gcra(f"other{i}", 1, 1, 20_000).allowed
        assert not fut.done() and waiting(r) == 1
        r.execute_command("RL.CLOCK", "ADVANCE", 20_000)
        assert fut.result(10).allowed
    finally:
        c.close()


# ------------------------------------------------------------------ the API, asyncio


@pytest.mark.parametrize("protocol", [2, 3])
def test_async_wait_and_other_calls_meanwhile(r, redis_port, protocol):
    async def main() -> None:
        c = connect_async(f"redis://127.0.0.1:{redis_port}/0", protocol=protocol)
        rl = AsyncRateLimiter(c)
        try:
            assert (await rl.gcra("k", 1, 1, 20_000, wait_ms=10)).waited_ms == 0
            held = asyncio.ensure_future(rl.gcra("k", 1, 1, 20_000, wait_ms=30_000))
            while waiting(r) != 1:
                await asyncio.sleep(0.002)
            await asyncio.sleep(4 * SHORT)  # past the 50 ms timeout: still held
            for i in range(10):  # the same client answers other calls meanwhile
                assert (await rl.gcra(f"o{i}", 1, 1, 20_000)).allowed
            assert not held.done()
            r.execute_command("RL.CLOCK", "ADVANCE", 20_000)
            assert await held == Decision(True, 1, 0, 0, 20_000, waited_ms=20_000)
            # timed out, and the bound on the read timeout
            lease = await rl.acquire("j", 1, 60_000, wait_ms=10)
            assert lease.allowed and lease.waited_ms == 0
            t0 = time.monotonic()
            with pytest.raises(redis.TimeoutError):
                await rl.acquire("j", 1, 60_000, wait_ms=200)
            assert time.monotonic() - t0 >= 0.2
            await rl.policies.set("api", Rule.gcra(1, 1, 20_000))
            assert (await rl.allow("u", "api", wait_ms=5)).waited_ms == 0
            d = await rl.allow("u", "api", wait_ms=0)
            assert (d.allowed, d.waited_ms) == (False, 0)
        finally:
            await c.aclose()

    run(main())
    until_waiting(r, 0)


# ------------------------------------------------------------------ middleware over HTTP

FRAMEWORKS = ["flask", "django", "fastapi"]


@pytest.fixture(params=FRAMEWORKS)
def serve(request, redis_port, serve_wsgi, serve_asgi):
    """The app with the request path's 50 ms Redis timeout: a held request outlasts it."""
    def start(cfg: Config) -> str:
        url = f"redis://127.0.0.1:{redis_port}/0"
        if request.param == "fastapi":
            return serve_asgi(services.fastapi_app(url, cfg, SHORT)).url
        factory = services.flask_app if request.param == "flask" else services.django_app
        return serve_wsgi(factory(url, cfg, SHORT)).url

    return start


def _user(req: Request):
    return req.header("x-user")


def test_middleware_holds_a_request_without_delaying_others(r, serve, http):
    events: List[Event] = []
    base = serve(Config(limits=[Limit("user", Rule.gcra(1, 1, 20_000), _user,
                                      wait_ms=30_000)],
                        routes=[Route("/login", [Limit("login", Rule.fixed(1, 60_000),
                                                       _user, wait_ms=5000)],
                                      replace=True)],
                        on_decision=events.append))
    assert http.get(base + "/", headers={"x-user": "alice"}).status_code == 200
    held = in_thread(lambda: http.get(base + "/", headers={"x-user": "alice"}))
    until_waiting(r, 1)
    time.sleep(4 * SHORT)
    for u in ("bob", "carol", "dave"):  # other requests go through meanwhile
        resp = http.get(base + "/", headers={"x-user": u})
        assert resp.status_code == 200 and resp.headers["RateLimit"] == '"user";r=0;t=20'
    assert not held.done()
    r.execute_command("RL.CLOCK", "ADVANCE", 20_000)
    resp = held.result(10)
    assert resp.status_code == 200
    assert resp.headers["RateLimit"] == '"user";r=0;t=20' and "Retry-After" not in resp.headers
    assert events[-1].decision is not None and events[-1].decision.waited_ms == 20_000
    # a wait that times out: 429 with the refused reply of that instant
    assert http.post(base + "/login", headers={"x-user": "alice"}).status_code == 200
    held = in_thread(lambda: http.post(base + "/login", headers={"x-user": "alice"}))
    until_waiting(r, 1)
    r.execute_command("RL.CLOCK", "ADVANCE", 5000)
    resp = held.result(10)
    assert resp.status_code == 429
    assert resp.headers["Retry-After"] == "35"  # the FIXED window: 60 - 20 - 5 s left
    assert resp.headers["RateLimit"] == '"login";r=0;t=35'


def test_middleware_policy_limit_waits(r, serve, http):
    r.execute_command("RL.POLICY", "SET", "api", "GCRA", 1, 1, 20_000)
    base = serve(Config(limits=[Limit("api", Policy("api"), _user, wait_ms=30_000)]))
    assert http.get(base + "/", headers={"x-user": "alice"}).status_code == 200
    held = in_thread(lambda: http.get(base + "/", headers={"x-user": "alice"}))
    until_waiting(r, 1)
    r.execute_command("RL.CLOCK", "ADVANCE", 20_000)
    resp = held.result(10)
    assert resp.status_code == 200 and resp.headers["RateLimit"] == '"api";r=0;t=20'


# ------------------------------------------------------------------ cluster


def _node_keys(rc: Any) -> List[str]:
    """One key per primary."""
    by_node: dict = {}
    for i in range(200):
        k = f"w{i}"
        by_node.setdefault(rc.get_node_from_key(k).name, k)
    assert len(by_node) == 3
    return list(by_node.values())


def test_cluster_waiting_call_routes_by_key(rc):
    rl = RateLimiter(rc)
    for key in _node_keys(rc):
        node = rc.get_node_from_key(key)
        direct = redis.Redis(host=node.host, port=node.port, decode_responses=True)
        try:
            assert rl.gcra(key, 1, 1, 20_000).allowed
            fut = in_thread(lambda: rl.gcra(key, 1, 1, 20_000, wait_ms=30_000))
            until_waiting(direct, 1)
            assert rl.gcra(key + "x", 1, 1, 20_000).allowed  # the client goes on
            direct.execute_command("RL.CLOCK", "ADVANCE", 20_000)  # on that node only
            assert fut.result(10) == Decision(True, 1, 0, 0, 20_000, waited_ms=20_000)
        finally:
            direct.close()


def test_cluster_async_waiting_call_routes_by_key(rc, cluster_ports):
    keys = _node_keys(rc)

    async def main() -> None:
        c = redis.asyncio.RedisCluster(host="127.0.0.1", port=cluster_ports[0],
                                       socket_timeout=SHORT)
        rl = AsyncRateLimiter(c)
        try:
            for key in keys:
                node = rc.get_node_from_key(key)
                direct = redis.Redis(host=node.host, port=node.port, decode_responses=True)
                assert (await rl.gcra(key, 1, 1, 20_000)).allowed
                held = asyncio.ensure_future(rl.gcra(key, 1, 1, 20_000, wait_ms=30_000))
                while waiting(direct) != 1:
                    await asyncio.sleep(0.002)
                await asyncio.sleep(4 * SHORT)
                assert (await rl.gcra(key + "x", 1, 1, 20_000)).allowed
                direct.execute_command("RL.CLOCK", "ADVANCE", 20_000)
                assert (await held) == Decision(True, 1, 0, 0, 20_000, waited_ms=20_000)
                direct.close()
        finally:
            await c.aclose()

    run(main())


# ------------------------------------------------------------------ pause, resume, probe


@pytest.fixture
def need_pause(r):
    if not has_pause(r):
        pytest.skip("the server has no RL.PAUSE yet (COMMAND INFO rl.pause is empty)")


def test_pause_and_resume(rl, r, need_pause):
    assert rl.gcra("k", 5, 1, 20_000).allowed
    assert rl.pause("k", 10_000) == 10_000
    d = rl.gcra("k", 5, 1, 20_000)
    assert not d.allowed and d.retry_after_ms == 10_000
    assert rl.pause("k", 1000) == 10_000  # extends, never shortens
    assert rl.info("k")["paused_until_ms"] > 0
    assert rl.resume("k") is True
    assert rl.gcra("k", 5, 1, 20_000).allowed
    assert rl.resume("k") is False
    # a missing key; waiters wait through the pause and are admitted when it ends
    assert rl.pause("fresh", 5000) == 5000
    fut = in_thread(lambda: rl.gcra("fresh", 1, 1, 20_000, wait_ms=30_000))
    until_waiting(r, 1)
    r.execute_command("RL.CLOCK", "ADVANCE", 5000)
    assert fut.result(10) == Decision(True, 1, 0, 0, 20_000, waited_ms=5000)


def test_pause_with_probe(rl, r, need_pause):
    """The seeds' breaker: a refused vendor key pauses; when the pause ends exactly one
    request (one sent with probe=True) goes out as the probe; it reports back."""
    assert rl.pause("vendor", 5000, probe_ms=3000) == 5000
    d = rl.gcra("vendor", 10, 10, 1000, probe=True)
    assert (d.allowed, d.probe, d.retry_after_ms) == (False, False, 5000)
    r.execute_command("RL.CLOCK", "ADVANCE", 5000)
    assert not rl.gcra("vendor", 10, 10, 1000).allowed  # without PROBE: still refused
    d = rl.gcra("vendor", 10, 10, 1000, probe=True)
    assert (d.allowed, d.probe) == (True, True)
    d = rl.gcra("vendor", 10, 10, 1000, probe=True)  # paused again for everyone else
    assert (d.allowed, d.probe) == (False, False)
    assert rl.pause("vendor", 5000, probe_ms=3000) == 5000  # the probe failed
    r.execute_command("RL.CLOCK", "ADVANCE", 5000)
    assert rl.gcra("vendor", 10, 10, 1000, probe=True).probe is True
    assert rl.resume("vendor") is True  # the probe worked
    d = rl.gcra("vendor", 10, 10, 1000, probe=True)
    assert (d.allowed, d.probe) == (True, False)
    # RL.ALLOW and RL.ACQUIRE take PROBE too; the reply's fields in order
    rl.policies.set("api", Rule.gcra(2, 1, 20_000))
    d = rl.allow("u", "api", probe=True, wait_ms=10)
    assert (d.allowed, d.probe, d.waited_ms) == (True, False, 0)


def test_async_pause_resume(r, redis_port, need_pause):
    async def main() -> None:
        c = connect_async(f"redis://127.0.0.1:{redis_port}/0")
        rl = AsyncRateLimiter(c)
        try:
            assert await rl.pause("k", 4000, probe_ms=1000) == 4000
            assert not (await rl.fixed("k", 5, 60_000)).allowed
            assert await rl.resume("k") is True
            d = await rl.fixed("k", 5, 60_000, probe=True)
            assert (d.allowed, d.probe) == (True, False)
        finally:
            await c.aclose()

    run(main())


def test_cluster_pause_routes_by_key(rc):
    if not has_pause(rc.get_redis_connection(rc.get_primaries()[0])):
        pytest.skip("the server has no RL.PAUSE yet")
    rl = RateLimiter(rc)
    for key in _node_keys(rc):
        assert rl.pause(key, 5000) == 5000
        assert not rl.gcra(key, 1, 1, 1000).allowed
        assert rl.resume(key) is True
