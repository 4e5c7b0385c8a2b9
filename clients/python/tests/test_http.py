"""The middleware over real HTTP, the same checks for Flask (WSGI), Django and FastAPI
(ASGI, uvicorn), against the real module with its clock frozen."""

from __future__ import annotations

import socket
import time
from typing import Any, List

import pytest

import services
from redis_ratelimit import Event, Limit, Route, Rule

FRAMEWORKS = ["flask", "django", "fastapi"]
ALICE = {"Authorization": "Bearer alice-token"}
CAROL = {"Authorization": "Bearer carol-token"}


@pytest.fixture(params=FRAMEWORKS)
def serve(request, redis_port, serve_wsgi, serve_asgi):
    """serve(config, redis_url=None) -> base URL of the app on a real HTTP server."""
    fw = request.param

    def start(cfg: Any, redis_url: str = "", timeout: float = 1.0, mount: str = "") -> str:
        """``mount``: the app is served under that prefix (WSGI: werkzeug's
        DispatcherMiddleware, so SCRIPT_NAME; ASGI: a Starlette Mount, so root_path)."""
        url = redis_url or f"redis://127.0.0.1:{redis_port}/0"
        if fw == "fastapi":
            app = services.fastapi_app(url, cfg, timeout)
            if mount:
                from starlette.applications import Starlette
                from starlette.routing import Mount

                app = Starlette(routes=[Mount(mount, app=app)])
            return serve_asgi(app).url
        factory = services.flask_app if fw == "flask" else services.django_app
        app = factory(url, cfg, timeout)
        if mount:
            from werkzeug.middleware.dispatcher import DispatcherMiddleware
            from werkzeug.wrappers import Response

            app = DispatcherMiddleware(Response("outside", 404), {mount: app})
        return serve_wsgi(app).url

    return start


def rl_headers(resp: Any) -> dict:
    names = ["RateLimit-Policy", "RateLimit", "Retry-After", "X-RateLimit-Limit",
             "X-RateLimit-Remaining", "X-RateLimit-Reset"]
    return {n: resp.headers[n] for n in names if n in resp.headers}


def rl_calls(r: Any) -> dict:
    return {k[len("cmdstat_"):]: v["calls"] for k, v in r.info("commandstats").items()
            if k.startswith("cmdstat_rl.") and k != "cmdstat_rl.clock"}


def test_anonymous_429_at_the_third_request(r, serve, http):
    base = serve(services.config())
    seen = [http.get(base + "/") for _ in range(3)]
    assert [s.status_code for s in seen] == [200, 200, 429]
    assert seen[0].json() == {"hello": "world"}
    assert rl_headers(seen[0]) == {"RateLimit-Policy": '"ip";q=2;w=60',
                                   "RateLimit": '"ip";r=1;t=30'}
    # after the second request: 0 left, the next unit back in 30 s (full reset: 60 s)
    assert seen[1].headers["RateLimit"] == '"ip";r=0;t=30'
    refused = seen[2]
    assert rl_headers(refused) == {"RateLimit-Policy": '"ip";q=2;w=60',
                                   "RateLimit": '"ip";r=0;t=30', "Retry-After": "30"}
    assert refused.headers["Content-Type"] == "application/problem+json"
    body = refused.json()
    assert body["violated-policies"] == ["ip"] and body["type"].endswith("#quota-exceeded")
    assert r.keys("rl:*") == ["rl:ip:127.0.0.1"]
    r.execute_command("RL.CLOCK", "ADVANCE", 30_000)  # one emission interval later
    assert http.get(base + "/").status_code == 200


def test_user_and_org_in_one_atomic_call(r, serve, http):
    base = serve(services.config(legacy_headers=True))
    r.config_resetstat()
    resp = http.get(base + "/", headers=ALICE)
    assert resp.status_code == 200
    assert rl_calls(r) == {"rl.all": 1}
    headers = rl_headers(resp)
    # the Unix time (s, rounded up) at which user (the tightest) is full again: 20 s from now
    reset = int(headers.pop("X-RateLimit-Reset"))
    assert abs(reset - (time.time() + 20)) <= 1.5
    assert headers == {
        "RateLimit-Policy": '"user";q=3;w=60, "org";q=4;w=60',
        "RateLimit": '"user";r=2;t=20, "org";r=3;t=60',
        "X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "2"}
    # one hash tag: one cluster slot
    assert sorted(r.keys("rl:*")) == ["rl:{acme}:org:acme", "rl:{acme}:user:alice"]
    for tok in ("alice", "bob", "bob"):
        assert http.get(base + "/", headers={"Authorization": f"Bearer {tok}-token"}
                        ).status_code == 200
    resp = http.get(base + "/", headers=ALICE)  # org spent (4 of 4)
    assert resp.status_code == 429
    assert resp.json()["violated-policies"] == ["org"]
    # the org refused: nothing spent on alice (1 of 3 left, as before the request)
    # org's t is clamped to its w (60); Retry-After is the module's retry_after_ms
    assert resp.headers["RateLimit"] == '"user";r=1;t=20, "org";r=0;t=60'
    assert resp.headers["Retry-After"] == "75"


def test_exempt_paths(r, serve, http):
    base = serve(services.config())
    for _ in range(5):
        assert http.get(base + "/health").status_code == 200
        assert http.post(base + "/webhooks/stripe").status_code == 200
    assert "RateLimit" not in http.get(base + "/health").headers
    assert r.keys("rl:*") == []


def test_per_route_limit(r, serve, http):
    """A route's limits add to the defaults (decision 2): the anonymous ip limit still
    applies to POST /login, beside the login limit."""
    base = serve(services.config())
    seen = [http.post(base + "/login") for _ in range(3)]
    assert [s.status_code for s in seen] == [200, 200, 429]
    assert seen[0].headers["RateLimit-Policy"] == '"ip";q=2;w=60, "login";q=2;w=60'
    resp = http.post(base + "/login")
    # fixed window: quota comes back at the window's end, 60 s after NOW_MS
    assert resp.headers["RateLimit"] == '"ip";r=0;t=30, "login";r=0;t=60'
    assert resp.headers["Retry-After"] == "60"
    resp = http.get(base + "/")  # GET / has the default limits only: ip, spent by the logins
    assert resp.status_code == 429 and resp.headers["RateLimit"] == '"ip";r=0;t=30'


def test_route_replace_and_exempt_route(r, serve, http):
    login = Limit("login", Rule.fixed(1, 60_000), services.ip_of)
    base = serve(services.config(routes=[Route("/login", [login], replace=True),
                                         Route("/webhooks/*", False)], exempt=[]))
    resp = http.post(base + "/login")
    assert resp.headers["RateLimit"] == '"login";r=0;t=60'  # the defaults replaced
    assert http.post(base + "/login").status_code == 429
    assert r.keys("rl:*") == ["rl:login:127.0.0.1"]
    for _ in range(3):
        resp = http.post(base + "/webhooks/stripe")  # limits=False: exempt
        assert resp.status_code == 200 and "RateLimit" not in resp.headers


def test_block_limit_beside_another_limit(r, serve, http):
    """Issue 24: a block_ms limit beside a second limit answered 500 (RL.ALL takes no
    BLOCK). Now the block limit runs in its own command after the others admitted."""
    login = Limit("login", Rule.fixed(2, 60_000), services.ip_of, block_ms=900_000)
    base = serve(services.config(routes=[Route("/login", [login], methods=["POST"])]))
    seen = [http.post(base + "/login", headers=CAROL) for _ in range(3)]
    assert [s.status_code for s in seen] == [200, 200, 429]
    assert seen[0].headers["RateLimit"] == '"user";r=2;t=20, "login";r=1;t=60'
    assert seen[2].headers["Retry-After"] == "900"  # blocked for 15 minutes
    assert seen[2].headers["RateLimit"] == '"user";r=0;t=20, "login";r=0;t=60'  # t <= w
    info = r.execute_command("RL.INFO", "rl:login:127.0.0.1")
    assert "blocked_until_ms" in info
    r.execute_command("RL.CLOCK", "ADVANCE", 120_000)  # the window is long over: still blocked
    resp = http.post(base + "/login", headers=CAROL)
    assert resp.status_code == 429 and resp.headers["Retry-After"] == "900"


def test_block_in_the_rule_options_too(r, serve, http):
    login = Limit("login", Rule.fixed(1, 60_000, block_ms=60_000), services.ip_of)
    base = serve(services.config(routes=[Route("/login", [login])]))
    assert [http.post(base + "/login", headers=CAROL).status_code for _ in range(2)] == [200, 429]


def test_per_request_cost(r, serve, http):
    def tokens(req):
        return int(req.header("x-tokens") or "1")

    base = serve(services.config(limits=[Limit("ai", Rule.tokenbucket(100, 1, 1000),
                                               services.ip_of, cost=tokens)]))
    resp = http.get(base + "/", headers={"x-tokens": "40"})
    assert resp.headers["RateLimit"] == '"ai";r=60;t=1'
    assert http.get(base + "/", headers={"x-tokens": "61"}).status_code == 429
    resp = http.get(base + "/", headers={"x-tokens": "0"})  # a peek
    assert resp.status_code == 200 and resp.headers["RateLimit"] == '"ai";r=60;t=1'


def test_trusted_proxy_forwarded_for(r, serve, http):
    base = serve(services.config())
    for i in range(3):  # the client forges the leftmost entry; the proxy appends its peer
        resp = http.get(base + "/", headers={"X-Forwarded-For": f"6.6.6.{i}, 203.0.113.7"})
    assert resp.status_code == 429
    assert r.keys("rl:*") == ["rl:ip:203.0.113.7"]
    http.get(base + "/", headers={"X-Forwarded-For": "2001:db8:1:2::99"})
    assert "rl:ip:2001:db8:1:2::/64" in r.keys("rl:*")


def test_fail_open_and_closed(serve, http, closed_url):
    base = serve(services.config(), closed_url)
    resp = http.get(base + "/")
    assert resp.status_code == 200 and "RateLimit" not in resp.headers
    resp = http.post(base + "/login")  # the login limit fails closed
    assert resp.status_code == 503 and resp.headers["Retry-After"] == "1"
    assert resp.json()["violated-policies"] == ["login"]


def test_hung_redis_times_out_quickly(serve, http):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)  # accepts, never answers
    try:
        base = serve(services.config(), f"redis://127.0.0.1:{s.getsockname()[1]}/0",
                     timeout=0.05)
        t0 = time.monotonic()
        assert http.get(base + "/").status_code == 200
        assert http.post(base + "/login").status_code == 503
        assert time.monotonic() - t0 < 1.0
    finally:
        s.close()


def test_in_memory_fallback(serve, http, closed_url):
    cfg = services.config(limits=[Limit("ip", Rule.gcra(5, 1, 30_000), services.anonymous_ip,
                                        fallback=Rule.fixed(2, 60_000))])
    base = serve(cfg, closed_url)
    seen = [http.get(base + "/") for _ in range(3)]
    assert [s.status_code for s in seen] == [200, 200, 429]
    assert seen[0].headers["RateLimit-Policy"] == '"ip";q=2;w=60'  # the fallback's numbers
    assert seen[2].headers["Retry-After"] is not None


def test_shadow_mode_spends_and_reports(r, serve, http):
    events: List[Event] = []
    base = serve(services.config(limits=services.limits(shadow=True),
                                 on_decision=events.append))
    statuses = [http.get(base + "/").status_code for _ in range(4)]
    assert statuses == [200] * 4  # never refused
    assert "RateLimit" not in http.get(base + "/").headers
    assert [e.refused for e in events[:4]] == [False, False, True, True]
    assert {(e.limit, e.source, e.shadow) for e in events} == {("ip", "redis", True)}
    # really spent in Redis
    assert r.execute_command("RL.GCRA", "rl:ip:127.0.0.1", 2, 1, 30_000, "DRYRUN")[0] == 0


def test_metrics_hook_sees_failures(serve, http, closed_url):
    events: List[Event] = []
    base = serve(services.config(on_decision=events.append), closed_url)
    http.get(base + "/", headers=CAROL)
    (ev,) = events
    assert (ev.limit, ev.source, ev.refused) == ("user", "fail-open", False)
    assert ev.error is not None


def test_queue_limit_shapes(r, serve, http):
    """A QUEUE limit delays each admitted request by its delay_ms, then lets it through."""
    # The module clock is frozen, but the key's TTL runs in real time: after the third
    # request (which waits two intervals) the key lives 1 interval more, so the fourth must
    # arrive within that. An interval of 2 s leaves 2 s for a loaded machine.
    base = serve(services.config(limits=[Limit("shape", Rule.queue(3, 2000), services.ip_of)]))
    elapsed, statuses = [], []
    for _ in range(4):
        t0 = time.monotonic()
        statuses.append(http.get(base + "/").status_code)
        elapsed.append(time.monotonic() - t0)
    assert statuses == [200, 200, 200, 429]  # 3 waiting at most
    assert elapsed[1] >= 2.0 and elapsed[2] >= 4.0  # delays 0, 2, 4 s (module time)


def test_mounted_under_a_prefix(r, serve, http):
    """Decision 7: routes and exemptions match the path the mounted app sees (WSGI
    PATH_INFO, ASGI path without root_path, Django request.path_info): the /login route
    applies to /api/login and the /health exemption to /api/health."""
    base = serve(services.config(), mount="/api")
    seen = [http.post(base + "/api/login") for _ in range(3)]
    assert [s.status_code for s in seen] == [200, 200, 429]
    assert seen[0].headers["RateLimit-Policy"] == '"ip";q=2;w=60, "login";q=2;w=60'
    for _ in range(3):
        resp = http.get(base + "/api/health")
        assert resp.status_code == 200 and "RateLimit" not in resp.headers
    assert sorted(r.keys("rl:*")) == ["rl:ip:127.0.0.1", "rl:login:127.0.0.1"]
