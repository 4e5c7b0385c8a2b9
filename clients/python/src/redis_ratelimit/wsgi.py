"""WSGI middleware (Flask, Django under WSGI, any WSGI app).

    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, redis=connect(url), config=Config(...))

Sync: each checked request costs one round trip to Redis (two with shadow limits).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Iterable, List, Optional

from .keys import Request
from .middleware import Config, Engine, Outcome, close_sync, run_sync, sweep_sync

_REASONS = {403: "403 Forbidden", 429: "429 Too Many Requests", 503: "503 Service Unavailable"}


def request_from_environ(environ: Dict[str, Any], state: Optional[Dict[str, object]] = None,
                         path: Optional[str] = None) -> Request:
    """The request as the middleware sees it. Its path is ``PATH_INFO``: the path below
    where the app is mounted (``SCRIPT_NAME``), so routes and exemptions are written
    relative to the app, wherever it is mounted."""
    headers: Dict[str, List[str]] = {}
    for k, v in environ.items():
        if k.startswith("HTTP_"):
            name = k[5:].replace("_", "-").lower()
            # WSGI servers join repeated headers with ", " (X-Forwarded-For stays a list)
            headers.setdefault(name, []).append(v)
    return Request(environ.get("REQUEST_METHOD", "GET"), path or environ.get("PATH_INFO", "") or "/",
                   headers, environ.get("REMOTE_ADDR", ""), state or {})


class RateLimitMiddleware:
    """Checks each request before the app; refuses with 429 (or 503 when a fail-closed
    limit cannot be checked); adds the draft-10 headers to every checked response."""

    def __init__(self, app: Callable[..., Iterable[bytes]], *, redis: Any, config: Config):
        self.app = app
        self.redis = redis
        self.engine = Engine(config)

    def check(self, req: Request) -> Optional[Outcome]:
        plan = self.engine.plan(req)
        return None if plan is None else run_sync(self.engine, self.redis, plan)

    def sweep(self) -> int:
        """Gives back the leases that lapsed now (the background sweep does it too)."""
        return sweep_sync(self.engine, self.redis)

    def close(self) -> None:
        """Gives back every lease this process holds (call it when the worker stops)."""
        close_sync(self.engine, self.redis)

    def __call__(self, environ: Dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        out = self.check(request_from_environ(environ))
        if out is None:
            return self.app(environ, start_response)
        if out.status is not None:
            start_response(_REASONS[out.status], [*out.headers.items(),
                                                  ("Content-Length", str(len(out.body)))])
            return [out.body]
        if out.delay_ms:  # a QUEUE limit shapes: this request proceeds at its turn
            time.sleep(out.delay_ms / 1000)
        extra = list(out.headers.items())

        def start(status: str, headers: List[Any], exc_info: Any = None) -> Any:
            return start_response(status, [*headers, *extra], exc_info)

        return self.app(environ, start)
