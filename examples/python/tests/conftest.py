"""Fixtures: a real redis-server with the module and the test clock, and the example app
served over real HTTP on a free 127.0.0.1 port.

RL_REDIS_PORT: use the server already listening there (scripts/examples-test.sh starts one;
it must have the module loaded with `test-clock yes`). Otherwise a server is started here
from RL_MODULE (default: target/release/libredis_ratelimit.so of this repository).
"""

import http.client
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import redis
from werkzeug.serving import make_server

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from app import create_app  # noqa: E402
from redis_ratelimit import connect  # noqa: E402

ROOT = HERE.parents[2]
NOW_MS = 1_700_000_040_000  # a multiple of 60 000: sliding windows start here


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_port():
    if os.environ.get("RL_REDIS_PORT"):
        yield int(os.environ["RL_REDIS_PORT"])
        return
    module = os.environ.get("RL_MODULE", str(ROOT / "target/release/libredis_ratelimit.so"))
    if not os.path.isfile(module):
        pytest.exit(f"module not built: {module} (cargo build --release)", returncode=2)
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp, "--loadmodule", os.path.abspath(module),
             "test-clock", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            r = redis.Redis(port=port)
            for _ in range(100):
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            yield port
        finally:
            proc.terminate()
            proc.wait(10)


@pytest.fixture
def rds(redis_port):
    """A plain client for setting up and inspecting state; the module clock is frozen."""
    r = redis.Redis(port=redis_port, decode_responses=True)
    r.flushall()
    r.execute_command("RL.CLOCK", "SET", NOW_MS)
    yield r
    r.close()


class Server:
    """The app on a real HTTP server in a thread; `get` sends one request over a socket."""

    def __init__(self, app):
        self.http = make_server("127.0.0.1", 0, app, threaded=True)
        self.port = self.http.server_port
        self.thread = threading.Thread(
            target=self.http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def get(self, path="/", headers=None, method="GET"):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, headers=headers or {})
            resp = conn.getresponse()
            resp.body = resp.read()
            return resp
        finally:
            conn.close()

    def close(self):
        self.http.shutdown()
        self.thread.join(5)


@pytest.fixture
def serve(redis_port):
    """serve(config, redis_url=None) -> Server; the client built by `connect`."""
    started = []

    def start(config, redis_url=None):
        # 1 s: a loaded test machine must not turn a slow reply into a fail-open
        client = connect(redis_url or f"redis://127.0.0.1:{redis_port}/0", timeout=1.0)
        server = Server(create_app(client, config))
        started.append((server, client))
        return server

    yield start
    for server, client in started:
        server.close()
        client.close()
