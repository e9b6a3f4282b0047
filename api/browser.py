"""What a browser needs from the API: a bearer on WebSocket upgrades, and no foreign origins.

A browser cannot set ``Authorization`` on a WebSocket, so the console offers two
subprotocols: ``sessiond.v1`` (echoed back, as browsers require) and
``sessiond.bearer.<base64url(token)>`` (never echoed). This is Kubernetes' pattern for
its API server; unlike a query-string token it never lands in a request line or a log.

A browser does not apply CORS to WebSockets and sends ``Origin`` on every upgrade, so
an upgrade (or any API call) whose ``Origin`` is not this server's own is refused with
403 before auth: another page the user has open cannot drive a session. Clients that
send no ``Origin`` (the SDK, sessionctl, curl) are not affected.
"""
from __future__ import annotations

import base64
import binascii
from urllib.parse import urlsplit

from sanic import Request
from sanic.exceptions import ServerError

from .errors import AEROLVM_PREFIX, aerolvm_error, envelope

CONSOLE_SUBPROTOCOL = "sessiond.v1"
BEARER_SUBPROTOCOL_PREFIX = "sessiond.bearer."
GUARDED_PREFIXES = ("/api/", "/v1/", "/api-keys", "/teams")
DEFAULT_PORTS = {"http": "80", "https": "443", "ws": "80", "wss": "443"}


def offered_subprotocols(request: Request) -> list[str]:
    values = request.headers.getall("sec-websocket-protocol", [])
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def subprotocol_bearer(request: Request) -> str | None:
    """The token carried as ``sessiond.bearer.<base64url>``, or None when there is none."""
    for item in offered_subprotocols(request):
        if item.startswith(BEARER_SUBPROTOCOL_PREFIX):
            encoded = item[len(BEARER_SUBPROTOCOL_PREFIX):]
            try:
                return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
            except (binascii.Error, ValueError):
                return ""  # present but undecodable: the auth check answers "invalid token"
    return None


class EchoedConsoleSubprotocol:
    """The subprotocols a WebSocket route accepts, decided per handshake.

    Sanic iterates a route's ``subprotocols`` at each handshake. A fixed list would make
    websockets refuse every client that offers none (the SDK); this one offers
    ``sessiond.v1`` only to a client that asked for it.
    """

    def __iter__(self):
        try:
            request = Request.get_current()
        except ServerError:  # outside a request: nothing to negotiate
            return iter(())
        offered = offered_subprotocols(request)
        return iter((CONSOLE_SUBPROTOCOL,) if CONSOLE_SUBPROTOCOL in offered else ())


def _authority(scheme: str, netloc: str) -> str:
    parts = urlsplit("//" + netloc)
    try:
        port = parts.port
    except ValueError:
        return "!invalid"
    return f"{(parts.hostname or '').lower()}:{port or DEFAULT_PORTS[scheme]}"


def is_foreign_origin(request: Request) -> bool:
    """True when an ``Origin`` is sent and it is not the host this request was sent to."""
    origin = request.headers.get("origin")
    if origin is None:
        return False
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return True  # "null" (sandboxed frames, file://) and anything unparsable
    # The scheme the browser used is the origin's own (TLS may end at a proxy in front).
    return _authority(parts.scheme, parts.netloc) != _authority(parts.scheme, request.headers.get("host", ""))


def install_origin_check(app) -> None:
    @app.on_request(priority=10)  # before the bearer check: no token oracle for other pages
    async def refuse_foreign_origin(request: Request):
        if not request.path.startswith(GUARDED_PREFIXES) or not is_foreign_origin(request):
            return None
        if request.path.startswith(AEROLVM_PREFIX):
            return aerolvm_error(403, "origin not allowed")
        return envelope(403, "forbidden", "origin not allowed")
