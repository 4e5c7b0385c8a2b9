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

import functools
import time
from typing import Any, Callable, List, Optional

from django.conf import settings  # type: ignore[import-untyped]
from django.http import HttpRequest, HttpResponse  # type: ignore[import-untyped]
from django.utils.module_loading import import_string  # type: ignore[import-untyped]

from .client import connect
from .decorators import LIMITS_ATTR, BaseLimiter, stacked, view_name
from .keys import Request
from .middleware import Config, Engine, Limit, close_sync, run_sync, sweep_sync
from .wsgi import request_from_environ


def django_user(req: Request) -> Optional[str]:
    """A key function: the authenticated Django user's primary key (None = anonymous)."""
    dj = req.state.get("django_request")
    user = getattr(dj, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return str(user.pk)


def _redis_from_settings() -> Any:
    conf = getattr(settings, "REDIS_RATELIMIT", {})
    client = conf.get("redis", "redis://127.0.0.1:6379/0")
    return connect(client, conf.get("timeout", 0.05)) if isinstance(client, str) else client


def _response(out: Any, get: Callable[[], HttpResponse]) -> HttpResponse:
    if out.status is not None:
        resp = HttpResponse(out.body, status=out.status)
    else:
        if out.delay_ms:  # a QUEUE limit shapes: this request proceeds at its turn
            time.sleep(out.delay_ms / 1000)
        resp = get()
    for k, v in out.headers.items():
        resp[k] = v
    return resp


class Limiter(BaseLimiter):
    """Per-view limits: ``limiter = Limiter(redis=connect(url), key=django_user)``, then
    ``@limiter.limit("5/minute", ...)`` on a view (function or ``as_view()``). Without
    ``redis``, the client of ``settings.REDIS_RATELIMIT`` (``redis``, ``timeout``)."""

    def __init__(self, redis: Any = None, key: Any = None, config: Optional[Config] = None,
                 **config_kw: Any):
        kw = {"key": key} if key is not None else {}
        super().__init__(redis if redis is not None else _redis_from_settings(),
                         config=config, **kw, **config_kw)

    def limit(self, rule: Any, **kw: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """``@limiter.limit("10/minute", key=..., cost=..., name=..., lease=..., allow=...,
        deny=..., algorithm=..., shadow=..., fail_open=...)``: stacked decorators are one
        ``RL.ALL``."""
        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            existing = stacked(fn)
            opts = dict(kw)
            name = opts.pop("name", None) or view_name(fn, len(existing or ()))
            new = self.limits(rule, name=name, **opts)
            if existing is not None:
                existing[:0] = new
                return fn
            limits: List[Limit] = list(new)

            @functools.wraps(fn)
            def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
                req = request_from_environ(request.META, {"django_request": request},
                                           request.path_info or "/")
                plan = self.engine.plan(req, limits)
                if plan is None:
                    return fn(request, *args, **kwargs)
                out = run_sync(self.engine, self.redis, plan)
                return _response(out, lambda: fn(request, *args, **kwargs))

            setattr(view, LIMITS_ATTR, limits)
            return view

        return decorate

    def sweep(self) -> int:
        return sweep_sync(self.engine, self.redis)

    def close(self) -> None:
        """Gives back every lease this process holds."""
        close_sync(self.engine, self.redis)


_default: Optional[Limiter] = None


def limit(rule: Any, **kw: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``@limit("10/minute", key=django_user)``: the decorator of one limiter per process,
    built on first use from ``settings.REDIS_RATELIMIT`` (``redis``, ``timeout``; its
    ``config``, if any, gives the defaults: ``on_decision``, ``local_refusals``, ...). The
    default key is the client address."""
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        global _default
        if _default is None:
            conf = getattr(settings, "REDIS_RATELIMIT", {})
            config = conf.get("config")
            if isinstance(config, str):
                config = import_string(config)
            _default = Limiter(config=config)
        return _default.limit(rule, **kw)(fn)

    return decorate


class RateLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response
        conf = getattr(settings, "REDIS_RATELIMIT", {})
        self.redis: Any = _redis_from_settings()
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
        return _response(out, lambda: self.get_response(request))

    def close(self) -> None:
        """Gives back every lease this process holds."""
        close_sync(self.engine, self.redis)
