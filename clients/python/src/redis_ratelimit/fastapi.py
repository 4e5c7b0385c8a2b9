"""FastAPI: a per-route dependency, as slowapi limits a route.

    from fastapi import Depends, FastAPI
    from redis_ratelimit import connect_async
    from redis_ratelimit.fastapi import Limiter

    limiter = Limiter(redis=connect_async(url), key=by_ip)
    app = FastAPI()
    limiter.install(app)        # 429/403/503 answered as RFC 9457 problems (+ headers)

    @app.get("/search", dependencies=[Depends(limiter.limit("10/second; 1000/day"))])
    async def search(): ...

Every limit of one dependency is checked in one atomic ``RL.ALL``. Admitted: the draft-10
headers are set on the response FastAPI builds from the endpoint's return value (a route
that returns its own ``Response`` object gets them only if it declares a ``response:
Response`` parameter and copies them; use the ASGI middleware for those). Refused: the
dependency raises :class:`RateLimitExceeded` (a ``fastapi.HTTPException``), which
``install(app)`` answers as the middleware does; without ``install`` FastAPI answers it as
any HTTPException (the status and headers, the problem as ``{"detail": ...}``).
Asyncio-native: awaits ``redis.asyncio``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Dict, Optional

from fastapi import HTTPException
from starlette.requests import Request as StarletteRequest
from starlette.responses import Response

from .asgi import request_from_scope
from .decorators import BaseLimiter
from .middleware import Outcome, close_async, run_async, sweep_async


class RateLimitExceeded(HTTPException):
    """A refusal: ``status_code`` 429 (403 for a denied key, 503 for a fail-closed limit),
    ``headers`` (Retry-After, RateLimit, ...), ``detail`` the problem's members."""

    def __init__(self, out: Outcome):
        body: Dict[str, Any] = json.loads(out.body) if out.body else {}
        super().__init__(out.status or 429, detail=body, headers=dict(out.headers))
        self.outcome = out


async def _problem_response(request: Any, exc: Exception) -> Response:
    assert isinstance(exc, RateLimitExceeded)
    out = exc.outcome
    return Response(out.body, status_code=out.status or 429, headers=dict(out.headers),
                    media_type="application/problem+json")


class Limiter(BaseLimiter):
    """``Limiter(redis=connect_async(url), key=by_ip, config=None, **Config fields)``."""

    def install(self, app: Any) -> None:
        """Answers :class:`RateLimitExceeded` as an RFC 9457 problem (as the middleware)."""
        app.add_exception_handler(RateLimitExceeded, _problem_response)

    def limit(self, rule: Any, *, name: Optional[str] = None, **kw: Any
              ) -> Callable[..., Any]:
        """A dependency: ``Depends(limiter.limit("10/minute", key=..., cost=..., name=...,
        lease=..., allow=..., deny=..., algorithm=..., shadow=..., fail_open=...))``. The
        default name is the route's name (its endpoint function's, ``search``)."""
        cache: Dict[str, Any] = {}

        async def dependency(request: StarletteRequest, response: Response) -> None:
            scope = request.scope
            lim_name = name
            if lim_name is None:
                route = scope.get("route")  # the endpoint's name, as slowapi keys a route
                lim_name = (getattr(route, "name", None) or getattr(route, "path", None)
                            or scope.get("path", "/"))
            limits = cache.get(lim_name)
            if limits is None:
                limits = cache[lim_name] = self.limits(rule, name=lim_name, **kw)
            req = request_from_scope(scope)
            req.state["starlette_request"] = request
            plan = self.engine.plan(req, limits)
            if plan is None:
                return
            out = await run_async(self.engine, self.redis, plan)
            if out.status is not None:
                raise RateLimitExceeded(out)
            if out.delay_ms:
                await asyncio.sleep(out.delay_ms / 1000)
            for k, v in out.headers.items():
                response.headers[k] = v

        if name is not None:  # checked now: a bad string fails at import
            cache[name] = self.limits(rule, name=name, **kw)
        return dependency

    async def sweep(self) -> int:
        return await sweep_async(self.engine, self.redis)

    async def close(self) -> None:
        """Gives back every lease this process holds (call it in the app's lifespan)."""
        await close_async(self.engine, self.redis)
