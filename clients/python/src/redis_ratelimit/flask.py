"""Flask: a per-view decorator, as Flask-Limiter writes it.

    from redis_ratelimit import connect
    from redis_ratelimit.flask import Limiter

    limiter = Limiter(redis=connect(url), key=by_ip)        # or Limiter(app=app, ...)

    @app.post("/login")
    @limiter.limit("5/minute; 100/day", key=by_ip)          # one RL.ALL for both
    def login(): ...

    @app.get("/search")
    @limiter.limit(lambda req: "100/minute" if req.header("x-plan") == "pro" else "10/minute",
                   cost=lambda req: int(req.header("x-pages") or 1))
    def search(): ...

The decorator goes **below** ``@app.route`` (it wraps the view). Stacked decorators add to
one list: every limit of a view is checked in one atomic ``RL.ALL``. Admitted responses get
the draft-10 headers; a refusal is a 429 (or 403 for a denied key, 503 for a fail-closed
limit) with the RFC 9457 body, without calling the view. Key and rule functions get a
:class:`~redis_ratelimit.Request` (``req.state["flask_request"]`` is Flask's).
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, List, Optional

import flask

from .decorators import LIMITS_ATTR, BaseLimiter, stacked, view_name
from .middleware import Limit, close_sync, run_sync, sweep_sync
from .wsgi import request_from_environ


class Limiter(BaseLimiter):
    """``Limiter(redis=connect(url), key=by_ip, config=None, app=None, **Config fields)``.
    ``close()`` gives back the leases this process holds: call it when a worker stops
    (a background sweep gives back lapsed ones meanwhile). With ``app`` it is also in
    ``app.extensions["redis_ratelimit"]``."""

    def __init__(self, redis: Any, key: Any = None, config: Any = None,
                 app: Optional[flask.Flask] = None, **config_kw: Any):
        kw = {"key": key} if key is not None else {}
        super().__init__(redis, config=config, **kw, **config_kw)
        if app is not None:
            self.init_app(app)

    def init_app(self, app: flask.Flask) -> None:
        app.extensions["redis_ratelimit"] = self

    def limit(self, rule: Any, **kw: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """``@limiter.limit("10/minute", key=..., cost=..., name=..., lease=..., allow=...,
        deny=..., algorithm=..., shadow=..., fail_open=..., block_ms=..., wait_ms=...)``."""
        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            existing = stacked(fn)
            opts = dict(kw)
            name = opts.pop("name", None) or view_name(fn, len(existing or ()))
            new = self.limits(rule, name=name, **opts)
            if existing is not None:
                existing[:0] = new  # the decorator above runs first: its limits first
                return fn
            limits: List[Limit] = list(new)

            @functools.wraps(fn)
            def view(*args: Any, **kwargs: Any) -> Any:
                return self._check(limits, fn, args, kwargs)

            setattr(view, LIMITS_ATTR, limits)
            return view

        return decorate

    def _check(self, limits: List[Limit], fn: Callable[..., Any], args: Any,
               kwargs: Any) -> Any:
        fr = flask.request
        req = request_from_environ(fr.environ, {"flask_request": fr._get_current_object()},
                                   fr.path)
        plan = self.engine.plan(req, limits)
        if plan is None:
            return fn(*args, **kwargs)
        out = run_sync(self.engine, self.redis, plan)
        if out.status is not None:
            return flask.Response(out.body, status=out.status, headers=out.headers)
        if out.delay_ms:
            time.sleep(out.delay_ms / 1000)
        resp = flask.make_response(fn(*args, **kwargs))
        for k, v in out.headers.items():
            resp.headers[k] = v
        return resp

    def sweep(self) -> int:
        return sweep_sync(self.engine, self.redis)

    def close(self) -> None:
        """Gives back every lease this process holds."""
        close_sync(self.engine, self.redis)
