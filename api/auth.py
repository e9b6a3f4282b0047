"""Bearer auth for every /api and /v1 route, compared in constant time."""
from __future__ import annotations

import hmac

from sanic import Request

from .browser import subprotocol_bearer
from .errors import AEROLVM_PREFIX, aerolvm_error, envelope

PROTECTED_PREFIXES = ("/api/", "/v1/")


def install_auth(app, token: str) -> None:
    if not token:
        return
    expected = token.encode()

    @app.on_request
    async def require_bearer(request: Request):
        if not request.path.startswith(PROTECTED_PREFIXES):
            return None
        header = request.headers.get("authorization")
        if not header and (carried := subprotocol_bearer(request)) is not None:
            header = f"Bearer {carried}"  # a browser's WebSocket (api/browser.py)
        if not header:
            return _unauthorized(request, "missing authorization header")
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            return _unauthorized(request, "invalid authorization header format")
        if not hmac.compare_digest(value.strip().encode(), expected):
            return _unauthorized(request, "invalid token")
        return None


def _unauthorized(request: Request, message: str):
    if request.path.startswith(AEROLVM_PREFIX):  # the facade's own error shape
        return aerolvm_error(401, "unauthorized")
    return envelope(401, "unauthorized", message)
