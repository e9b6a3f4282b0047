"""``/api-keys``: create, list, current, deactivate and delete, in the shapes of the SDKs' models
(``CreateAPIKeyResponse``, ``APIKey``, ``CurrentAPIKeyResponse``). The decisions are
``domain.api_keys``'; a listing never carries a secret, only its first characters masked."""
from __future__ import annotations

from sanic import Blueprint, Request

from session_supervisor.domain.model.access import PLATFORM_KEY_ID, SCOPE_PLATFORM
from session_supervisor.domain.model.errors import AccessRequestError
from session_supervisor.domain.model.timefmt import rfc3339

from ..auth import principal_of
from ..errors import ApiError
from ..schemas import ok, parse_json

bp = Blueprint("api_keys", url_prefix="/api-keys")
NEVER = rfc3339((2**63 - 1) // 10**9 * 10**9)  # the server's own token does not expire


def keys(request: Request):
    return request.app.ctx.container.keys


def body_object(request: Request) -> dict:
    try:
        body = parse_json(request)
    except ApiError:
        raise AccessRequestError("invalid request body") from None
    if not isinstance(body, dict):
        raise AccessRequestError("invalid request body")
    return body


def render_key(key) -> dict:
    return {"id": key.id, "team_id": key.team_id, "created_by": key.created_by, "name": key.name,
            "scope": key.scope, "roles": list(key.roles), "is_active": key.is_active,
            "key_value": key.prefix + "***", "expires_at": rfc3339(key.expires_ns),
            "created_at": rfc3339(key.created_ns), "updated_at": rfc3339(key.updated_ns)}


@bp.post("", ctx_action="create_api_key", strict_slashes=False)
async def create_api_key(request: Request):
    """201 CreateAPIKeyResponse with ``key`` (shown once); 400 bad_request; 403 forbidden."""
    body = body_object(request)
    key, secret = await keys(request).create_key(principal_of(request), body.get("name"), body.get("scope"),
                                                 body.get("roles"), body.get("expires_in"))
    return ok({"id": key.id, "name": key.name, "scope": key.scope, "roles": list(key.roles), "team_id": key.team_id,
               "key": secret, "expires_at": rfc3339(key.expires_ns), "created_at": rfc3339(key.created_ns)}, 201)


@bp.get("", ctx_action="list_api_keys", strict_slashes=False)
async def list_api_keys(request: Request):
    """200 {"api_keys": [APIKey]}, newest first: the caller's team's (every key for the platform key)."""
    return ok({"api_keys": [render_key(key) for key in await keys(request).list_keys(principal_of(request))]})


@bp.get("/current", ctx_action="current_api_key")
async def current_api_key(request: Request):
    """200 {"api_key": CurrentAPIKeyResponse}: the calling key, its roles and permissions."""
    principal = principal_of(request)
    key = await keys(request).current(principal)
    if key is None:  # the server's own token: the platform key, with no stored record
        current = {"id": PLATFORM_KEY_ID, "team_id": principal.team_id, "created_by": PLATFORM_KEY_ID,
                   "scope": SCOPE_PLATFORM, "roles": [], "is_active": True, "expires_at": NEVER}
    else:
        current = {"id": key.id, "team_id": key.team_id, "created_by": key.created_by, "scope": key.scope,
                   "roles": list(key.roles), "is_active": key.is_active, "expires_at": rfc3339(key.expires_ns)}
    current["permissions"] = sorted(principal.permissions)
    return ok({"api_key": current})


@bp.post("/<key_id>/deactivate", ctx_action="deactivate_api_key")
async def deactivate_api_key(request: Request, key_id: str):
    """200 {"message"}; the key answers 401 from its next request on. 400 bad id; 404 unknown."""
    await keys(request).deactivate(principal_of(request), key_id)
    return ok({"message": "API key deactivated"})


@bp.delete("/<key_id>", ctx_action="delete_api_key")
async def delete_api_key(request: Request, key_id: str):
    """200 {"message"}; 400 bad id; 404 unknown (or another team's)."""
    await keys(request).delete(principal_of(request), key_id)
    return ok({"message": "API key deleted"})
