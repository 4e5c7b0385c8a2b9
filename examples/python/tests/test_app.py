"""The example service over real HTTP against a real redis-server with the module.

The module's clock is frozen (RL.CLOCK SET) at a multiple of 60 s, so every number is
exact. The middleware itself (every framework, fallback, shadow mode, ...) is tested in
clients/python/tests; this checks the example's own policies.
"""

import json
import socket
import time

from redis.crc import key_slot

from app import make_config
from conftest import free_port

ALICE = {"Authorization": "Bearer alice-token"}


def rl_calls(rds):
    return {k[len("cmdstat_"):]: v["calls"] for k, v in rds.info("commandstats").items()
            if k.startswith("cmdstat_rl.") and k != "cmdstat_rl.clock"}


def test_anonymous_sixth_request_is_429(rds, serve):
    srv = serve(make_config())
    seen = [srv.get("/") for _ in range(6)]
    assert [r.status for r in seen] == [200] * 5 + [429]
    # GCRA 5 at once, 5 per minute: one unit back every 12 s (t), full reset after 60 s
    assert seen[0].getheader("RateLimit-Policy") == '"ip";q=5;w=60'
    assert seen[0].getheader("RateLimit") == '"ip";r=4;t=12'
    refused = seen[5]
    assert refused.getheader("RateLimit") == '"ip";r=0;t=12'
    assert refused.getheader("Retry-After") == "12"
    assert refused.getheader("Content-Type") == "application/problem+json"
    assert json.loads(refused.body)["violated-policies"] == ["ip"]
    assert json.loads(refused.body)["status"] == 429  # the same members as the Node package
    rds.execute_command("RL.CLOCK", "ADVANCE", 12_000)
    assert srv.get("/").status == 200


def test_user_and_org_share_a_slot_and_one_call(rds, serve):
    srv = serve(make_config())
    rds.config_resetstat()
    resp = srv.get("/", ALICE)
    assert resp.status == 200
    assert rl_calls(rds) == {"rl.all": 1}
    assert resp.getheader("RateLimit-Policy") == '"user";q=10;w=60, "org";q=15;w=60'
    assert resp.getheader("RateLimit") == '"user";r=9;t=6, "org";r=14;t=60'
    keys = sorted(rds.keys("rl:*"))
    assert keys == ["rl:{acme}:org:acme", "rl:{acme}:user:alice"]
    assert key_slot(keys[0].encode()) == key_slot(keys[1].encode())


def test_login_limit_and_exemptions(rds, serve):
    srv = serve(make_config())
    statuses = [srv.get("/login", method="POST").status for _ in range(6)]
    assert statuses == [200] * 5 + [429]
    for _ in range(10):
        assert srv.get("/health").status == 200
    # the login limit applies beside the default ones (the anonymous ip limit)
    assert sorted(rds.keys("rl:*")) == ["rl:ip:127.0.0.1", "rl:login:127.0.0.1"]


def test_trusted_proxy(rds, serve):
    srv = serve(make_config(trusted_proxies=["127.0.0.1/32"]))
    srv.get("/", {"X-Forwarded-For": "6.6.6.6, 203.0.113.7"})
    srv.get("/", {"X-Forwarded-For": "2001:db8:5:6::1"})
    assert sorted(rds.keys("rl:*")) == ["rl:ip:2001:db8:5:6::/64", "rl:ip:203.0.113.7"]


def test_redis_down_fails_open_but_login_fails_closed(serve):
    srv = serve(make_config(), redis_url=f"redis://127.0.0.1:{free_port()}/0")
    assert srv.get("/", ALICE).status == 200
    assert srv.get("/login", method="POST").status == 503


def test_hung_redis_costs_one_timeout():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    try:
        from app import create_app
        from conftest import Server
        from redis_ratelimit import connect

        srv = Server(create_app(connect(f"redis://127.0.0.1:{s.getsockname()[1]}/0"),
                                make_config(fail_open=False)))
        t0 = time.monotonic()
        assert srv.get("/").status == 503
        assert time.monotonic() - t0 < 0.5
        srv.close()
    finally:
        s.close()
