"""A small Flask service rate-limited by the redis-ratelimit-module package (clients/python).

    pip install -r requirements.txt        # from this directory: Flask + ../../clients/python
    REDIS_URL=redis://127.0.0.1:6379/0 python app.py          # listens on 127.0.0.1:8000

    curl -i http://127.0.0.1:8000/                                          # anonymous: per IP
    curl -i -H 'Authorization: Bearer alice-token' http://127.0.0.1:8000/  # user + org
    curl -i -X POST http://127.0.0.1:8000/login                             # 5 per 15 min per IP

Environment: REDIS_URL, TRUSTED_PROXIES (comma-separated CIDRs of your load balancers,
default none), FAIL_OPEN (1 or 0, default 1), PORT.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Optional, Sequence

from flask import Flask, jsonify

from redis_ratelimit import Config, Limit, Request, Route, Rule, by_ip, connect
from redis_ratelimit.keys import bearer
from redis_ratelimit.wsgi import RateLimitMiddleware

# Stand-ins for the application's authentication (a session, JWT claims, an API key table).
TOKENS = {"alice-token": "alice", "bob-token": "bob", "carol-token": "carol"}
ORGS = {"alice": "acme", "bob": "acme"}  # carol has no organisation

user_of = bearer(TOKENS)


def org_of(req: Request) -> Optional[str]:
    user = user_of(req)
    return ORGS.get(user) if user else None


def make_config(trusted_proxies: Sequence[str] = (), fail_open: bool = True) -> Config:
    ip_of = by_ip(trusted_proxies)  # X-Forwarded-For read right to left; IPv6 per /64

    def anonymous_ip(req: Request) -> Optional[str]:
        return None if user_of(req) else ip_of(req)

    return Config(
        limits=[
            # authenticated: the user's own limit and the organisation's, in one RL.ALL
            Limit("user", Rule.gcra(10, 10, 60_000), user_of, fail_open=fail_open),
            Limit("org", Rule.sliding(15, 60_000), org_of, fail_open=fail_open),
            # anonymous: per client address
            Limit("ip", Rule.gcra(5, 5, 60_000), anonymous_ip, fail_open=fail_open),
        ],
        # brute-force protection on the login form: fails closed (503) without Redis
        routes=[Route("/login", [Limit("login", Rule.fixed(5, 900_000), ip_of,
                                       fail_open=False)], methods=["POST"])],
        exempt=["/health", "/webhooks/*"],
        hash_tag=org_of,  # rl:{acme}:user:alice and rl:{acme}:org:acme share a cluster slot
    )


def create_app(redis_client: Any, config: Config) -> Flask:
    app = Flask(__name__)
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, redis=redis_client,  # type: ignore
                                       config=config)

    @app.get("/")
    def index() -> Any:
        return jsonify(hello="world")

    @app.get("/health")
    def health() -> Any:
        return jsonify(ok=True)

    @app.post("/login")
    def login() -> Any:
        return jsonify(ok=True)

    return app


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    proxies = [p for p in os.environ.get("TRUSTED_PROXIES", "").split(",") if p.strip()]
    cfg = make_config(proxies, fail_open=os.environ.get("FAIL_OPEN", "1") != "0")
    client = connect(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))  # 50 ms timeouts
    create_app(client, cfg).run(host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
