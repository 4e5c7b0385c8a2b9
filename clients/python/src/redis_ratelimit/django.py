"""Django middleware.

settings.py::

    MIDDLEWARE = ["redis_ratelimit.django.RateLimitMiddleware", ...]
    REDIS_RATELIMIT = {
        "redis": "redis://127.0.0.1:6379/0",   # a URL, or a redis client
        "timeout": 0.05,                        # seconds, with a URL
        "config": "myproject.ratelimits.CONFIG",  # a redis_ratelimit.Config, or its path
    }

Put it after ``AuthenticationMiddleware`` to key on ``request.user``: key functions find the
Django request in ``Request.state["django_request"]`` (see :func:`django_user`).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from django.conf import settings  # type: ignore[import-untyped]
from django.http import HttpRequest, HttpResponse  # type: ignore[import-untyped]
from django.utils.module_loading import import_string  # type: ignore[import-untyped]

from .client import connect
from .keys import Request
from .middleware import Config, Engine, run_sync
from .wsgi import request_from_environ


def django_user(req: Request) -> Optional[str]:
    """A key function: the authenticated Django user's primary key (None = anonymous)."""
    dj = req.state.get("django_request")
    user = getattr(dj, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return str(user.pk)


class RateLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response
        conf = getattr(settings, "REDIS_RATELIMIT", {})
        client = conf.get("redis", "redis://127.0.0.1:6379/0")
        self.redis: Any = (connect(client, conf.get("timeout", 0.05))
                           if isinstance(client, str) else client)
        config = conf.get("config")
        if isinstance(config, str):
            config = import_string(config)
        if not isinstance(config, Config):
            raise TypeError("REDIS_RATELIMIT['config'] must be a redis_ratelimit.Config")
        self.engine = Engine(config)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # request.path_info: the path below the script prefix, where routes are matched
        req = request_from_environ(request.META, {"django_request": request},
                                   request.path_info or "/")
        plan = self.engine.plan(req)
        if plan is None:
            return self.get_response(request)
        out = run_sync(self.engine, self.redis, plan)
        if out.status is not None:
            resp = HttpResponse(out.body, status=out.status)
        else:
            if out.delay_ms:  # a QUEUE limit shapes: this request proceeds at its turn
                time.sleep(out.delay_ms / 1000)
            resp = self.get_response(request)
        for k, v in out.headers.items():
            resp[k] = v
        return resp
