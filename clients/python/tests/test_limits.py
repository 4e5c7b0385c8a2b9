"""The `limits` storage: its three strategies directly, then Flask-Limiter and slowapi over
real HTTP, on the module (redis+ratelimit://)."""


import time

import pytest
from limits import parse
from limits.aio import strategies as aio_strategies
from limits.storage import storage_from_string
from limits.strategies import (FixedWindowRateLimiter, MovingWindowRateLimiter,
                               SlidingWindowCounterRateLimiter)

import redis_ratelimit.limits_storage  # noqa: F401  registers redis+ratelimit://
from conftest import NOW_MS, run
from redis_ratelimit._protocol import parse_info
from redis_ratelimit.limits_storage import (AsyncRateLimitStorage, RateLimitStorage,
                                            item_from_key)

STRATEGIES = {"fixed-window": FixedWindowRateLimiter,
              "moving-window": MovingWindowRateLimiter,
              "sliding-window-counter": SlidingWindowCounterRateLimiter}


@pytest.fixture
def storage(r, redis_port):
    s = storage_from_string(f"redis+ratelimit://127.0.0.1:{redis_port}/0")
    assert isinstance(s, RateLimitStorage)
    return s


def advance(r, ms):
    r.execute_command("RL.CLOCK", "ADVANCE", ms)


def test_key_parsing():
    item = parse("10/2 minutes")
    assert item_from_key(item.key_for("a/b", "c")) == (10, 120)
    assert item_from_key("no-limits-key") is None


@pytest.mark.parametrize("name", STRATEGIES)
def test_strategy_admits_the_limit(r, storage, name):
    lim = STRATEGIES[name](storage)
    item = parse("3/minute")
    advance(r, 1000)  # not on a window boundary (limits' sliding reset is 0 there)
    assert [lim.hit(item, "u") for _ in range(4)] == [True, True, True, False]
    assert lim.test(item, "u") is False and lim.test(item, "other") is True
    reset, remaining = lim.get_window_stats(item, "u")
    assert remaining == 0
    assert time.time() < reset <= time.time() + 60.5
    assert lim.hit(item, "u2", cost=3) and not lim.hit(item, "u2")
    assert not lim.hit(item, "u3", cost=4)  # more than the limit: refused, nothing spent
    lim.clear(item, "u")
    assert lim.hit(item, "u")
    # every key is a module state with its TTL, under the storage's prefix
    keys = r.keys("LIMITS:*")
    assert keys and all(r.pttl(k) > 0 for k in keys)
    assert {parse_info(r.execute_command("RL.INFO", k))["algorithm"] for k in keys} == {
        {"fixed-window": "fixed", "moving-window": "log",
         "sliding-window-counter": "sliding"}[name]}
    assert storage.reset() == len(keys) and r.keys("LIMITS:*") == []


def test_fixed_window_refusals_spend_nothing(r, storage):
    lim = FixedWindowRateLimiter(storage)
    item = parse("2/minute")
    for _ in range(5):
        lim.hit(item, "u")
    assert storage.get(item.key_for("u")) == 2  # limits' own Redis storage would say 5
    advance(r, 60_000)  # the next (epoch-aligned) window
    assert lim.hit(item, "u") and lim.get_window_stats(item, "u")[1] == 1


def test_moving_window_frees_the_oldest(r, storage):
    lim = MovingWindowRateLimiter(storage)
    item = parse("2/minute")
    assert lim.hit(item, "u")
    advance(r, 20_000)
    assert lim.hit(item, "u") and not lim.hit(item, "u")
    start, count = storage.get_moving_window(item.key_for("u"), 2, 60)
    assert count == 2
    assert abs((start + 60) - (time.time() + 40)) < 0.5  # the first entry ages out in 40 s
    advance(r, 40_000)
    assert lim.hit(item, "u") and not lim.hit(item, "u")


def test_module_clock_probe(r, storage):
    probe = r.execute_command(*storage.clock_probe_args("some/key"))
    assert storage.module_now_ms(probe) == NOW_MS
    assert r.keys("*") == []  # a DRYRUN creates nothing
    # the probe key shares the slot of the key it goes with
    from redis.crc import key_slot

    for key in ("a/b/1/1/minute", "x{tag}y"):
        probe_key = storage.clock_probe_args(key)[1]
        assert key_slot(probe_key.encode()) == key_slot(storage.k(key).encode())


def test_sliding_window_counter_weights(r, storage):
    lim = SlidingWindowCounterRateLimiter(storage)
    item = parse("4/minute")
    for _ in range(4):
        assert lim.hit(item, "u")
    advance(r, 75_000)  # 15 s into the next window: weight of the previous 3/4
    prev, prev_ttl, cur, cur_ttl = storage.get_sliding_window(item.key_for("u"), 60)
    assert (prev, cur) == (4, 0)
    assert abs(prev_ttl - 45) < 0.5 and abs(cur_ttl - 105) < 0.5
    assert lim.hit(item, "u") and not lim.hit(item, "u")  # 4 * 3/4 + 1 = 4


def test_async_storage(r, redis_port):
    async def main():
        s = storage_from_string(f"async+redis+ratelimit://127.0.0.1:{redis_port}/0")
        assert isinstance(s, AsyncRateLimitStorage)
        item = parse("2/minute")
        for cls in (aio_strategies.FixedWindowRateLimiter,
                    aio_strategies.MovingWindowRateLimiter,
                    aio_strategies.SlidingWindowCounterRateLimiter):
            lim = cls(s)
            got = [await lim.hit(item, cls.__name__) for _ in range(3)]
            assert got == [True, True, False], cls.__name__
            assert (await lim.get_window_stats(item, cls.__name__))[1] == 0
        assert await s.check()
        assert await s.reset() == 3
        await s.redis.aclose()

    run(main())


@pytest.mark.parametrize("name", STRATEGIES)
def test_cluster_storage(rc, cluster_ports, name):
    uri = "redis+ratelimit+cluster://" + ",".join(f"127.0.0.1:{p}" for p in cluster_ports)
    storage = storage_from_string(uri)
    lim = STRATEGIES[name](storage)
    item = parse("2/minute")
    advance_all = rc.get_nodes()
    rc.execute_command("RL.CLOCK", "ADVANCE", 1000, target_nodes=advance_all)
    users = [f"user{i}" for i in range(12)]  # keys on every node
    assert {rc.keyslot(f"LIMITS:{item.key_for(u)}") // 5461 for u in users} == {0, 1, 2}
    for u in users:
        assert [lim.hit(item, u) for _ in range(3)] == [True, True, False]
        reset, remaining = lim.get_window_stats(item, u)
        assert remaining == 0 and time.time() + 58 < reset <= time.time() + 61
    assert storage.reset() == len(users)


def test_async_cluster_storage(rc, cluster_ports):
    async def main():
        uri = "async+redis+ratelimit+cluster://127.0.0.1:%d" % cluster_ports[0]
        s = storage_from_string(uri)
        lim = aio_strategies.SlidingWindowCounterRateLimiter(s)
        item = parse("2/minute")
        for u in ("a", "b", "c", "d"):
            assert [await lim.hit(item, u) for _ in range(3)] == [True, True, False]
            assert (await lim.get_window_stats(item, u))[1] == 0
        assert await s.reset() == 4
        await s.redis.aclose()

    run(main())


def test_storage_down_raises(closed_url):
    s = storage_from_string(closed_url.replace("redis://", "redis+ratelimit://"),
                            socket_connect_timeout=0.05)
    assert s.check() is False
    import redis

    with pytest.raises(redis.ConnectionError):
        FixedWindowRateLimiter(s).hit(parse("1/second"), "x")


# ------------------------------------------------------------------ Flask-Limiter


def flask_limiter_app(redis_port, strategy):
    from flask import Flask
    from flask_limiter import Limiter
    from flask_limiter.util import get_remote_address

    from redis_ratelimit.limits_storage import flask_limiter_headers

    app = Flask(__name__)
    limiter = Limiter(get_remote_address, app=app, strategy=strategy, headers_enabled=True,
                      storage_uri=f"redis+ratelimit://127.0.0.1:{redis_port}/0")
    flask_limiter_headers(app, limiter)

    @app.get("/")
    @limiter.limit("2 per minute")
    def index():
        return {"hello": "world"}

    @app.get("/free")
    @limiter.exempt
    def free():
        return {"ok": True}

    return app


def third_request_is_429(http, url):
    """2 per minute, 1 s into a minute: 200, 200, then 429 with draft-10 headers whose t is
    when quota comes back: the window's end (fixed, sliding counter: 59 s) or the oldest
    entry's expiry (moving window: 60 s)."""
    seen = [http.get(url) for _ in range(3)]
    assert [s.status_code for s in seen] == [200, 200, 429]
    assert seen[0].headers["RateLimit-Policy"] == '"2-per-1-minute";q=2;w=60'
    assert seen[0].headers["RateLimit"].startswith('"2-per-1-minute";r=1;t=')
    assert seen[1].headers["RateLimit"].startswith('"2-per-1-minute";r=0;t=')
    refused = seen[2]
    t = int(refused.headers["RateLimit"].rsplit("t=", 1)[1])
    # Flask-Limiter writes its own Retry-After from its reset time and the real clock, in
    # whole seconds: one second less when a second boundary passes in between.
    assert t in (59, 60) and int(refused.headers["Retry-After"]) in (t - 1, t)
    return seen


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_flask_limiter(r, redis_port, serve_wsgi, http, strategy):
    base = serve_wsgi(flask_limiter_app(redis_port, strategy)).url
    advance(r, 1000)
    refused = third_request_is_429(http, base + "/")[2]
    assert refused.headers["X-RateLimit-Remaining"] == "0"  # Flask-Limiter's own
    assert http.get(base + "/free").status_code == 200
    assert all(k.startswith("LIMITS:") for k in r.keys("*"))


# ------------------------------------------------------------------ slowapi


def slowapi_app(redis_port, strategy):
    from fastapi import FastAPI, Request
    from slowapi import Limiter, _rate_limit_exceeded_handler
    from slowapi.errors import RateLimitExceeded
    from slowapi.util import get_remote_address

    from redis_ratelimit.limits_storage import SlowapiHeadersMiddleware

    limiter = Limiter(key_func=get_remote_address, strategy=strategy,
                      storage_uri=f"redis+ratelimit://127.0.0.1:{redis_port}/0")
    app = FastAPI()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)
    app.add_middleware(SlowapiHeadersMiddleware)

    @app.get("/")
    @limiter.limit("2/minute")
    async def index(request: Request):
        return {"hello": "world"}

    return app


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_slowapi(r, redis_port, serve_asgi, http, strategy):
    base = serve_asgi(slowapi_app(redis_port, strategy)).url
    advance(r, 1000)
    third_request_is_429(http, base + "/")
    assert r.keys("LIMITS:*")
