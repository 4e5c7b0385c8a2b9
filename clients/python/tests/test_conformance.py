"""The shared conformance spec (clients/conformance/cases/*.json, format in its README), run
over real HTTP: Flask through the WSGI middleware on werkzeug, and FastAPI/Starlette through
the ASGI middleware on uvicorn, each on a free 127.0.0.1 port, against the real module with
its test clock. The Node package runs the same files (Express and Fastify): a disagreement
between the packages is a failing test on one side.

Every case file of the directory is run, including the Node side's ``node-*.json``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import pathlib
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest
import redis

from conftest import ROOT
from redis_ratelimit import (AsyncRateLimiter, Config, Lease, Limit, Policy, RateLimiter,
                             Request, Route, Rule, connect, connect_async)

CASES_DIR = ROOT / "clients" / "conformance" / "cases"
FRAMEWORKS = ["flask", "fastapi"]
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def load_cases() -> List[Tuple[str, Dict[str, Any]]]:
    out: List[Tuple[str, Dict[str, Any]]] = []
    names = set()
    for f in sorted(CASES_DIR.glob("*.json")):
        for case in json.loads(f.read_text())["cases"]:
            assert case["name"] not in names, f"duplicate case name {case['name']} ({f.name})"
            names.add(case["name"])
            out.append((f.stem, case))
    return out


CASES = load_cases()


def test_every_case_file_has_cases():
    files = {f.stem for f in CASES_DIR.glob("*.json")}
    assert {"core", "headers", "block", "mount", "routes", "policy", "wait"} <= files
    assert files == {stem for stem, _ in CASES}


# ---------------------------------------------------------------- spec -> package objects


def rule_of(spec: Dict[str, Any], **opts: Any) -> Rule:
    alg = spec["algorithm"]
    if alg == "gcra":
        return Rule.gcra(spec["burst"], spec["count"], spec["period_ms"], **opts)
    if alg == "tokenbucket":
        return Rule.tokenbucket(spec["capacity"], spec["refill_tokens"],
                                spec["refill_period_ms"], **opts)
    if alg in ("sliding", "fixed", "log"):
        return getattr(Rule, alg)(spec["limit"], spec["window_ms"], **opts)
    if alg == "queue":
        return Rule.queue(spec["capacity"], spec["interval_ms"], **opts)
    raise ValueError(f"unknown algorithm in spec: {alg}")


def header_fn(name: str):
    def key(req: Request) -> Optional[str]:
        return req.header(name)

    return key


def cost_of(spec: Any):
    if spec is None:
        return 1
    if isinstance(spec, int):
        return spec
    name = spec["header"]

    def cost(req: Request) -> int:
        v = req.header(name)
        return 1 if v is None else int(v)

    return cost


def limit_of(spec: Dict[str, Any]) -> Limit:
    if "policy" in spec:
        rule: Any = Policy(spec["policy"])
    elif isinstance(spec["rule"], str):
        rule = spec["rule"]  # a limit string
    else:
        rule = rule_of(spec["rule"])
    kw: Dict[str, Any] = {}
    if "lease" in spec:
        ls = spec["lease"]
        kw["lease"] = Lease(ls["chunk"], ls.get("ttl_ms", 1000), ls.get("adaptive", False))
    if "algorithm" in spec:
        kw["algorithm"] = spec["algorithm"]
    return Limit(spec["name"], rule, header_fn(spec["key"]["header"]),
                 fail_open=spec.get("fail_open", True), shadow=spec.get("shadow"),
                 cost=cost_of(spec.get("cost")), block_ms=spec.get("block_ms"),
                 wait_ms=spec.get("wait_ms"), allow=spec.get("allow", ()),
                 deny=spec.get("deny", ()), **kw)


def config_of(spec: Dict[str, Any], clock_ms: Any = None) -> Config:
    routes = []
    for r in spec.get("routes", []):
        lims = r["limits"]
        routes.append(Route(r["path"], False if lims is False else [limit_of(x) for x in lims],
                            methods=r.get("methods"), replace=r.get("replace", False)))
    kw: Dict[str, Any] = {}
    if "breaker_ms" in spec:
        kw["breaker_ms"] = spec["breaker_ms"]
    if "legacy_headers" in spec:
        kw["legacy_headers"] = spec["legacy_headers"]
    if "shadow" in spec:
        kw["shadow"] = spec["shadow"]
    if "local_refusals" in spec:
        lr = spec["local_refusals"]
        kw["local_refusals"] = lr["max_keys"] if isinstance(lr, dict) else lr
    if clock_ms is not None:
        kw["clock_ms"] = clock_ms  # the package clock: the case's test clock
    kw["lease_sweep_ms"] = 0  # lapsed leases are given back on the next request or close
    return Config(limits=[limit_of(x) for x in spec.get("limits", [])], routes=routes,
                  exempt=list(spec.get("exempt", [])), **kw)


# ---------------------------------------------------------------- the apps


def flask_app(redis_url: Any, cfg: Config, mount: str) -> Any:
    from flask import Flask
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    from redis_ratelimit.wsgi import RateLimitMiddleware

    def ok_app(name: str) -> Any:
        app = Flask(name)

        @app.route("/", defaults={"path": ""}, methods=METHODS)
        @app.route("/<path:path>", methods=METHODS)
        def ok(path: str) -> Any:
            return "ok"

        return app

    app = ok_app("limited")
    client = connect(redis_url, 1.0) if isinstance(redis_url, str) else redis_url
    mw = RateLimitMiddleware(app.wsgi_app, redis=client, config=cfg)
    app.wsgi_app = mw  # type: ignore
    if not mount:
        return app, mw
    return DispatcherMiddleware(ok_app("outside"), {mount: app}), mw


def fastapi_app(redis_url: Any, cfg: Config, mount: str) -> Any:
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.routing import Route as SRoute

    from redis_ratelimit.asgi import RateLimitMiddleware

    async def ok(request: Any) -> Any:  # a Starlette endpoint
        return PlainTextResponse("ok")

    async def fastapi_ok() -> Any:
        return PlainTextResponse("ok")

    app = FastAPI()
    app.add_api_route("/{path:path}", fastapi_ok, methods=METHODS)
    # the middleware wraps the app (as add_middleware does), kept to close it
    client = connect_async(redis_url, 1.0) if isinstance(redis_url, str) else redis_url
    mw = RateLimitMiddleware(app, redis=client, config=cfg)
    if not mount:
        return mw, mw
    return Starlette(routes=[Mount(mount, app=mw),
                             SRoute("/{path:path}", ok, methods=METHODS)]), mw


# ---------------------------------------------------------------- running a case


def check_keys(r: Any, expect: Dict[str, Any], where: str) -> None:
    for key, present in expect.get("keys", {}).items():
        assert bool(r.exists(key)) == present, f"{where}: key {key} exists != {present}"


def check_header(got: Optional[str], want: Any, t0: float, t1: float, where: str) -> None:
    """``want``: the exact value, None (absent), or ``{"unix_after_ms": N}``: a Unix time in
    seconds, rounded up, of now + N ms on the middleware's own (real) clock; now lies
    between the request's start ``t0`` and its response ``t1``, and 1 s of tolerance."""
    if isinstance(want, dict):
        n = want["unix_after_ms"]
        assert got is not None and got.isdigit(), f"{where}: {got!r} is not a Unix time"
        lo = -(-(int(t0 * 1000) + n) // 1000) - 1
        hi = -(-(int(t1 * 1000) + 1 + n) // 1000) + 1
        assert lo <= int(got) <= hi, f"{where}: {got} not in [{lo}, {hi}]"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def check_body(text: str, exp: Dict[str, Any], where: str) -> None:
    if "body" not in exp and "body_members" not in exp:
        return
    body = json.loads(text)
    for k, v in exp.get("body", {}).items():
        assert body.get(k) == v, f"{where}: body {k}: {body.get(k)!r} != {v!r}"
    if "body_members" in exp:
        assert sorted(body) == sorted(exp["body_members"]), f"{where}: body members {body}"


def decision_list(d: Any) -> List[int]:
    return [int(d.allowed), d.limit, d.remaining, d.retry_after_ms, d.reset_after_ms]


async def api_call_async(port: int, step: Dict[str, Any]) -> Any:
    """One API step with the asyncio client (its own connection, inside one event loop)."""
    import redis.asyncio

    c = redis.asyncio.Redis(port=port)
    try:
        return await api_call(AsyncRateLimiter(c), step, True)
    finally:
        await c.aclose()


async def api_call(rl: Any, step: Dict[str, Any], is_async: bool) -> Any:
    async def wait(v: Any) -> Any:
        return await v if is_async else v

    if step["api"] == "all":
        rules = []
        for x in step["rules"]:
            opts = {"cost": x["cost"]} if "cost" in x else {}
            rules.append((x["key"], Policy(x["policy"], **opts) if "policy" in x
                          else rule_of(x["rule"], **opts)))
        return await wait(rl.all(rules, dryrun=step.get("dryrun", False)))
    if step["api"] == "rate":
        return await wait(rl.rate(step["key"], rule_of(step["rule"], **step.get("opts", {}))))
    if step["api"] == "allow":
        return await wait(rl.allow(step["key"], step["policy"], **step.get("opts", {})))
    raise ValueError(f"unknown api step {step['api']}")


def check_error(exp: Dict[str, Any], err: Optional[BaseException], where: str) -> None:
    """``expect.error``: the step's command answers an error reply containing that text."""
    if "error" in exp:
        assert err is not None, f"{where}: expected the error {exp['error']!r}, got a reply"
        assert exp["error"] in str(err), f"{where}: {err!r} lacks {exp['error']!r}"
    elif err is not None:
        raise err


def resp2(v: Any) -> Any:
    """A reply as RESP2 shows it: a map (RESP3) as its flat field/value array."""
    if isinstance(v, dict):
        return [x for k, val in v.items() for x in (k, resp2(val))]
    if isinstance(v, (list, tuple)):
        return [resp2(x) for x in v]
    return v


def reset_policies(r: Any, policies: List[List[Any]]) -> None:
    """Before a case: delete every policy (FLUSHDB keeps them), then RL.POLICY SET each."""
    for entry in r.execute_command("RL.POLICY", "LIST") or []:
        fields = entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2]))
        r.execute_command("RL.POLICY", "DEL", fields["name"])
    for args in policies:
        r.execute_command("RL.POLICY", "SET", *args)


def check_api_result(step: Dict[str, Any], res: Any, where: str) -> None:
    exp = step["expect"]
    if step["api"] == "all":
        got = {"allowed": res.allowed, "refused_by": res.refused_by,
               "decisions": [decision_list(d) for d in res.decisions]}
        want = {k: exp[k] for k in ("allowed", "refused_by", "decisions") if k in exp}
        assert {k: got[k] for k in want} == want, where
        assert type(res.refused_by) is int, where  # never None (decision 1)
    else:
        # the module's reply order: the five fields, then delay_ms (QUEUE) or token
        # (CONCURRENCY), then granted (PARTIAL), probe (PROBE, 0/1), waited_ms (WAIT),
        # those the reply has
        probe = None if res.probe is None else int(res.probe)
        extra = [x for x in (res.delay_ms, res.token, res.granted, probe, res.waited_ms)
                 if x is not None]
        got = decision_list(res) + extra
        assert got[:len(exp["reply"])] == exp["reply"], f"{where}: {got} != {exp['reply']}"


MEMORY_OPTS = {"cost", "dryrun", "reserve", "partial"}


def memory_eligible(case: Dict[str, Any]) -> bool:
    """The cases of the in-memory pass (the README's "The in-memory limiter"): only
    non-async requests, advance_ms, api rate/all steps (and rl_calls, not checked there);
    no policy, wait_ms, block_ms, lease or local_refusals; opts only cost, dryrun, reserve,
    partial; not opted out with "memory": false."""
    if case.get("memory") is False:
        return False
    cfg = case["config"]
    if "local_refusals" in cfg:
        return False
    lims = list(cfg.get("limits", []))
    for r in cfg.get("routes", []):
        lims += r["limits"] or []
    if any(k in lim for lim in lims for k in ("policy", "wait_ms", "block_ms", "lease")):
        return False
    for st in case["steps"]:
        if "request" in st:
            if "async" in st or st.get("process", "p1") != "p1":
                return False
        elif "api" in st:
            if st["api"] not in ("rate", "all") or set(st.get("opts", {})) - MEMORY_OPTS:
                return False
            if any("policy" in x for x in st.get("rules", [])):
                return False
        elif not ("advance_ms" in st or "rl_calls" in st):
            return False
    return True


PASSES = [(b, c) for c in [c for _, c in CASES] for b in ("redis", "memory")
          if b == "redis" or memory_eligible(c)]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("backend,case", PASSES,
                         ids=[f"{b}:{c['name']}" for b, c in PASSES])
def test_conformance(backend, case, framework, r, redis_port, serve_wsgi, serve_asgi, http):
    """``backend`` "memory": the second pass, the in-memory limiter in place of Redis (the
    package's MemoryClient, on the case's clock); keys and rl_calls are not checked."""
    from redis_ratelimit.memory import AsyncMemoryClient, MemoryClient, MemoryLimiter

    memory = backend == "memory"
    url: Any = f"redis://127.0.0.1:{redis_port}/0"
    r.flushdb()
    r.execute_command("RL.CLOCK", "SET", case["clock_ms"])
    reset_policies(r, case.get("policies", []))
    r.execute_command("CONFIG", "RESETSTAT")
    clock = [case["clock_ms"]]  # the package clock: the case's test clock
    cfg = config_of(case["config"], lambda: clock[0])
    if memory:
        limiter = MemoryLimiter(clock=lambda: clock[0] * 1000)
        url = MemoryClient(limiter) if framework == "flask" else AsyncMemoryClient(limiter)
    mount = case.get("mount", "")
    # processes: each its own app and middleware, same config, built on first use
    procs: Dict[str, Tuple[str, Any]] = {}
    closed: set = set()

    def base_of(step: Dict[str, Any], where: str) -> str:
        name = step.get("process", "p1")
        assert name not in closed, f"{where}: process {name} was closed"
        if name not in procs:
            if framework == "flask":
                app, mw = flask_app(url, cfg, mount)
                procs[name] = (serve_wsgi(app).url, mw)
            else:
                app, mw = fastapi_app(url, cfg, mount)
                procs[name] = (serve_asgi(app).url, mw)
        return procs[name][0]
    is_async = framework == "fastapi"  # API steps: the sync client with Flask, asyncio with FastAPI
    sync_client = redis.Redis(port=redis_port)
    api = RateLimiter(sync_client)
    # "async" requests: sent from threads, each on an HTTP connection of its own
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
    pending: Dict[str, Tuple[float, Any]] = {}

    def send(base: str, req: Dict[str, Any]) -> Tuple[Any, float]:
        import httpx

        with httpx.Client(timeout=30) as own:
            resp = own.request(req["method"], base + req["path"],
                               headers=req.get("headers", {}))
            return resp, time.time()

    def check_response(resp: Any, exp: Dict[str, Any], t0: float, t1: float,
                       where: str) -> None:
        assert resp.status_code == exp["status"], f"{where}: {resp.status_code} {resp.text}"
        for name, value in exp.get("headers", {}).items():
            check_header(resp.headers.get(name), value, t0, t1, f"{where}: header {name}")
        check_body(resp.text, exp, where)
        if not memory:
            check_keys(r, exp, where)

    try:
        for i, step in enumerate(case["steps"]):
            where = f"{case['name']} [{framework}, {backend}] step {i}"
            if "advance_ms" in step:
                r.execute_command("RL.CLOCK", "ADVANCE", step["advance_ms"])
                clock[0] += step["advance_ms"]
                continue
            if "rl_calls" in step:
                if memory:
                    continue
                got = rl_calls(r)
                assert got == step["rl_calls"], f"{where}: {got} module calls, not {step['rl_calls']}"
                continue
            if "close" in step:
                name = step["close"]
                if name in procs:
                    close_process(procs[name][1], framework)
                closed.add(name)
                continue
            if "until_waiting" in step:
                until_waiting(r, step["until_waiting"], where)
                continue
            if "await" in step:
                name = step["await"]
                assert name in pending, f"{where}: no pending request {name!r}"
                t0, fut = pending.pop(name)
                resp, t1 = fut.result(timeout=30)
                check_response(resp, step["expect"], t0, t1, where)
                continue
            if "policy" in step and "api" not in step:  # an operator's RL.POLICY
                exp = step.get("expect", {})
                try:
                    reply, err = r.execute_command("RL.POLICY", *step["policy"]), None
                except redis.ResponseError as e:
                    reply, err = None, e
                check_error(exp, err, where)
                if "reply" in exp:
                    reply = resp2(reply)
                    assert reply == exp["reply"], f"{where}: {reply!r} != {exp['reply']!r}"
                check_keys(r, exp, where)
                continue
            if "api" in step:
                try:
                    if memory:
                        res, err = asyncio.run(api_call(RateLimiter(MemoryClient(limiter)), step,
                                                        False)), None
                    elif is_async:
                        res, err = asyncio.run(api_call_async(redis_port, step)), None
                    else:
                        res, err = asyncio.run(api_call(api, step, False)), None
                except redis.ResponseError as e:
                    res, err = None, e
                check_error(step["expect"], err, where)
                if err is None:
                    check_api_result(step, res, where)
                if not memory:
                    check_keys(r, step["expect"], where)
                continue
            req = step["request"]
            base = base_of(step, where)
            t0 = time.time()
            if "async" in step:
                assert step["async"] not in pending, f"{where}: {step['async']} reused"
                pending[step["async"]] = (t0, pool.submit(send, base, req))
                continue
            resp = http.request(req["method"], base + req["path"],
                                headers=req.get("headers", {}))
            t1 = time.time()
            check_response(resp, step["expect"], t0, t1, where)
        assert not pending, f"{case['name']}: responses never awaited: {sorted(pending)}"
    finally:
        if pending:  # a failed case: let held requests time out before the servers close
            r.execute_command("RL.CLOCK", "ADVANCE", 86_400_000)
        pool.shutdown(wait=True)
        sync_client.close()


def rl_calls(r: Any) -> int:
    """The module's commands the server ran since CONFIG RESETSTAT (but RL.CLOCK and
    RL.POLICY: the runner's own)."""
    n = 0
    for name, v in r.info("commandstats").items():
        cmd = name[len("cmdstat_"):] if name.startswith("cmdstat_") else name
        if (cmd.startswith("rl.") or cmd == "cl.throttle") and cmd not in ("rl.clock",
                                                                           "rl.policy"):
            n += int(v["calls"])
    return n


def close_process(mw: Any, framework: str) -> None:
    """``close()`` of a process's middleware; returns when its leases are given back."""
    if framework == "flask":
        mw.close()
        return
    if mw.loop is None:  # never served a request: nothing to give back
        return
    asyncio.run_coroutine_threadsafe(mw.close(), mw.loop).result(10)


def until_waiting(r: Any, n: int, where: str) -> None:
    """Polls INFO ratelimit until the server holds ``n`` waiting clients (10 s at most)."""
    deadline = time.monotonic() + 10
    while True:
        got = int(r.info("ratelimit")["ratelimit_waiting_clients"])
        if got == n:
            return
        assert time.monotonic() < deadline, f"{where}: {got} waiting clients, not {n}"
        time.sleep(0.002)
