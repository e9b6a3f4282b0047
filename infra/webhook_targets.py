"""Where a webhook may be delivered: the server is no proxy into its own host.

A tenant names any URL; the server refuses to send to loopback, link-local, unspecified and
multicast addresses and to any address of its own interfaces, unless the operator allows them
(``--allow-local-webhooks``, for a receiver on the same machine), and always to the sandboxes'
own range (that would be a way into another sandbox through the host). The name is resolved once
per delivery, every address it resolves to must pass, and the request goes to the address that was
checked (the Host header and TLS name stay the URL's): a name that resolves differently between
the check and the connection cannot reach a refused address.
"""
from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from .netns import _host_addresses
from .nft_rules import SANDBOX_RANGE

_SANDBOXES = ipaddress.ip_network(SANDBOX_RANGE)


class RefusedTarget(ValueError):
    """The URL names (or resolves to) an address webhooks may not go to."""


@dataclass(frozen=True)
class Target:
    url: str  # the URL with the checked address in place of the name
    host: str  # what the Host header says
    sni: str | None  # the TLS server name (https to a name), else None


def refusal(address: str, allow_local: bool, own: set[str]) -> str | None:
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in _SANDBOXES:
        return "a sandbox's address"
    if ip.is_multicast or ip.is_unspecified or (isinstance(ip, ipaddress.IPv4Address) and ip == ipaddress.IPv4Address(
            "255.255.255.255")):
        return "not a unicast address"
    if allow_local:
        return None
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if str(ip) in own:
        return "an address of this server"
    return None


def own_addresses() -> set[str]:
    try:
        return _host_addresses()
    except OSError:
        return set()


def check_url(url: str, allow_local: bool, own: set[str] | None = None) -> Target:
    """Resolve and check (blocking); raises RefusedTarget."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise RefusedTarget(f"cannot resolve {host}: {exc.strerror}") from None
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    own = own_addresses() if own is None else own
    for address in addresses:
        why = refusal(address, allow_local, own)
        if why is not None:
            raise RefusedTarget(f"{host} resolves to {address}, {why}: webhooks do not go there "
                                "(sessiond serve --allow-local-webhooks allows this machine)")
    address = addresses[0]
    literal = f"[{address}]" if ":" in address else address
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    is_name = not _is_literal(host)
    return Target(urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")),
                  parts.netloc.rsplit("@", 1)[-1], host if parts.scheme == "https" and is_name else None)


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False
