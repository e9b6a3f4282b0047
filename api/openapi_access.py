"""OpenAPI entries for ``/api-keys`` and ``/teams`` (the SDKs' ``apispec/api/api_keys|teams``)."""
from __future__ import annotations

from session_supervisor.domain.model.access import EXPIRES_IN, ROLES

from .openapi_schemas import BOOL, STR, TIME, array, enum, obj, ref

_ROLES = array(enum(*ROLES))
_SCOPE = enum("team", "platform")
_KEY = {"id": STR, "team_id": STR, "created_by": STR, "name": STR, "scope": _SCOPE, "roles": _ROLES,
        "is_active": BOOL, "expires_at": TIME, "created_at": TIME, "updated_at": TIME,
        "key_value": {"type": "string", "description": "the secret's first 12 characters, then ***"}}
_TEAM = {"id": {"type": "string", "format": "uuid"}, "name": STR, "slug": STR, "home_region_id": STR,
         "created_at": TIME, "updated_at": TIME}

SCHEMAS = {
    "CreateAPIKeyRequest": obj({"name": STR, "scope": _SCOPE, "roles": _ROLES, "expires_in": enum(*EXPIRES_IN)},
                               ("name",)),
    "CreateAPIKeyResponse": obj({**{k: _KEY[k] for k in ("id", "name", "scope", "roles", "team_id", "expires_at",
                                                        "created_at")},
                                 "key": {"type": "string", "description": "the secret, shown only here"}},
                                ("id", "name", "scope", "roles", "team_id", "expires_at", "created_at", "key")),
    "APIKey": obj(_KEY, ("id", "team_id", "created_by", "name", "scope", "roles", "is_active", "expires_at",
                         "created_at", "updated_at")),
    "APIKeyList": obj({"api_keys": array(ref("APIKey"))}, ("api_keys",)),
    "CurrentAPIKey": obj({"api_key": obj({
        **{k: _KEY[k] for k in ("id", "team_id", "created_by", "scope", "roles", "is_active", "expires_at")},
        "permissions": array(STR)}, ("id", "team_id", "created_by", "scope", "roles", "permissions", "is_active",
                                     "expires_at"))}, ("api_key",)),
    "Message": obj({"message": STR}, ("message",)),
    "Team": obj(_TEAM, ("id", "name", "slug", "created_at", "updated_at")),
    "TeamList": obj({"teams": array(ref("Team"))}, ("teams",)),
    "CreateTeamRequest": obj({"name": STR, "slug": STR, "home_region_id": STR}, ("name",)),
    "UpdateTeamRequest": obj({"name": STR, "slug": STR, "home_region_id": STR}),
}


def access_paths(operation, header) -> dict:
    team = [header("X-Team-ID", "the team the server's own token acts for (a team key: its own team only)")]
    tag = {"tag": "access"}
    return {
        "/api-keys": {
            "post": operation("create_api_key", "Create an API key of the caller's team (the secret is shown once)",
                              {201: ref("CreateAPIKeyResponse")}, (400, 401, 403), "CreateAPIKeyRequest",
                              params=team, **tag),
            "get": operation("list_api_keys", "The team's API keys, without their secrets", {200: ref("APIKeyList")},
                             (400, 401, 403), params=team, **tag)},
        "/api-keys/current": {"get": operation("current_api_key", "The calling key: roles and permissions",
                                               {200: ref("CurrentAPIKey")}, (401,), **tag)},
        "/api-keys/{key_id}": {"delete": operation("delete_api_key", "Delete an API key", {200: ref("Message")},
                                                   (400, 401, 403, 404), **tag)},
        "/api-keys/{key_id}/deactivate": {"post": operation(
            "deactivate_api_key", "Deactivate an API key (401 from its next call on)", {200: ref("Message")},
            (400, 401, 403, 404), **tag)},
        "/teams": {
            "post": operation("create_team", "Create a team (the server's own token only)", {201: ref("Team")},
                              (400, 401, 403), "CreateTeamRequest", **tag),
            "get": operation("list_teams", "Teams the caller sees", {200: ref("TeamList")}, (401,), **tag)},
        "/teams/{team_id}": {
            "get": operation("get_team", "Get a team", {200: ref("Team")}, (400, 401, 404), **tag),
            "put": operation("update_team", "Rename a team", {200: ref("Team")}, (400, 401, 403, 404),
                             "UpdateTeamRequest", **tag),
            "delete": operation("delete_team", "Delete a team and its keys (409 while it owns sandboxes)",
                                {200: ref("Message")}, (400, 401, 403, 404, 409), **tag)},
    }
