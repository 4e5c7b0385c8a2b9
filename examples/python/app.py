"""A small Flask app behind the rate limiter.

    pip install -r requirements.txt
    REDIS_URL=redis://127.0.0.1:6379/0 python app.py        # listens on 127.0.0.1:8000

    curl -i http://127.0.0.1:8000/                                   # anonymous: per IP
    curl -i -H 'Authorization: Bearer alice-token' http://127.0.0.1:8000/   # user + org

Environment: REDIS_URL, TRUSTED_PROXIES (default 0), FAIL_OPEN (1 or 0, default 1), PORT.
"""

import logging
import os

from flask import Flask, jsonify

from ratelimit_middleware import Config, Identity, Limit, RateLimiter, bearer_tokens, connect


def create_app(redis_client, config: Config) -> Flask:
    app = Flask(__name__)
    RateLimiter(app, redis=redis_client, config=config)

    @app.get("/")
    def index():
        return jsonify(hello="world")

    return app


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    tokens = {
        "alice-token": Identity(user="alice", org="acme"),
        "bob-token": Identity(user="bob", org="acme"),
        "carol-token": Identity(user="carol"),  # no organisation: only her user limit
    }
    config = Config(
        user=Limit.gcra("user", burst=10, count=10, period_ms=60_000),
        org=Limit.sliding("org", limit=15, window_ms=60_000),
        ip=Limit.gcra("ip", burst=5, count=5, period_ms=60_000),
        identify=bearer_tokens(tokens),
        trusted_proxies=int(os.environ.get("TRUSTED_PROXIES", "0")),
        fail_open=os.environ.get("FAIL_OPEN", "1") != "0",
    )
    r = connect(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    create_app(r, config).run(host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
