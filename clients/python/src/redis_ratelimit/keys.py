"""Who is asking: the request as the middleware sees it, and key functions.

A key function takes a :class:`Request` and returns the identity a limit is counted under
(a string), or None when the limit does not apply to this request (e.g. a per-user limit on
an anonymous request).
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


@dataclass(frozen=True)
class Request:
    """What the middleware knows about a request, whatever the framework.

    ``headers`` maps lower-case names to every value (a header sent twice has two).
    ``state`` is where a framework adapter puts what the app already established (e.g.
    Django's ``request.user``); key functions may read it.
    """

    method: str
    path: str
    headers: Dict[str, List[str]]
    peer: str  # the TCP peer address
    state: Dict[str, object] = field(default_factory=dict)

    def header(self, name: str) -> Optional[str]:
        vals = self.headers.get(name.lower())
        return vals[0] if vals else None

    def header_list(self, name: str) -> List[str]:
        return self.headers.get(name.lower(), [])


KeyFunc = Callable[[Request], Optional[str]]


def parse_networks(nets: Iterable[str]) -> Tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(n, strict=False) for n in nets)


@functools.lru_cache(maxsize=65536)  # the same clients come back: parse each address once
def _address(text: str) -> Optional[IPAddress]:
    """The address in ``text``: strips a port (``1.2.3.4:80``, ``[::1]:80``) and maps
    IPv4-mapped IPv6 (``::ffff:1.2.3.4``) to IPv4. None if it is not an address."""
    a = text.strip().strip('"')
    if a.startswith("["):
        a = a[1:].split("]", 1)[0]
    elif a.count(":") == 1:
        a = a.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(a)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        return ip.ipv4_mapped
    return ip


def _client_ip(peer: str, forwarded_for: Sequence[str], trusted: Sequence[IPNetwork]
               ) -> Optional[IPAddress]:
    cur = _address(peer)
    if cur is None or not trusted:
        return cur
    hops = [h for line in forwarded_for for h in line.split(",") if h.strip()]
    while hops and any(cur in net for net in trusted if net.version == cur.version):
        nxt = _address(hops.pop())
        if nxt is None:
            break
        cur = nxt
    return cur


def client_address(peer: str, forwarded_for: Sequence[str],
                   trusted: Sequence[IPNetwork] = ()) -> Optional[str]:
    """The client's address behind trusted proxies.

    ``X-Forwarded-For`` is read right to left: each proxy appends the address it received
    the request from. Starting from the TCP peer, as long as the hop we are at is a trusted
    proxy (inside one of ``trusted``), step one entry left; the first untrusted address is
    the client. Entries further left were written by the client and may be forged. A
    malformed entry stops the walk at the last good hop. With no trusted networks the header
    is ignored.
    """
    ip = _client_ip(peer, forwarded_for, trusted)
    return None if ip is None else str(ip)


@functools.lru_cache(maxsize=65536)
def ip_key(address: Union[str, IPAddress], ipv6_prefix: int = 64, ipv4_prefix: int = 32
           ) -> str:
    """The identity of an address: IPv4 per address (``/32``), IPv6 per ``/64`` (the
    prefix one home connection or one server usually gets, inside which a client can pick
    any address), written as a network: ``2001:db8:1:2::/64``."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    plen = ipv6_prefix if ip.version == 6 else ipv4_prefix
    if plen >= ip.max_prefixlen:
        return str(ip)
    shift = ip.max_prefixlen - plen
    return str(ipaddress.ip_network((int(ip) >> shift << shift, plen)))


def by_ip(trusted_proxies: Iterable[str] = (), ipv6_prefix: int = 64) -> KeyFunc:
    """Key on the client address (see :func:`client_address`); IPv6 on its ``/64``."""
    nets = parse_networks(trusted_proxies)

    def key(req: Request) -> Optional[str]:
        ip = _client_ip(req.peer, req.header_list("x-forwarded-for"), nets)
        return None if ip is None else ip_key(ip, ipv6_prefix)

    return key


def _digest(secret: str) -> str:
    # Never store a credential in a Redis key: a short hash identifies it as well.
    return hashlib.sha256(secret.encode()).hexdigest()[:24]


def by_api_key(header: str = "x-api-key") -> KeyFunc:
    """Key on an API key header (hashed: the key name never holds the credential)."""

    def key(req: Request) -> Optional[str]:
        v = req.header(header)
        return _digest(v.strip()) if v and v.strip() else None

    return key


def by_user(resolve: Callable[[Request], Optional[str]]) -> KeyFunc:
    """Key on the authenticated user ``resolve(request)`` returns (None = anonymous).
    Resolve it from what your authentication established (session, JWT ``sub``), never from
    a header the client sets."""
    return resolve


def by_org(resolve: Callable[[Request], Optional[str]]) -> KeyFunc:
    """Key on the user's organisation (None = no organisation: the limit does not apply)."""
    return resolve


def bearer(tokens: Dict[str, str]) -> Callable[[Request], Optional[str]]:
    """A stand-in resolver for tests and examples: ``Authorization: Bearer <token>`` looked
    up in ``tokens`` (token -> identity)."""

    def resolve(req: Request) -> Optional[str]:
        scheme, _, tok = (req.header("authorization") or "").partition(" ")
        return tokens.get(tok.strip()) if scheme.lower() == "bearer" else None

    return resolve
