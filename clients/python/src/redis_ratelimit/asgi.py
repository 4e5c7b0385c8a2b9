"""ASGI middleware (FastAPI, Starlette, any ASGI app), asyncio-native: it awaits
``redis.asyncio`` and never blocks the event loop.

    app.add_middleware(RateLimitMiddleware, redis=connect_async(url), config=Config(...))
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Dict, List, MutableMapping, Optional

from .keys import Request
from .middleware import Config, Engine, Outcome, close_async, run_async, sweep_async

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def app_path(scope: Scope) -> str:
    """The path the app sees where it is mounted: ``path`` without ``root_path`` (ASGI
    servers and Starlette's ``Mount`` keep the full path in ``path`` and the mount point in
    ``root_path``). A ``path`` that does not start with ``root_path`` (older servers that
    strip it) is taken as it is."""
    path = scope.get("path") or "/"
    root = (scope.get("root_path") or "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root):] or "/"
    return path


def request_from_scope(scope: Scope) -> Request:
    headers: Dict[str, List[str]] = {}
    for k, v in scope.get("headers") or ():
        headers.setdefault(k.decode("latin-1").lower(), []).append(v.decode("latin-1"))
    client = scope.get("client")
    return Request(scope.get("method", "GET"), app_path(scope), headers,
                   client[0] if client else "", dict(scope.get("state") or {}))


class RateLimitMiddleware:
    def __init__(self, app: Callable[..., Awaitable[None]], *, redis: Any, config: Config):
        self.app = app
        self.redis = redis
        self.engine = Engine(config)
        self.loop: Optional[asyncio.AbstractEventLoop] = None  # the server's, once called

    async def check(self, req: Request) -> Optional[Outcome]:
        plan = self.engine.plan(req)
        return None if plan is None else await run_async(self.engine, self.redis, plan)

    async def sweep(self) -> int:
        """Gives back the leases that lapsed now (the background task does it too)."""
        return await sweep_async(self.engine, self.redis)

    async def close(self) -> None:
        """Gives back every lease this process holds; done on the lifespan's shutdown."""
        await close_async(self.engine, self.redis)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            async def receive_shutdown() -> MutableMapping[str, Any]:
                msg = await receive()
                if msg.get("type") == "lifespan.shutdown":
                    await self.close()
                return msg

            await self.app(scope, receive_shutdown, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.loop = asyncio.get_running_loop()
        out = await self.check(request_from_scope(scope))
        if out is None:
            await self.app(scope, receive, send)
            return
        if out.delay_ms:  # a QUEUE limit shapes: this request proceeds at its turn
            await asyncio.sleep(out.delay_ms / 1000)
        extra = [(k.lower().encode("latin-1"), v.encode("latin-1"))
                 for k, v in out.headers.items()]
        if out.status is not None:
            await send({"type": "http.response.start", "status": out.status,
                        "headers": [*extra, (b"content-length", str(len(out.body)).encode())]})
            await send({"type": "http.response.body", "body": out.body})
            return

        async def send_with_headers(msg: MutableMapping[str, Any]) -> None:
            if msg["type"] == "http.response.start":
                msg = dict(msg)
                msg["headers"] = [*msg.get("headers", ()), *extra]
            await send(msg)

        await self.app(scope, receive, send_with_headers)
