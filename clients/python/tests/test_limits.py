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
    # when one more unit fits, as the module says: the window's end (fixed), the oldest
    # entry's expiry (moving), 20 s into the next window (sliding: 3 * 2/3 + 1 = 3)
    wait = {"sliding-window-counter": 79}.get(name, 60)
    assert time.time() + wait - 1.5 < reset <= time.time() + wait + 0.5
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
    assert lim.test(item, "u") and lim.get_window_stats(item, "u")[1] == 1
    assert lim.hit(item, "u") and not lim.hit(item, "u")  # 4 * 3/4 + 1 = 4
    assert not lim.test(item, "u")
    # The next unit fits when the previous window weighs 2 (30 s into the window): 15 s.
    # limits' own arithmetic on the raw counters would say 0 s (45 % 15).
    reset, remaining = lim.get_window_stats(item, "u")
    assert remaining == 0 and 14.5 < reset - time.time() <= 15


def module_retry_s(r, storage, item, who):
    """The module's own answer: ceil(retry_after_ms / 1000) of one more unit (DRYRUN)."""
    key = storage.k(item.key_for(who), "sliding")
    d = r.execute_command("RL.SLIDING", key, item.amount, item.get_expiry() * 1000, "DRYRUN")
    return int(d[0]) == 1, -(-int(d[3]) // 1000)


@pytest.mark.parametrize("limit", ["4/minute", "3/minute", "10/minute", "7/30 seconds"])
def test_sliding_window_counter_agrees_with_the_module(r, storage, limit):
    """Issue 24: limits' test() said yes while hit() refused, and the reset (Retry-After)
    came earlier than the module's retry_after_ms. Walk the clock over three windows,
    hitting often: test() answers as hit() does, and a refused hit's reset is never before
    the module's retry_after_ms (rounded up), and at most a second after it."""
    lim = SlidingWindowCounterRateLimiter(storage)
    item = parse(limit)
    step = item.get_expiry() * 1000 // 16 + 123  # off every window boundary
    for i in range(3 * 16):
        for _ in range(2):
            fits, retry = module_retry_s(r, storage, item, "u")
            assert lim.test(item, "u") is fits, i
            assert lim.hit(item, "u") is fits, i
            if not fits:
                reset, remaining = lim.get_window_stats(item, "u")
                assert remaining == 0
                assert retry - 0.5 <= reset - time.time() <= retry, (i, retry)
        advance(r, step)


@pytest.mark.parametrize("name", STRATEGIES)
def test_reset_never_before_the_modules_retry(r, storage, name):
    """limits' reset (Flask-Limiter floors it into Retry-After) is the module's
    retry_after_ms rounded up to whole seconds, for every strategy."""
    lim = STRATEGIES[name](storage)
    item = parse("2/minute")
    assert lim.hit(item, "u")
    advance(r, 1234)  # retries now end in .766 s
    assert [lim.hit(item, "u") for _ in range(2)] == [True, False]
    seg, cmd = {"fixed-window": ("fixed", "RL.FIXED"), "moving-window": ("moving", "RL.LOG"),
                "sliding-window-counter": ("sliding", "RL.SLIDING")}[name]
    d = r.execute_command(cmd, storage.k(item.key_for("u"), seg), 2, 60_000, "DRYRUN")
    retry_ms = int(d[3])
    assert int(d[0]) == 0 and retry_ms % 1000 != 0
    reset, _ = lim.get_window_stats(item, "u")
    left = reset - time.time()
    assert retry_ms / 1000 <= left <= -(-retry_ms // 1000), (retry_ms, left)


def test_strategies_keep_their_keys_apart(r, storage):
    """Issue 24: a strategy switch on a live app (moving window -> sliding counter) met the
    old strategy's keys: WRONGTYPE on every request. Each strategy has keys of its own."""
    item = parse("2/minute")
    for name, cls in STRATEGIES.items():
        lim = cls(storage)
        assert [lim.hit(item, "u") for _ in range(3)] == [True, True, False], name
    assert sorted(k.split(":")[1] for k in r.keys("LIMITS:*")) == ["fixed", "moving",
                                                                   "sliding"]
    MovingWindowRateLimiter(storage).clear(item, "u")
    SlidingWindowCounterRateLimiter(storage).clear(item, "u")
    assert [k.split(":")[1] for k in r.keys("LIMITS:*")] == []  # clear() covers fixed too


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
    seg = {"fixed-window": "fixed", "moving-window": "moving",
           "sliding-window-counter": "sliding"}[name]
    by_node: dict = {}
    for i in range(1000):  # four users whose keys are on each node
        u = f"user{i}"
        by_node.setdefault(rc.keyslot(storage.k(item.key_for(u), seg)) // 5461, []).append(u)
    users = [u for node in sorted(by_node) for u in by_node[node][:4]]
    assert len(by_node) == 3
    wait = 89 if name == "sliding-window-counter" else 60  # the module's retry, see above
    for u in users:
        assert [lim.hit(item, u) for _ in range(3)] == [True, True, False]
        reset, remaining = lim.get_window_stats(item, u)
        assert remaining == 0 and time.time() + wait - 2 < reset <= time.time() + wait + 1
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


def flask_limiter_app(redis_port, strategy, limit="2 per minute"):
    from flask import Flask
    from flask_limiter import Limiter
    from flask_limiter.util import get_remote_address

    from redis_ratelimit.limits_storage import flask_limiter_headers

    app = Flask(__name__)
    limiter = Limiter(get_remote_address, app=app, strategy=strategy, headers_enabled=True,
                      storage_uri=f"redis+ratelimit://127.0.0.1:{redis_port}/0")
    flask_limiter_headers(app, limiter)

    @app.get("/")
    @limiter.limit(limit)
    def index():
        return {"hello": "world"}

    @app.get("/free")
    @limiter.exempt
    def free():
        return {"ok": True}

    return app


def third_request_is_429(http, url, strategy):
    """2 per minute, 1 s into a minute: 200, 200, then 429 with draft-10 headers whose t is
    when quota comes back: the window's end (fixed: 59 s), the oldest entry's expiry
    (moving window: 60 s), or for the sliding counter the module's retry_after_ms: the
    previous window's 2 must weigh 1, half-way through the next window (89 s; t is clamped
    to w = 60, Retry-After is not)."""
    seen = [http.get(url) for _ in range(3)]
    assert [s.status_code for s in seen] == [200, 200, 429]
    assert seen[0].headers["RateLimit-Policy"] == '"2-per-1-minute";q=2;w=60'
    assert seen[0].headers["RateLimit"].startswith('"2-per-1-minute";r=1;t=')
    assert seen[1].headers["RateLimit"].startswith('"2-per-1-minute";r=0;t=')
    refused = seen[2]
    t = int(refused.headers["RateLimit"].rsplit("t=", 1)[1])
    # Flask-Limiter writes its own Retry-After from its reset time and the real clock, in
    # whole seconds: one second less when a second boundary passes in between.
    wait = 89 if strategy == "sliding-window-counter" else t
    assert t in (59, 60) and int(refused.headers["Retry-After"]) in (wait - 1, wait)
    return seen


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_flask_limiter(r, redis_port, serve_wsgi, http, strategy):
    base = serve_wsgi(flask_limiter_app(redis_port, strategy)).url
    advance(r, 1000)
    refused = third_request_is_429(http, base + "/", strategy)[2]
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
    third_request_is_429(http, base + "/", strategy)
    assert r.keys("LIMITS:*")


def test_flask_limiter_sliding_retry_after_is_the_modules(r, redis_port, serve_wsgi, http):
    """A client that honours Flask-Limiter's Retry-After is admitted then (issue 24: it was
    sent earlier than the module's retry_after_ms, and refused again)."""
    base = serve_wsgi(flask_limiter_app(redis_port, "sliding-window-counter",
                                        "4 per minute")).url
    advance(r, 1000)
    assert [http.get(base + "/").status_code for _ in range(5)] == [200] * 4 + [429]
    advance(r, 74_000)  # 15 s into the next window: the previous 4 weigh 3, one fits
    assert http.get(base + "/").status_code == 200
    refused = http.get(base + "/")
    assert refused.status_code == 429
    # the module: the next unit fits when the previous 4 weigh 2, 30 s into the window,
    # 15 s from now (limits' arithmetic on the raw counters said 0: 45 s % 15 s)
    key = next(k for k in r.keys("LIMITS:sliding:*"))
    d = r.execute_command("RL.SLIDING", key, 4, 60_000, "DRYRUN")
    assert (int(d[0]), int(d[3])) == (0, 15_000)
    # Flask-Limiter's own Retry-After: its reset time minus its clock, floored: 15 (14 only
    # when a second boundary falls between the storage's answer and Flask-Limiter's clock)
    assert int(refused.headers["Retry-After"]) in (14, 15)
    assert refused.headers["RateLimit"] == '"4-per-1-minute";r=0;t=15'  # ours
    advance(r, 14_999)
    assert http.get(base + "/").status_code == 429
    advance(r, 1)
    assert http.get(base + "/").status_code == 200


def test_flask_limiter_strategy_switch_starts_fresh(r, redis_port, serve_wsgi, http):
    """The same app restarted with another strategy (the old keys still live) answers as a
    fresh limit, never 500."""
    for strategy in ("moving-window", "sliding-window-counter", "fixed-window",
                     "moving-window"):
        r.execute_command("RL.CLOCK", "ADVANCE", 1000)
        base = serve_wsgi(flask_limiter_app(redis_port, strategy)).url
        assert [http.get(base + "/").status_code for _ in range(3)] == [200, 200, 429], \
            strategy
        r.execute_command("RL.CLOCK", "ADVANCE", 120_000)
