"""Test an app's limits against a real server, without mocks.

A real ``redis-server`` with the module, on a free 127.0.0.1 port, loaded with the test
clock (``ratelimit.test-clock yes``: ``RL.CLOCK SET`` / ``ADVANCE`` move the module's time,
so a test never sleeps to see a window roll):

    from redis_ratelimit.testing import RedisServer

    with RedisServer() as srv:                  # anywhere: a script, unittest, a notebook
        r = srv.client()
        srv.clock_set(1_900_000_000_000)
        ...

As a pytest plugin (registered by the package: nothing to import):

    def test_login_is_limited(ratelimit_redis, ratelimit_server):
        app = make_app(redis_url=ratelimit_server.url)   # the server of the session
        ...                                              # ratelimit_redis: a client of it,
        ratelimit_server.clock_advance(60_000)           # flushed, clock at CLOCK_MS

Where the binaries are: explicit arguments (``RedisServer(module=..., server=...)``), else
the environment (``REDIS_RATELIMIT_MODULE``, ``REDIS_SERVER``; this repository's suite's
``RL_MODULE`` / ``RL_SERVER`` too), else ``redis-server`` (or ``valkey-server``) on the
``PATH`` and ``target/release/libredis_ratelimit.so`` in the current directory or one above
it, or the Debian module directory. A missing one raises :class:`ServerNotFound` saying
what was tried.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, List, Optional, Sequence

import redis

#: the module file's name (Linux; macOS builds a .dylib)
MODULE_FILE = "libredis_ratelimit.so"
#: where the fixtures set the module's clock: a multiple of a day (windows start there)
CLOCK_MS = 1_900_108_800_000


class ServerNotFound(FileNotFoundError):
    """The redis-server binary or the module could not be found."""


def find_module(module: Optional[str] = None) -> str:
    """The module's path: ``module``, ``$REDIS_RATELIMIT_MODULE``, ``$RL_MODULE``, then
    ``target/release/libredis_ratelimit.so`` here or in a parent directory, then
    ``/usr/lib/redis/modules/``."""
    tried: List[str] = []
    for cand in (module, os.environ.get("REDIS_RATELIMIT_MODULE"), os.environ.get("RL_MODULE")):
        if cand:
            if os.path.isfile(cand):
                return os.path.abspath(cand)
            raise ServerNotFound(f"the redis-ratelimit module {cand!r} does not exist")
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        p = d / "target" / "release" / MODULE_FILE
        tried.append(str(p))
        if p.is_file():
            return str(p)
    for p in (Path("/usr/lib/redis/modules") / MODULE_FILE,
              Path("/usr/local/lib/redis/modules") / MODULE_FILE):
        tried.append(str(p))
        if p.is_file():
            return str(p)
    raise ServerNotFound("the redis-ratelimit module was not found: pass "
                         "RedisServer(module=...) or set REDIS_RATELIMIT_MODULE (tried "
                         f"{tried[0]} and {len(tried) - 1} more places; build it with "
                         "cargo build --release)")


def find_server(server: Optional[str] = None) -> str:
    """The server binary: ``server``, ``$REDIS_SERVER``, ``$RL_SERVER``, then
    ``redis-server`` or ``valkey-server`` on the PATH."""
    for cand in (server, os.environ.get("REDIS_SERVER"), os.environ.get("RL_SERVER")):
        if cand:
            found = shutil.which(cand) or (cand if os.path.isfile(cand) else None)
            if found:
                return found
            raise ServerNotFound(f"the server binary {cand!r} was not found")
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return found
    raise ServerNotFound("redis-server was not found on the PATH: install it (Debian: "
                         "apt-get install redis-server), pass RedisServer(server=...) or "
                         "set REDIS_SERVER")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A redis-server with the module on a free 127.0.0.1 port, for tests; a context
    manager (``start()`` / ``stop()`` by hand also work).

    ``test_clock`` (default True): loaded with ``test-clock yes``. ``args``: more server
    arguments (e.g. ``["--maxmemory", "10mb"]``); ``module_args``: more module arguments.
    """

    def __init__(self, module: Optional[str] = None, server: Optional[str] = None, *,
                 port: Optional[int] = None, test_clock: bool = True,
                 args: Sequence[str] = (), module_args: Sequence[str] = (),
                 start_timeout: float = 10.0):
        self.module = find_module(module)
        self.server = find_server(server)
        self.host = "127.0.0.1"
        self.port = port or 0
        self.test_clock = test_clock
        self.args = list(args)
        self.module_args = list(module_args)
        self.start_timeout = start_timeout
        self.proc: Optional[subprocess.Popen] = None
        self._dir: Optional[tempfile.TemporaryDirectory] = None
        self._fixed_port = port is not None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def client(self, **kw: Any) -> "redis.Redis":
        """A new redis-py client of this server (``decode_responses=True`` by default)."""
        kw.setdefault("decode_responses", True)
        return redis.Redis(host=self.host, port=self.port, **kw)

    def start(self) -> "RedisServer":
        if self.proc is not None:
            return self
        self._dir = tempfile.TemporaryDirectory(prefix="redis-ratelimit-test-")
        for _ in range(1 if self._fixed_port else 10):
            if not self._fixed_port:
                self.port = free_port()
            if self._launch():
                return self
        raise RuntimeError("no free port for redis-server after 10 attempts")

    def _launch(self) -> bool:
        assert self._dir is not None
        log = os.path.join(self._dir.name, f"{self.port}.log")
        mod = [*(["test-clock", "yes"] if self.test_clock else []), *self.module_args]
        proc = subprocess.Popen(
            [self.server, "--port", str(self.port), "--bind", self.host, "--save", "",
             "--appendonly", "no", "--dir", self._dir.name, "--logfile", log, *self.args,
             "--loadmodule", self.module, *mod],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c = redis.Redis(host=self.host, port=self.port)
        deadline = time.monotonic() + self.start_timeout
        try:
            while True:
                try:
                    pid = int(c.info("server")["process_id"])
                    break
                except (redis.ConnectionError, redis.BusyLoadingError):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        proc.kill()
                        proc.wait(10)
                        text = Path(log).read_text() if os.path.exists(log) else ""
                        raise RuntimeError(f"redis-server did not start on {self.port}: "
                                           f"{text[-2000:]}") from None
                    time.sleep(0.02)
        finally:
            c.close()
        if pid != proc.pid:  # another server took the port between the check and our bind
            proc.terminate()
            proc.wait(10)
            return False
        self.proc = proc
        return True

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.proc = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- helpers for tests

    def _x(self, *args: Any) -> Any:
        c = redis.Redis(host=self.host, port=self.port, decode_responses=True)
        try:
            return c.execute_command(*args)
        finally:
            c.close()

    def reset(self, clock_ms: Optional[int] = CLOCK_MS) -> None:
        """Empty: FLUSHALL, every policy deleted (FLUSHALL keeps them), statistics reset
        (``calls()`` counts from here), the clock set to ``clock_ms`` (None: left)."""
        c = self.client()
        try:
            c.flushall()
            for e in c.execute_command("RL.POLICY", "LIST") or []:
                fields = e if isinstance(e, dict) else dict(zip(e[::2], e[1::2]))
                c.execute_command("RL.POLICY", "DEL", fields["name"])
            if clock_ms is not None and self.test_clock:
                c.execute_command("RL.CLOCK", "SET", clock_ms)
            c.execute_command("CONFIG", "RESETSTAT")
        finally:
            c.close()

    def clock_set(self, unix_ms: int) -> None:
        self._x("RL.CLOCK", "SET", unix_ms)

    def clock_advance(self, ms: int) -> None:
        self._x("RL.CLOCK", "ADVANCE", ms)

    def clock_ms(self) -> int:
        """The module's clock now (a package clock for ``Config(clock_ms=...)``: leases
        and local refusals then follow RL.CLOCK)."""
        return int(self._x("RL.CLOCK", "GET"))

    def calls(self) -> int:
        """The module's commands the server ran since ``reset()`` (INFO commandstats; not
        RL.CLOCK nor RL.POLICY): how a test says "no Redis call"."""
        c = self.client()
        try:
            stats = c.info("commandstats")
        finally:
            c.close()
        n = 0
        for name, v in stats.items():
            cmd = name[len("cmdstat_"):] if name.startswith("cmdstat_") else name
            if (cmd.startswith("rl.") or cmd == "cl.throttle") and cmd not in ("rl.clock",
                                                                               "rl.policy"):
                n += int(v["calls"])
        return n


try:
    import pytest
except ImportError:  # used outside pytest: RedisServer alone
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def ratelimit_server() -> Iterator[RedisServer]:
        """A redis-server with the module and its test clock for the test session."""
        try:
            srv = RedisServer()
        except ServerNotFound as e:
            pytest.fail(str(e), pytrace=False)
        with srv:
            yield srv

    @pytest.fixture
    def ratelimit_redis(ratelimit_server: RedisServer) -> Iterator["redis.Redis"]:
        """A client of the session's server, emptied (keys, policies, statistics) and its
        clock set to :data:`CLOCK_MS` before the test."""
        ratelimit_server.reset()
        c = ratelimit_server.client()
        yield c
        c.close()


__all__ = ["CLOCK_MS", "RedisServer", "ServerNotFound", "find_module", "find_server"]
