"""The Flask middleware over real HTTP against a real redis-server with the module.

The module's clock is frozen (RL.CLOCK SET) at a multiple of 60 s, so every number below
is exact: GCRA answers in whole emission intervals, sliding windows start at NOW_MS.

A user in an organisation is checked with one atomic RL.ALL on the keys
rl:{org:<org>}:user:<user> and rl:{org:<org>} (one Redis Cluster slot); the tests count the
commands the middleware sends with INFO commandstats.
"""

import json
import logging
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from redis.crc import key_slot

from conftest import free_port
from ratelimit_middleware import Config, Identity, Limit, bearer_tokens, check, client_ip

ALICE = "rl:{org:acme}:user:alice"
BOB = "rl:{org:acme}:user:bob"
ACME = "rl:{org:acme}"

TOKENS = {
    "alice-token": Identity("alice", "acme"),
    "bob-token": Identity("bob", "acme"),
    "carol-token": Identity("carol"),  # no organisation
}


def config(**kw):
    base = dict(
        user=Limit.gcra("user", burst=3, count=1, period_ms=1500),  # q=3, w=ceil(4.5)=5
        org=Limit.sliding("org", limit=4, window_ms=60_000),  # q=4, w=60
        ip=Limit.gcra("ip", burst=2, count=1, period_ms=1000),  # q=2, w=2
        identify=bearer_tokens(TOKENS),
    )
    base.update(kw)
    return Config(**base)


def auth(token):
    return {"Authorization": f"Bearer {token}"}


def rl_headers(resp):
    return {name: resp.getheader(name) for name in (
        "RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining",
        "RateLimit-Reset", "Retry-After")}


def rl_calls(rds):
    """The module's rate commands run since the last CONFIG RESETSTAT: {command: calls}."""
    stats = rds.info("commandstats")
    return {name[len("cmdstat_"):]: v["calls"] for name, v in stats.items()
            if name.startswith("cmdstat_rl.") and name != "cmdstat_rl.clock"}


def gcra_left(rds, key, burst=3, count=1, period_ms=1500):
    """Units left on a GCRA key right now (a DRYRUN counts the request it imagines)."""
    allowed, _, remaining = rds.execute_command(
        "RL.GCRA", key, burst, count, period_ms, "DRYRUN")[:3]
    return remaining + 1 if allowed else remaining


# --------------------------------------------------------------------------- admitted


def test_anonymous_request_is_admitted_with_headers(rds, serve):
    srv = serve(config())
    resp = srv.get("/")
    assert resp.status == 200
    assert json.loads(resp.body) == {"hello": "world"}
    # RL.GCRA rl:ip:127.0.0.1 2 1 1000 -> 1 2 1 0 1000
    assert rl_headers(resp) == {
        "RateLimit-Policy": '"ip";q=2;w=2',
        "RateLimit": '"ip";r=1;t=1',
        "RateLimit-Limit": "2",
        "RateLimit-Remaining": "1",
        "RateLimit-Reset": "1",
        "Retry-After": None,
    }
    assert 0 < rds.pttl("rl:ip:127.0.0.1") <= 1000
    assert rds.keys("rl:*") == ["rl:ip:127.0.0.1"]


def test_authenticated_request_lists_user_and_org(rds, serve):
    srv = serve(config())
    resp = srv.get("/", auth("alice-token"))
    assert resp.status == 200
    # user: GCRA 3 1 1500 -> 1 3 2 0 1500; org: SLIDING 4 60000 at a window start
    # -> 1 4 3 0 120000 (the end of the next window, as the current one has a count)
    assert rl_headers(resp) == {
        "RateLimit-Policy": '"user";q=3;w=5, "org";q=4;w=60',
        "RateLimit": '"user";r=2;t=2, "org";r=3;t=120',
        "RateLimit-Limit": "3",  # the tightest: user, 2 left
        "RateLimit-Remaining": "2",
        "RateLimit-Reset": "2",
        "Retry-After": None,
    }
    # One hash tag: both keys in one Redis Cluster slot, as RL.ALL requires there.
    assert sorted(rds.keys("rl:*")) == [ACME, ALICE]
    assert key_slot(ALICE.encode()) == key_slot(ACME.encode())


def test_one_command_per_request(rds, serve):
    srv = serve(config())
    rds.config_resetstat()
    assert srv.get("/", auth("alice-token")).status == 200  # user + org: one RL.ALL
    assert rl_calls(rds) == {"rl.all": 1}
    rds.config_resetstat()
    assert srv.get("/", auth("carol-token")).status == 200  # no org: one limit, one command
    assert srv.get("/").status == 200  # anonymous: the ip limit
    assert rl_calls(rds) == {"rl.gcra": 2}
    assert sorted(rds.keys("rl:*")) == sorted([ACME, ALICE, "rl:ip:127.0.0.1", "rl:user:carol"])


# --------------------------------------------------------------------------- refused


def test_over_the_limit_is_429_with_retry_after(rds, serve):
    srv = serve(config())
    seen = [srv.get("/", auth("carol-token")) for _ in range(3)]
    assert [r.status for r in seen] == [200, 200, 200]
    assert [r.getheader("RateLimit") for r in seen] == [
        '"user";r=2;t=2', '"user";r=1;t=3', '"user";r=0;t=5']  # reset 1500, 3000, 4500 ms

    resp = srv.get("/", auth("carol-token"))
    assert resp.status == 429
    # The module: RL.GCRA ... -> 0 3 0 1500 4500: retry in 1500 ms, Retry-After rounds up.
    assert rl_headers(resp) == {
        "RateLimit-Policy": '"user";q=3;w=5',
        "RateLimit": '"user";r=0;t=2',
        "RateLimit-Limit": "3",
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": "2",
        "Retry-After": "2",
    }
    assert resp.getheader("Content-Type") == "application/problem+json"
    body = json.loads(resp.body)
    assert body["violated-policies"] == ["user"]
    assert body["type"].endswith("#quota-exceeded")

    # The refusal spent nothing: after exactly one emission interval one request passes.
    rds.execute_command("RL.CLOCK", "ADVANCE", 1499)
    assert srv.get("/", auth("carol-token")).status == 429
    rds.execute_command("RL.CLOCK", "ADVANCE", 1)
    resp = srv.get("/", auth("carol-token"))
    assert resp.status == 200
    assert resp.getheader("RateLimit") == '"user";r=0;t=5'
    assert srv.get("/", auth("carol-token")).status == 429


def test_org_limit_runs_out_before_user_limit(rds, serve):
    srv = serve(config())
    for token in ("alice-token", "alice-token", "bob-token", "bob-token"):
        assert srv.get("/", auth(token)).status == 200  # org: 4 of 4 spent

    rds.config_resetstat()
    resp = srv.get("/", auth("alice-token"))
    assert resp.status == 429
    assert rl_calls(rds) == {"rl.all": 1}  # one atomic call, no DRYRUN pass before it
    assert json.loads(resp.body)["violated-policies"] == ["org"]
    # Sliding window: previous 0, current 4 at the window start. Room for one more once
    # 4 * (1 - f) + 1 <= 4 in the next window, i.e. at f = 1/4: 60 s + 15 s.
    org = rds.execute_command("RL.SLIDING", ACME, 4, 60_000, "DRYRUN")
    assert org == [0, 4, 0, 75_000, 120_000]
    assert rl_headers(resp) == {
        "RateLimit-Policy": '"user";q=3;w=5, "org";q=4;w=60',
        # Alice spent 2 of 3 and the refused request spent nothing: 1 left.
        "RateLimit": '"user";r=1;t=5, "org";r=0;t=75',
        "RateLimit-Limit": "4",  # the refusing limit is the tightest
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": "75",
        "Retry-After": "75",
    }
    # Alice's own quota is untouched by the org refusals: one unit is still there.
    assert srv.get("/", auth("alice-token")).status == 429
    assert rds.execute_command("RL.GCRA", ALICE, 3, 1, 1500, "DRYRUN")[:3] == [1, 3, 0]
    assert gcra_left(rds, ALICE) == 1 and gcra_left(rds, BOB) == 1
    # A user without an organisation is not affected.
    assert srv.get("/", auth("carol-token")).status == 200


def test_several_refusals_report_the_longest_retry(rds, serve):
    srv = serve(config())
    for token in ("alice-token", "alice-token", "alice-token", "bob-token"):
        assert srv.get("/", auth(token)).status == 200
    resp = srv.get("/", auth("alice-token"))  # user: 0 left (1.5 s), org: 0 left (75 s)
    assert resp.status == 429
    assert json.loads(resp.body)["violated-policies"] == ["user", "org"]
    assert resp.getheader("RateLimit") == '"user";r=0;t=2, "org";r=0;t=75'
    assert resp.getheader("Retry-After") == "75"
    assert resp.getheader("RateLimit-Reset") == "75"
    assert resp.getheader("RateLimit-Limit") == "4"


def test_concurrent_requests_spend_user_and_org_together(rds, serve):
    """12 requests at once (6 Alice, 6 Bob; org 4, each user 3): exactly 4 pass, and every
    unit a user spent belongs to a request that passed. A check-then-spend in two round
    trips could let another request in between and spend a user's unit for a 429."""
    srv = serve(config())
    tokens = ["alice-token", "bob-token"] * 6
    with ThreadPoolExecutor(len(tokens)) as pool:
        statuses = list(pool.map(lambda t: srv.get("/", auth(t)).status, tokens))
    assert sorted(statuses) == [200] * 4 + [429] * 8
    passed = {t: sum(1 for tk, st in zip(tokens, statuses) if tk == t and st == 200)
              for t in ("alice-token", "bob-token")}
    assert 3 - gcra_left(rds, ALICE) == passed["alice-token"]
    assert 3 - gcra_left(rds, BOB) == passed["bob-token"]
    assert rds.execute_command("RL.SLIDING", ACME, 4, 60_000, "DRYRUN")[0] == 0


def test_check_adds_back_the_cost_of_a_rule_that_would_have_admitted(rds):
    """RL.ALL refused by the org: the user's own reply counted the request (cost 2) as
    spent, as DRYRUN does; the decision reports what is really left, and nothing moved."""
    user = Limit.gcra("user", burst=5, count=1, period_ms=1000, cost=2)
    org = Limit.sliding("org", limit=4, window_ms=60_000)
    rds.execute_command("RL.SLIDING", ACME, 4, 60_000, "COST", 4)  # the org is spent
    d_user, d_org = check(rds, [(user, ALICE), (org, ACME)])
    assert (d_user.allowed, d_user.remaining) == (True, 5)  # the module replied 3
    assert (d_org.allowed, d_org.remaining, d_org.retry_after_ms) == (False, 0, 75_000)
    assert rds.exists(ALICE) == 0  # nothing spent on the user
    rds.delete(ACME)
    d_user, d_org = check(rds, [(user, ALICE), (org, ACME)])  # admitted: both spent
    assert (d_user.allowed, d_user.remaining, d_org.allowed, d_org.remaining) == (True, 3, True, 3)


# --------------------------------------------------------------------------- client IP


def test_forwarded_for_is_read_from_the_right(rds, serve):
    srv = serve(config(trusted_proxies=1))
    statuses = []
    for i in range(3):  # the client forges a different leftmost entry each time
        hdr = {"X-Forwarded-For": f"6.6.6.{i}, 203.0.113.7"}
        statuses.append(srv.get("/", hdr).status)
    assert statuses == [200, 200, 429]
    assert rds.keys("rl:*") == ["rl:ip:203.0.113.7"]


def test_two_trusted_proxies(rds, serve):
    srv = serve(config(trusted_proxies=2))
    srv.get("/", {"X-Forwarded-For": "6.6.6.6, 198.51.100.9, 10.0.0.1"})
    assert rds.keys("rl:*") == ["rl:ip:198.51.100.9"]


def test_no_trusted_proxy_ignores_the_header(rds, serve):
    srv = serve(config(trusted_proxies=0))
    srv.get("/", {"X-Forwarded-For": "6.6.6.6"})
    assert rds.keys("rl:*") == ["rl:ip:127.0.0.1"]


@pytest.mark.parametrize("peer, xff, trusted, expected", [
    ("10.0.0.1", [], 0, "10.0.0.1"),
    ("10.0.0.1", ["1.2.3.4"], 0, "10.0.0.1"),
    ("10.0.0.1", ["1.2.3.4"], 1, "1.2.3.4"),
    ("10.0.0.1", ["9.9.9.9, 1.2.3.4"], 1, "1.2.3.4"),
    ("10.0.0.1", ["9.9.9.9, 1.2.3.4", "10.0.0.2"], 2, "1.2.3.4"),  # two header lines
    ("10.0.0.1", ["1.2.3.4"], 2, "10.0.0.1"),  # fewer entries than proxies: the peer
    ("10.0.0.1", ["not-an-ip"], 1, "10.0.0.1"),
    ("10.0.0.1", ["1.2.3.4:5678"], 1, "1.2.3.4"),
    ("10.0.0.1", ["[2001:db8::1]:443"], 1, "2001:db8::1"),
    ("::ffff:127.0.0.1", [], 0, "127.0.0.1"),
    ("10.0.0.1", [" 2001:DB8::0:1 "], 1, "2001:db8::1"),
])
def test_client_ip(peer, xff, trusted, expected):
    assert client_ip(peer, xff, trusted) == expected


# --------------------------------------------------------------------------- Redis down


def closed_port_url():
    return f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there


def test_fail_open_lets_requests_through(serve, caplog):
    srv = serve(config(fail_open=True), redis_url=closed_port_url())
    with caplog.at_level(logging.WARNING, logger="ratelimit"):
        resp = srv.get("/", auth("alice-token"))
    assert resp.status == 200
    assert resp.getheader("RateLimit") is None and resp.getheader("Retry-After") is None
    assert any("failing open" in r.getMessage() for r in caplog.records)


def test_fail_closed_answers_503(serve):
    srv = serve(config(fail_open=False), redis_url=closed_port_url())
    resp = srv.get("/")
    assert resp.status == 503
    assert resp.getheader("Retry-After") == "1"


@pytest.fixture
def silent_redis():
    """A TCP port that accepts connections and never answers (a hung Redis)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    yield f"redis://127.0.0.1:{s.getsockname()[1]}/0"
    s.close()


@pytest.mark.parametrize("fail_open, status", [(True, 200), (False, 503)])
def test_hung_redis_times_out_quickly(serve, silent_redis, fail_open, status):
    srv = serve(config(fail_open=fail_open), redis_url=silent_redis)
    start = time.monotonic()
    resp = srv.get("/", auth("alice-token"))
    elapsed = time.monotonic() - start
    assert resp.status == status
    assert elapsed < 0.5, f"took {elapsed:.3f} s with a 50 ms Redis timeout"


@pytest.mark.parametrize("fail_open, status", [(True, 200), (False, 503)])
def test_stalled_redis_times_out_quickly(rds, serve, caplog, fail_open, status):
    srv = serve(config(fail_open=fail_open))
    assert srv.get("/").status == 200  # connected and answering
    rds.execute_command("CLIENT", "PAUSE", 500, "ALL")  # the server stops answering for 500 ms
    try:
        with caplog.at_level(logging.WARNING, logger="ratelimit"):
            start = time.monotonic()
            resp = srv.get("/", auth("alice-token"))
            elapsed = time.monotonic() - start
    finally:
        rds.execute_command("CLIENT", "UNPAUSE")
    assert resp.status == status
    assert elapsed < 0.4, f"took {elapsed:.3f} s with a 50 ms Redis timeout"
    assert any("Timeout" in r.getMessage() or "timed out" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
