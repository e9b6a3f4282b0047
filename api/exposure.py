"""Where a sandbox's public service routes are reached: host names and URLs.

A route of port P of sandbox S answers on the host ``S--pP.<exposure domain>`` (the server's own
port: the same listener as the API) and, where no wildcard DNS exists, on the path form
``/api/v1/sandboxes/S/ingress/P/...``. The default domain ``localhost`` works out of the box for
a browser on this machine: browsers resolve every ``*.localhost`` name to loopback.
"""
from __future__ import annotations

import re

from session_supervisor.domain.model.services import host_label

_LABEL = re.compile(r"^([a-z0-9][a-z0-9-]{0,62}?)--p([1-9][0-9]{0,4})$")
PATH_FORM = re.compile(r"^/api/v1/sandboxes/([^/]+)/ingress/([0-9]{1,5})(/.*)?$")


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host
    return host.rsplit(":", 1)[0] if ":" in host else host


def exposed_target(host: str, domain: str) -> tuple[str, int] | None:
    """``(sandbox_id, port)`` when the Host names an exposure host of this server, else None."""
    name = _hostname(host).rstrip(".")
    suffix = "." + domain
    if not name.endswith(suffix):
        return None
    match = _LABEL.match(name[: -len(suffix)])
    if match is None:
        return None
    port = int(match[2])
    return (match[1], port) if port <= 65535 else None


def path_target(path: str) -> tuple[str, int, str] | None:
    """``(sandbox_id, port, rest of the path)`` for the path form, else None."""
    match = PATH_FORM.match(path)
    if match is None:
        return None
    port = int(match[2])
    if not 1 <= port <= 65535:
        return None
    return match[1], port, match[3] or "/"


def public_url(settings, sandbox_id: str, port: int) -> str:
    scheme = settings.exposure_scheme
    listen = settings.exposure_port or settings.port
    default = {"http": 80, "https": 443}[scheme]
    suffix = "" if listen == default else f":{listen}"
    return f"{scheme}://{host_label(sandbox_id, port)}.{settings.exposure_domain}{suffix}"
