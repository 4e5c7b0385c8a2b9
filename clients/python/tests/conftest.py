"""Fixtures: a real redis-server with the module (and the test clock), and real HTTP servers.

RL_SERVER (default redis-server) and RL_MODULE (default <repo>/target/release/
libredis_ratelimit.so) choose the server and the module. Each session starts its own
server on a free 127.0.0.1 port; the module's clock is frozen with RL.CLOCK SET at NOW_MS
(a multiple of 60 s, so windows start there) before every test.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from typing import Any, Iterator, List, Tuple

import pytest
import redis

ROOT = pathlib.Path(__file__).resolve().parents[3]
NOW_MS = 1_700_000_040_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is free too."""
    import random

    for _ in range(200):
        p = random.randint(20000, 45000)
        try:
            for q in (p, p + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", q))
        except OSError:
            continue
        return p
    raise RuntimeError("no free port pair for a cluster node")


def module_path() -> str:
    m = os.environ.get("RL_MODULE", str(ROOT / "target/release/libredis_ratelimit.so"))
    if not os.path.isfile(m):
        pytest.exit(f"module not built: {m} (cargo build --release)", returncode=2)
    return os.path.abspath(m)


def server_binary() -> str:
    s = os.environ.get("RL_SERVER", "redis-server")
    if shutil.which(s) is None and not os.path.isfile(s):
        pytest.exit(f"{s} not found (set RL_SERVER)", returncode=2)
    return s


def start_server(tmp: str, port: int, *extra: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", tmp, "--logfile", os.path.join(tmp, f"{port}.log"),
         *extra, "--loadmodule", module_path(), "test-clock", "yes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            r.ping()
            pid = int(r.info("server")["process_id"])
            break
        except (redis.ConnectionError, redis.BusyLoadingError):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = pathlib.Path(tmp, f"{port}.log")
                raise RuntimeError(f"redis-server did not start on {port}: "
                                   f"{log.read_text() if log.exists() else ''}")
            time.sleep(0.02)
    r.close()
    if pid != proc.pid:
        # Another process's server took the port between free_port() and our bind (another
        # suite running at the same time): ours could not listen.
        proc.terminate()
        proc.wait(10)
        raise PortTaken(port)
    return proc


class PortTaken(Exception):
    """Another server answered on the port chosen for ours."""


def start_on_free_port(tmp: str, *extra: str) -> Tuple[int, subprocess.Popen]:
    """A server on a free port, retried on another port if one is taken meanwhile."""
    for _ in range(10):
        port = free_port()
        try:
            return port, start_server(tmp, port, *extra)
        except PortTaken:
            continue
    raise RuntimeError("no free port for redis-server after 10 attempts")


@pytest.fixture(scope="session")
def redis_port(ratelimit_server: Any) -> Iterator[int]:
    """The session's server: the package's own pytest plugin (redis_ratelimit.testing),
    which finds the module and the server from RL_MODULE / RL_SERVER here."""
    yield ratelimit_server.port


@pytest.fixture
def r(redis_port: int) -> Iterator[redis.Redis]:
    """A plain client for setup and inspection; the server is empty, its clock frozen."""
    c = redis.Redis(port=redis_port, decode_responses=True)
    c.flushall()
    drop_policies(c)
    c.execute_command("RL.CLOCK", "SET", NOW_MS)
    yield c
    c.close()


def drop_policies(c: Any, **kw: Any) -> None:
    """FLUSHALL keeps policies (node configuration): delete them all."""
    for e in c.execute_command("RL.POLICY", "LIST", **kw) or []:
        name = e["name"] if isinstance(e, dict) else dict(zip(e[::2], e[1::2]))["name"]
        c.execute_command("RL.POLICY", "DEL", name, **kw)


@pytest.fixture
def closed_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there


# ------------------------------------------------------------------ cluster

RANGES = [(0, 5460), (5461, 10922), (10923, 16383)]


@pytest.fixture(scope="session")
def cluster_ports():
    """A 3-node Redis Cluster of the same server binary, each node with the module."""
    with tempfile.TemporaryDirectory() as tmp:
        ports: List[int] = []
        procs = []
        try:
            while len(procs) < len(RANGES):
                p = free_cluster_port()
                try:
                    procs.append(start_server(tmp, p, "--cluster-enabled", "yes",
                                              "--cluster-config-file", f"{tmp}/nodes-{p}.conf",
                                              "--cluster-node-timeout", "5000"))
                except PortTaken:
                    continue
                ports.append(p)
            nodes = [redis.Redis(port=p, decode_responses=True) for p in ports]
            for n, (lo, hi) in zip(nodes, RANGES):
                n.execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
            for p in ports[1:]:
                nodes[0].execute_command("CLUSTER", "MEET", "127.0.0.1", p)
            deadline = time.monotonic() + 20
            while not all(_ready(n) for n in nodes):
                if time.monotonic() > deadline:
                    pytest.fail("the cluster did not become ready: "
                                + str([n.execute_command("CLUSTER", "INFO") for n in nodes]))
                time.sleep(0.05)
            for n in nodes:
                n.close()
            yield ports
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(10)


def _ready(n):
    info = n.execute_command("CLUSTER", "INFO")
    if isinstance(info, (bytes, str)):
        text = info.decode() if isinstance(info, bytes) else info
        info = dict(line.split(":", 1) for line in text.split() if ":" in line)
    return info.get("cluster_state") == "ok" and str(info.get("cluster_known_nodes")) == "3"



@pytest.fixture
def rc(cluster_ports):
    """A cluster client; the cluster is empty and every node's clock frozen at NOW_MS."""
    from redis.cluster import ClusterNode, RedisCluster

    c = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in cluster_ports],
                     decode_responses=True)
    c.flushall(target_nodes=RedisCluster.PRIMARIES)
    for node in c.get_primaries():
        drop_policies(c, target_nodes=node)
    c.execute_command("RL.CLOCK", "SET", NOW_MS, target_nodes=c.get_nodes())
    yield c
    c.close()


# ------------------------------------------------------------------ HTTP servers


class WSGIServer:
    """A WSGI app on a real HTTP server (werkzeug, threaded) on a free port."""

    def __init__(self, app: Any):
        from werkzeug.serving import make_server

        self.port = free_port()
        self.http = make_server("127.0.0.1", self.port, app, threaded=True)
        self.thread = threading.Thread(target=self.http.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.http.shutdown()
        self.thread.join(5)


class UvicornServer:
    """An ASGI app served by uvicorn in a thread on a free port."""

    def __init__(self, app: Any):
        import uvicorn

        self.port = free_port()
        cfg = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                             lifespan="off", loop="asyncio")
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)


def _serving(cls: Any) -> Iterator[Any]:
    started: List[Any] = []

    def start(app: Any) -> Any:
        s = cls(app)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


@pytest.fixture
def serve_wsgi() -> Iterator[Any]:
    """serve_wsgi(app) -> WSGIServer, closed after the test."""
    yield from _serving(WSGIServer)


@pytest.fixture
def serve_asgi() -> Iterator[Any]:
    """serve_asgi(app) -> UvicornServer, closed after the test."""
    yield from _serving(UvicornServer)


@pytest.fixture
def http() -> Iterator[Any]:
    import httpx

    with httpx.Client(timeout=10) as c:
        yield c


def run(coro: Any) -> Any:
    return asyncio.run(coro)
