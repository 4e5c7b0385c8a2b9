"""Sending a command that may be held in the server (``WAIT ms``).

A held command needs a read timeout above its wait, and must not hold up other callers:

* the read timeout: the connection's own ``socket_timeout`` (the request path's short one)
  **plus** ``wait_ms`` for this one reply (no timeout stays no timeout);
* the connection: checked out of the client's pool for this call alone (redis-py's pools are
  per-command checkout), also on a ``single_connection_client``, whose one connection keeps
  serving the other calls. With a ``BlockingConnectionPool`` the checkout waits for a free
  connection like any command. On a Redis Cluster client: the pool of the node that holds
  the key's slot (``MOVED``/``ASK`` refresh the slots and the call is sent again, as the
  cluster client does).

No retries (a held command sent twice would wait twice); a timeout or a lost connection
raises as usual (``redis.TimeoutError``, ``redis.ConnectionError``) and the connection is
closed, so the server drops the waiter.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Optional, Sequence

import redis
from redis.exceptions import AskError, MovedError, TryAgainError

_REDIRECTS = 3  # MOVED/ASK/TRYAGAIN rounds before giving up (a slot migrating)


def _read_timeout(conn: Any, wait_ms: int) -> Optional[float]:
    base = getattr(conn, "socket_timeout", None)
    return None if base is None else base + wait_ms / 1000


def _is_cluster(client: Any) -> bool:
    return hasattr(client, "get_node_from_key") and hasattr(client, "nodes_manager")


def execute_waiting(client: Any, args: Sequence[Any], wait_ms: int) -> Any:
    """``client.execute_command(*args)`` for a command with ``WAIT wait_ms`` (sync). The key
    is ``args[1]``."""
    if not _is_cluster(client):
        return _on_pool(client.connection_pool, args, wait_ms)
    key = args[1]
    for attempt in range(_REDIRECTS + 1):
        node = client.get_node_from_key(key)
        node_client = client.get_redis_connection(node)
        try:
            return _on_pool(node_client.connection_pool, args, wait_ms)
        except (MovedError, AskError, TryAgainError):
            if attempt == _REDIRECTS:
                raise
            client.nodes_manager.initialize()
    raise AssertionError("unreachable")


def _checkout(pool: Any) -> Any:
    try:
        return pool.get_connection()
    except TypeError:  # redis-py < 5.3 wants a command name
        return pool.get_connection("RL")


def _on_pool(pool: Any, args: Sequence[Any], wait_ms: int) -> Any:
    conn = _checkout(pool)
    try:
        conn.send_command(*args)
        t = _read_timeout(conn, wait_ms)
        return conn.read_response(timeout=t)  # None: the socket's own (none)
    finally:
        pool.release(conn)


async def execute_waiting_async(client: Any, args: Sequence[Any], wait_ms: int) -> Any:
    """The asyncio twin (``redis.asyncio.Redis`` / ``redis.asyncio.RedisCluster``)."""
    if not _is_cluster(client):
        return await _on_async_pool(client.connection_pool, args, wait_ms)
    key = args[1]
    for attempt in range(_REDIRECTS + 1):
        if getattr(client, "_initialize", False):
            await client.initialize()
        node = client.get_node_from_key(key)
        try:
            return await _on_cluster_node(node, args, wait_ms)
        except (MovedError, AskError, TryAgainError):
            if attempt == _REDIRECTS:
                raise
            await client.nodes_manager.initialize()
    raise AssertionError("unreachable")


async def _read_async(conn: Any, args: Sequence[Any], wait_ms: int) -> Any:
    await conn.send_command(*args)
    t = _read_timeout(conn, wait_ms)
    # redis.asyncio's read_response(timeout=x) answers None when x passes (pubsub's
    # polling) and keeps the connection: the timeout is ours, the read has none (inf)
    read = conn.read_response(timeout=math.inf)
    if t is None:
        return await read
    try:
        return await asyncio.wait_for(read, t)
    except asyncio.TimeoutError:
        await conn.disconnect(nowait=True)  # the server drops the waiter
        where = f"{getattr(conn, 'host', '?')}:{getattr(conn, 'port', '?')}"
        raise redis.TimeoutError(f"Timeout reading from {where} ({wait_ms} ms wait + "
                                 f"{conn.socket_timeout} s)") from None


async def _on_async_pool(pool: Any, args: Sequence[Any], wait_ms: int) -> Any:
    try:
        conn = await pool.get_connection()
    except TypeError:  # redis-py < 5.3 wants a command name
        conn = await pool.get_connection("RL")
    try:
        return await _read_async(conn, args, wait_ms)
    finally:
        await pool.release(conn)


async def _on_cluster_node(node: Any, args: Sequence[Any], wait_ms: int) -> Any:
    conn = node.acquire_connection()
    try:
        return await _read_async(conn, args, wait_ms)
    except (redis.ConnectionError, redis.TimeoutError):
        await conn.disconnect()
        raise
    finally:
        node.release(conn)
