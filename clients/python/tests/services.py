"""The same small service in Flask (WSGI middleware), Django (its middleware) and FastAPI
(ASGI middleware), behind one redis_ratelimit Config."""

from __future__ import annotations

from typing import Any, Optional

from redis_ratelimit import Config, Limit, Request, Route, Rule, by_ip, connect, connect_async
from redis_ratelimit.keys import bearer

USERS = {"alice-token": "alice", "bob-token": "bob", "carol-token": "carol"}
ORGS = {"alice": "acme", "bob": "acme"}  # carol has no organisation
TRUSTED = ["127.0.0.1/32"]  # the test client is "the load balancer"

user_of = bearer(USERS)


def org_of(req: Request) -> Optional[str]:
    u = user_of(req)
    return ORGS.get(u) if u else None


ip_of = by_ip(TRUSTED)


def anonymous_ip(req: Request) -> Optional[str]:
    return None if user_of(req) else ip_of(req)


def limits(**kw: Any) -> list:
    """user: GCRA 3 at once, 1 per 20 s; org: 4 per sliding minute; ip (anonymous): GCRA
    2 at once, 1 per 30 s. ``kw`` overrides fields of every Limit. (Periods of tens of
    seconds: the keys' TTLs run in real time while the module's clock is frozen, so they
    must outlast any pause of a loaded test machine.)"""
    return [Limit("user", Rule.gcra(3, 1, 20_000), user_of, **kw),
            Limit("org", Rule.sliding(4, 60_000), org_of, **kw),
            Limit("ip", Rule.gcra(2, 1, 30_000), anonymous_ip, **kw)]


def config(**kw: Any) -> Config:
    base: dict = dict(
        limits=limits(),
        routes=[Route("/login", [Limit("login", Rule.fixed(2, 60_000), ip_of,
                                       fail_open=False)], methods=["POST"])],
        exempt=["/health", "/webhooks/*"],
        hash_tag=org_of,
    )
    base.update(kw)
    return Config(**base)


def flask_app(redis_url: str, cfg: Config, timeout: float = 1.0) -> Any:
    from flask import Flask

    from redis_ratelimit.wsgi import RateLimitMiddleware

    app = Flask(__name__)
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, redis=connect(redis_url, timeout),  # type: ignore
                                       config=cfg)

    @app.get("/")
    def index() -> Any:
        return {"hello": "world"}

    @app.get("/health")
    def health() -> Any:
        return {"ok": True}

    @app.post("/webhooks/stripe")
    def hook() -> Any:
        return {"ok": True}

    @app.post("/login")
    def login() -> Any:
        return {"ok": True}

    return app


def fastapi_app(redis_url: str, cfg: Config, timeout: float = 1.0) -> Any:
    from fastapi import FastAPI

    from redis_ratelimit.asgi import RateLimitMiddleware

    app = FastAPI()
    app.add_middleware(RateLimitMiddleware, redis=connect_async(redis_url, timeout),
                       config=cfg)

    @app.get("/")
    async def index() -> Any:
        return {"hello": "world"}

    @app.get("/health")
    async def health() -> Any:
        return {"ok": True}

    @app.post("/webhooks/stripe")
    async def hook() -> Any:
        return {"ok": True}

    @app.post("/login")
    async def login() -> Any:
        return {"ok": True}

    return app


# ---- Django: settings configured once per process, the middleware built per app.

CURRENT_CONFIG: Optional[Config] = None


def _django_views() -> Any:
    from django.http import JsonResponse
    from django.urls import path
    from django.views.decorators.csrf import csrf_exempt

    def ok(request: Any) -> Any:
        return JsonResponse({"hello": "world"})

    return [path("", ok), path("health", ok), path("webhooks/stripe", csrf_exempt(ok)),
            path("login", csrf_exempt(ok))]


urlpatterns: list = []


def django_app(redis_url: str, cfg: Config, timeout: float = 1.0) -> Any:
    import django
    from django.conf import settings

    global CURRENT_CONFIG, urlpatterns
    if not settings.configured:
        settings.configure(DEBUG=False, ALLOWED_HOSTS=["*"], ROOT_URLCONF=__name__,
                           SECRET_KEY="test", MIDDLEWARE=[
                               "redis_ratelimit.django.RateLimitMiddleware",
                               "django.middleware.common.CommonMiddleware"],
                           INSTALLED_APPS=[], USE_TZ=True)
        django.setup()
        urlpatterns = _django_views()
    CURRENT_CONFIG = cfg
    settings.REDIS_RATELIMIT = {"redis": redis_url, "timeout": timeout,
                                "config": f"{__name__}.CURRENT_CONFIG"}
    from django.core.handlers.wsgi import WSGIHandler

    return WSGIHandler()  # loads the middleware now, with this config
