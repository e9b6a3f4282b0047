"""Who may call the API: a bearer token, or (``--no-auth``) only loopback, non-browser callers.

With a token every /api and /v1 route (and /metrics) needs ``Authorization: Bearer``,
compared in constant time. Without one the token is no protection against a web page
in a browser on the same machine, so ``--no-auth`` refuses with 403:

- a ``Host`` that is not a loopback name or address: DNS rebinding (a hostile name that
  resolves to 127.0.0.1 sends its own name as Host);
- an ``Origin`` that is not this server's own origin: a cross-site form or ``fetch``
  (a ``text/plain`` POST needs no CORS preflight) and a cross-site WebSocket upgrade.

Requests without ``Origin`` (curl, the SDKs, ``sessionctl``) are not from a page and pass.

Who the caller is becomes ``request.ctx.principal`` (a ``domain.model.access.Principal``): the
server's token (and ``--no-auth``) is the platform key, which sees every team, or acts for one
with ``X-Team-ID``; an ``s0_…`` bearer is an API key (``domain.api_keys``: 401 when unknown,
deactivated or expired). What a principal may then do is ``api/access.py``'s.
"""
from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from sanic import Request

from session_supervisor.domain.model.access import PLATFORM, Principal
from session_supervisor.domain.model.errors import DomainError, UnauthorizedError

from .browser import subprotocol_bearer
from .data_dir import is_loopback_host
from .errors import AEROLVM_PREFIX, aerolvm_error, classify, envelope

PROTECTED_PREFIXES = ("/api/", "/v1/", "/metrics", "/api-keys", "/teams")
TEAM_HEADER = "x-team-id"  # the reference's: which team the platform key acts for


def install_auth(app, token: str) -> None:
    if token:
        _require_bearer(app, token.encode())
    else:
        _require_loopback_and_same_origin(app)


def _require_bearer(app, expected: bytes) -> None:
    @app.on_request
    async def require_bearer(request: Request):
        if not request.path.startswith(PROTECTED_PREFIXES):
            return None
        header = request.headers.get("authorization")
        if not header and (carried := subprotocol_bearer(request)) is not None:
            header = f"Bearer {carried}"  # a browser's WebSocket (api/browser.py)
        if not header:
            return _refused(request, 401, "unauthorized", "missing authorization header")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            return _refused(request, 401, "unauthorized", "invalid authorization header format")
        return await _identify(request, value.strip(), expected)


def _require_loopback_and_same_origin(app) -> None:
    @app.on_request
    async def require_local_caller(request: Request):
        host = request.headers.get("host", "")
        if not is_loopback_host(_hostname(host)):
            return _refused(request, 403, "forbidden",
                            f"Host {host!r} is not a loopback address (server started with --no-auth)")
        origin = request.headers.get("origin")
        if origin is not None and not _same_origin(origin, host):
            return _refused(request, 403, "forbidden",
                            f"cross-origin request from {origin!r} refused (server started with --no-auth)")
        if not request.path.startswith(PROTECTED_PREFIXES):
            return None
        scheme, _, value = (request.headers.get("authorization") or "").partition(" ")
        key = value.strip() if scheme.lower() == "bearer" and value.strip().startswith("s0_") else None
        return await _identify(request, key, None)  # an API key still narrows what a call may do


async def _identify(request: Request, secret: str | None, server_token: bytes | None):
    """Set ``request.ctx.principal``, or answer 401/400. ``server_token`` None: --no-auth, where
    a caller without an API key is the platform key."""
    keys = getattr(request.app.ctx.container, "keys", None)
    team = request.headers.get(TEAM_HEADER, "").strip()
    try:
        platform = secret is None or (server_token is not None and hmac.compare_digest(secret.encode(), server_token))
        if platform and not team:
            principal: Principal = PLATFORM
        elif keys is None:  # the server is not started yet: no key or team can be known
            raise UnauthorizedError("invalid token")
        elif platform:
            principal = await keys.select_team(PLATFORM, team)
        else:
            principal = await keys.authenticate(secret, team)
    except DomainError as exc:
        status, code, message, _details = classify(exc, "")
        return _refused(request, status, code, message)
    request.ctx.principal = principal
    return None


def principal_of(request: Request) -> Principal:
    """The caller of a protected route (api/auth.py set it); a route reached without one refuses."""
    principal = getattr(request.ctx, "principal", None)
    if principal is None:
        raise UnauthorizedError("not authenticated")
    return principal


def _hostname(host: str) -> str:
    """The name part of a Host header (``[::1]:8780`` -> ``::1``)."""
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _same_origin(origin: str, host: str) -> bool:
    parts = urlsplit(origin)
    # The page's own origin, and only over plain http (this server does not speak TLS).
    return parts.scheme == "http" and parts.netloc.lower() == host.lower() and not parts.path.strip("/")


def _refused(request: Request, status: int, code: str, message: str):
    if request.path.startswith(AEROLVM_PREFIX):  # the facade's own error shape
        return aerolvm_error(status, code)
    return envelope(status, code, message)
