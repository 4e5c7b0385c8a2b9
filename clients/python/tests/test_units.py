"""Headers, key functions and the in-memory limiter; the latter two checked against the
module itself (same decisions, same clock)."""

from __future__ import annotations

import random

import pytest

from conftest import NOW_MS
from redis_ratelimit import (Decision, Item, MemoryLimiter, RateLimiter, Request, Rule,
                             by_api_key, by_ip, client_address, ip_key, render,
                             reset_seconds)
from redis_ratelimit.keys import parse_networks

# ------------------------------------------------------------------ t of RateLimit


def test_t_gcra_is_the_next_unit_not_the_full_reset(r):
    rl = RateLimiter(r)
    rule = Rule.gcra(10, 1, 6000)  # one unit back every 6 s
    for _ in range(3):
        d = rl.rate("g", rule)
    assert d == Decision(True, 10, 7, 0, 18_000)
    assert reset_seconds(rule, d) == 6  # the full reset is 18 s
    # The module agrees: 8 units fit only once 6 s have passed.
    r.execute_command("RL.CLOCK", "ADVANCE", 5999)
    assert rl.gcra("g", 10, 1, 6000, cost=8, dryrun=True).allowed is False
    r.execute_command("RL.CLOCK", "ADVANCE", 1)
    assert rl.gcra("g", 10, 1, 6000, cost=8, dryrun=True).allowed is True


def test_t_gcra_fractional_interval(r):
    rl = RateLimiter(r)
    rule = Rule.gcra(5, 3, 1000)  # T = 333.33 ms
    d = rl.rate("g", rule.with_options(cost=5))
    assert (d.remaining, d.reset_after_ms) == (0, 1667)
    assert reset_seconds(rule, d) == 1  # 1667 - 4 * 333.3 = 334 ms -> 1 s


@pytest.mark.parametrize("rule, d, t", [
    (Rule.fixed(10, 60_000), Decision(True, 10, 5, 0, 42_000), 42),
    (Rule.sliding(10, 60_000), Decision(True, 10, 5, 0, 100_000), 40),  # window end
    (Rule.sliding(10, 60_000), Decision(True, 10, 5, 0, 30_000), 30),
    (Rule.log(10, 60_000), Decision(True, 10, 5, 0, 60_000), 60),
    (Rule.gcra(10, 1, 1000), Decision(False, 10, 0, 1500, 10_000), 2),  # refused: retry
    (Rule.gcra(10, 1, 1000), Decision(True, 10, 10, 0, 0), 0),  # nothing spent
    (Rule.queue(5, 1000), Decision(True, 5, 2, 0, 3000), 1),
])
def test_t_per_algorithm(rule, d, t):
    assert reset_seconds(rule, d) == t


def test_render_several_limits():
    items = [Item("user", Rule.gcra(3, 1, 1500), Decision(True, 3, 1, 0, 3000)),
             Item("org", Rule.sliding(4, 60_000), Decision(False, 4, 0, 75_000, 120_000))]
    assert render(items, legacy=True, now=1000.0) == {
        "RateLimit-Policy": '"user";q=3;w=5, "org";q=4;w=60',
        "RateLimit": '"user";r=1;t=2, "org";r=0;t=60',  # t never above w (decision 3)
        "Retry-After": "75",
        "X-RateLimit-Limit": "4",
        "X-RateLimit-Remaining": "0",
        # the tightest (org, refused) back to full: now + reset_after_ms, Unix s rounded up
        "X-RateLimit-Reset": "1120",
    }
    h = render(items[:1], legacy=True, now=1000.5)
    assert h["X-RateLimit-Reset"] == "1004" and "Retry-After" not in h  # ceil(1003.5)
    h = render(items[:1], legacy=True, legacy_reset="delta", now=1000.0)
    assert h["X-RateLimit-Reset"] == "3"
    assert render([Item('a"b', Rule.fixed(1, 1000), Decision(True, 1, 0, 0, 1000))])[
        "RateLimit"] == '"a\\"b";r=0;t=1'


# ------------------------------------------------------------------ client address


def req(peer="10.0.0.1", xff=(), **headers):
    h = {k.lower().replace("_", "-"): [v] for k, v in headers.items()}
    if xff:
        h["x-forwarded-for"] = list(xff)
    return Request("GET", "/", h, peer)


TRUSTED = parse_networks(["10.0.0.0/8", "fd00::/8"])


@pytest.mark.parametrize("peer, xff, trusted, expected", [
    ("10.0.0.1", [], TRUSTED, "10.0.0.1"),
    ("203.0.113.5", ["1.2.3.4"], TRUSTED, "203.0.113.5"),  # untrusted peer: header ignored
    ("10.0.0.1", ["1.2.3.4"], (), "10.0.0.1"),  # no trusted proxies: header ignored
    ("10.0.0.1", ["1.2.3.4"], TRUSTED, "1.2.3.4"),
    ("10.0.0.1", ["6.6.6.6, 1.2.3.4"], TRUSTED, "1.2.3.4"),  # forged left entry ignored
    ("10.0.0.1", ["6.6.6.6, 1.2.3.4, 10.1.1.1"], TRUSTED, "1.2.3.4"),  # two proxies
    ("10.0.0.1", ["6.6.6.6, 1.2.3.4", "10.1.1.1"], TRUSTED, "1.2.3.4"),  # two lines
    ("10.0.0.1", ["10.2.2.2, 10.3.3.3"], TRUSTED, "10.2.2.2"),  # all trusted: leftmost
    ("10.0.0.1", ["garbage"], TRUSTED, "10.0.0.1"),
    ("10.0.0.1", ["1.2.3.4:5678"], TRUSTED, "1.2.3.4"),
    ("fd00::1", ["[2001:db8::1]:443"], TRUSTED, "2001:db8::1"),
    ("::ffff:10.0.0.1", ["1.2.3.4"], TRUSTED, "1.2.3.4"),  # IPv4-mapped peer
])
def test_client_address(peer, xff, trusted, expected):
    assert client_address(peer, xff, trusted) == expected


def test_ipv6_is_keyed_on_the_64():
    assert ip_key("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64"
    assert ip_key("2001:db8:1:2:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64"
    assert ip_key("2001:db8:1:3::1") == "2001:db8:1:3::/64"
    assert ip_key("203.0.113.9") == "203.0.113.9"
    assert ip_key("2001:db8::1", ipv6_prefix=128) == "2001:db8::1"
    key = by_ip(["10.0.0.0/8"])
    assert key(req(xff=["2001:db8:1:2::7"])) == key(req(xff=["2001:db8:1:2:9::8"]))
    assert key(req(xff=["2001:db8:1:2::7"])) != key(req(xff=["2001:db8:1:3::7"]))


def test_api_key_is_hashed():
    k = by_api_key()(req(x_api_key="secret-123"))
    assert k and "secret" not in k and len(k) == 24
    assert by_api_key()(req()) is None


# ------------------------------------------------------------------ in-memory limiter


RULES = [Rule.gcra(5, 2, 1000), Rule.tokenbucket(4, 3, 1000), Rule.queue(4, 300),
         Rule.fixed(5, 1000), Rule.sliding(6, 1000), Rule.log(5, 1000),
         Rule.gcra(3, 7, 1000)]


@pytest.mark.parametrize("rule", RULES, ids=lambda x: f"{x.algorithm}{x.params}")
def test_memory_limiter_decides_like_the_module(r, rule):
    """Random costs and clock steps: the in-memory fallback gives the module's replies."""
    now = [NOW_MS * 1000]
    mem = MemoryLimiter(clock=lambda: now[0])
    rnd = random.Random(f"{rule.algorithm}{rule.params}")
    for i in range(600):
        cost = rnd.choice([1, 1, 1, 2, rule.limit])
        rr = rule.with_options(cost=cost)
        # The key's TTL runs in real time while the module's clock is frozen: keep the key
        # alive (in the same transaction) so that a slow machine cannot expire it early. A
        # state the module's clock has left behind reads as fresh anyway.
        pipe = r.pipeline(transaction=True)
        pipe.execute_command(*rr.command_args("k"))
        pipe.pexpire("k", 3_600_000)
        got = rr.parse(pipe.execute()[0])
        assert mem.decide("k", rr) == got, f"step {i}"
        step = rnd.choice([0, 0, 1, 7, 99, 250, 333, 1000, 2500])
        r.execute_command("RL.CLOCK", "ADVANCE", step)
        now[0] += step * 1000


def test_django_user_key():
    pytest.importorskip("django")
    from types import SimpleNamespace

    from redis_ratelimit.django import django_user

    def with_user(user):
        return Request("GET", "/", {}, "10.0.0.1", {"django_request": SimpleNamespace(user=user)})

    assert django_user(with_user(SimpleNamespace(is_authenticated=True, pk=42))) == "42"
    assert django_user(with_user(SimpleNamespace(is_authenticated=False, pk=None))) is None
    assert django_user(Request("GET", "/", {}, "10.0.0.1")) is None


def test_breaker_skips_redis_after_a_failure(closed_url):
    import redis

    from redis_ratelimit import Config, Limit, connect
    from redis_ratelimit.middleware import CircuitOpen, Engine, run_sync

    now = [100.0]
    events = []
    eng = Engine(Config(limits=[Limit("ip", Rule.fixed(1, 1000), lambda _: "x")],
                        on_decision=events.append, clock=lambda: now[0], breaker_ms=1000))
    client = connect(closed_url)
    plan = eng.plan(req())
    for _ in range(3):
        assert run_sync(eng, client, plan).status is None  # fails open
        now[0] += 0.4
    errors = [type(e.error) for e in events]
    assert issubclass(errors[0], redis.ConnectionError) and errors[0] is not CircuitOpen
    assert errors[1:] == [CircuitOpen, CircuitOpen]  # not tried for 1 s
    now[0] += 0.2  # 1.4 s after the failure: Redis is tried again
    run_sync(eng, client, plan)
    assert events[-1].error is not None and type(events[-1].error) is not CircuitOpen


def test_asgi_path_is_relative_to_root_path():
    from redis_ratelimit.asgi import app_path

    assert app_path({"path": "/api/login", "root_path": "/api"}) == "/login"
    assert app_path({"path": "/api", "root_path": "/api"}) == "/"
    assert app_path({"path": "/apix/login", "root_path": "/api"}) == "/apix/login"
    assert app_path({"path": "/login", "root_path": "/api"}) == "/login"  # already stripped
    assert app_path({"path": "/login", "root_path": ""}) == "/login"


def test_route_limits_add_replace_exempt():
    from redis_ratelimit import Config, Limit, Route, Rule
    from redis_ratelimit.keys import Request
    from redis_ratelimit.middleware import Engine

    def lim(name):
        return Limit(name, Rule.fixed(1, 60_000), lambda req: "x")

    cfg = Config(limits=[lim("user"), lim("ip")],
                 routes=[Route("/login", [lim("login")], methods=["POST"]),
                         Route("/search", [lim("user")]),
                         Route("/upload", [lim("upload")], replace=True),
                         Route("/admin/*", False)])
    eng = Engine(cfg)

    def names(method, path):
        return [x.name for x in eng.limits_for(Request(method, path, {}, "127.0.0.1"))]

    assert names("POST", "/login") == ["user", "ip", "login"]
    assert names("GET", "/login") == ["user", "ip"]
    assert names("GET", "/search") == ["ip", "user"]  # the route's "user" replaces the default
    assert names("GET", "/upload") == ["upload"]
    assert names("GET", "/admin") == [] and names("GET", "/admin/x") == []
    assert names("GET", "/adminx") == ["user", "ip"]


def test_all_refuses_options_rl_all_does_not_take():
    from redis_ratelimit._protocol import all_args

    with pytest.raises(ValueError, match="RL.ALL takes no block_ms"):
        all_args([("a", Rule.fixed(1, 1000)), ("b", Rule.fixed(1, 1000, block_ms=5))], False)
    assert all_args([("a", Rule.fixed(3, 1000, cost=0, reserve=1))], False) == [
        "RL.ALL", 1, "a", "FIXED", 3, 1000, "COST", 0, "RESERVE", 1]


# ------------------------------------------------------------------ issue 24: the same as Node


def _reply(cls, text):
    """The exception redis-py raises for an error reply (it strips some codes)."""
    from redis._parsers.base import BaseParser

    return BaseParser.parse_error(text) if cls is None else cls(text)


@pytest.mark.parametrize("text, unavailable", [
    ("OOM command not allowed when used memory > 'maxmemory'.", True),
    ("LOADING Redis is loading the dataset in memory", True),
    ("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist",
     True),
    ("READONLY You can't write against a read only replica.", True),
    ("CLUSTERDOWN The cluster is down", True),
    ("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", True),
    ("BUSY Redis is busy running a script.", True),
    ("NOREPLICAS Not enough good replicas to write.", True),
    ("TRYAGAIN Multiple keys request during rehashing of slot", True),
    ("ERR COST must not exceed the limit", False),
    ("ERR syntax error", False),
    ("WRONGTYPE Operation against a key holding the wrong kind of value", False),
    ("BUSYKEY Target key name already exists.", False),
    ("NOAUTH Authentication required.", False),
    ("WRONGPASS invalid username-password pair or user is disabled.", False),
    ("NOPERM this user has no permissions to run the 'rl.gcra' command", False),
    ("CROSSSLOT Keys in request don't hash to the same slot", False),
    ("ERR max number of clients reached", True),  # the server refuses the connection
])
def test_which_error_replies_take_the_failure_path(text, unavailable):
    from redis_ratelimit.middleware import is_unavailable

    assert is_unavailable(_reply(None, text)) is unavailable


def test_connection_errors_and_timeouts_take_the_failure_path():
    import redis

    from redis_ratelimit.middleware import CircuitOpen, is_unavailable

    for e in (redis.ConnectionError("Connection refused"), redis.TimeoutError("Timeout"),
              ConnectionRefusedError(), TimeoutError(), CircuitOpen("x")):
        assert is_unavailable(e), e
    assert not is_unavailable(ValueError("cost must be an int"))
    assert not is_unavailable(redis.DataError("Invalid input"))


class _NoRedis:
    def execute_command(self, *args):
        raise AssertionError(f"Redis must not be asked: {args}")


@pytest.mark.parametrize("rule", [Rule.gcra(3, 1, 20_000), Rule.tokenbucket(3, 1, 20_000),
                                  Rule.sliding(3, 60_000), Rule.fixed(3, 60_000),
                                  Rule.log(3, 60_000), Rule.queue(3, 20_000)])
def test_cost_above_the_limit_is_refused_before_redis(rule):
    import json

    from redis_ratelimit import Config, Limit
    from redis_ratelimit.middleware import Engine, run_sync

    events = []
    cost = lambda req: int(req.header("x-cost") or "1")  # noqa: E731
    eng = Engine(Config(limits=[Limit("org", Rule.fixed(100, 60_000), lambda _: "acme"),
                                Limit("user", rule, lambda _: "alice", cost=cost),
                                Limit("probe", Rule.fixed(1, 60_000), lambda _: "p",
                                      cost=5, shadow=True)],
                        on_decision=events.append, legacy_headers=True))
    out = run_sync(eng, _NoRedis(), eng.plan(Request("GET", "/", {"x-cost": ["4"]}, "::1")))
    assert out.status == 429
    assert out.headers == {"Content-Type": "application/problem+json"}  # no Retry-After
    body = json.loads(out.body)
    assert body == {"type": "https://iana.org/assignments/http-problem-types#quota-exceeded",
                    "title": "Request cannot be satisfied as assigned quota has been exceeded",
                    "status": 429, "violated-policies": ["user"],
                    "detail": "request cost 4 exceeds limit 'user' (3): it can never be admitted"}
    assert sorted((e.limit, e.source, e.refused, e.shadow) for e in events) == [
        ("probe", "cost", True, True), ("user", "cost", True, False)]


def test_cluster_without_hash_tag_is_one_command_per_limit_whatever_the_slots():
    from redis.crc import key_slot

    from redis_ratelimit import Config, Limit
    from redis_ratelimit.middleware import Engine

    # an org identity whose key lands on the user key's slot by chance
    org = next(str(i) for i in range(100_000)
               if key_slot(f"rl:org:{i}".encode()) == key_slot(b"rl:user:alice"))
    eng = Engine(Config(limits=[Limit("user", Rule.fixed(2, 60_000), lambda _: "alice"),
                                Limit("org", Rule.fixed(3, 60_000), lambda _: org)]))
    plan = eng.plan(Request("GET", "/", {}, "::1"))
    assert [len(b.calls) for b in eng.batches(plan, cluster=True)] == [1, 1]
    assert [len(b.calls) for b in eng.batches(plan, cluster=False)] == [2]
    tagged = Engine(Config(limits=eng.config.limits, hash_tag=lambda _: "acme"))
    assert [len(b.calls) for b in tagged.batches(tagged.plan(Request("GET", "/", {}, "::1")),
                                                 cluster=True)] == [2]


def test_legacy_reset_is_epoch_by_default_or_delta():
    from redis_ratelimit import Config

    assert Config().legacy_reset == "epoch"
    assert Config(legacy_reset="delta").legacy_reset == "delta"
    with pytest.raises(ValueError, match="legacy_reset"):
        Config(legacy_reset="seconds")


def test_a_limit_own_shadow_wins_over_config_shadow():
    from redis_ratelimit import Config, Limit
    from redis_ratelimit.middleware import Engine

    eng = Engine(Config(shadow=True, limits=[
        Limit("enforced", Rule.fixed(1, 60_000), lambda _: "a", shadow=False),
        Limit("follows", Rule.fixed(1, 60_000), lambda _: "a"),
        Limit("own", Rule.fixed(1, 60_000), lambda _: "a", shadow=True)]))
    plan = eng.plan(Request("GET", "/", {}, "::1"))
    assert [(c.limit.name, c.shadow) for c in plan.calls] == [
        ("enforced", False), ("follows", True), ("own", True)]
    assert [[c.limit.name for c in b.calls] for b in eng.batches(plan, cluster=False)] == [
        ["enforced"], ["follows", "own"]]
