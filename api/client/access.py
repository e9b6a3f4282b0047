"""``/api-keys`` and ``/teams`` for both clients: typed results, each keeping the API's ``data`` in ``raw``.

``team_id`` on a key call is the server's ``X-Team-ID``: which team the server's own token acts
for (a team's ``admin`` key needs none: it manages its own team's keys).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .models import FromApi, Listing, Message
from .operations import Call, _listing, q


@dataclass
class ApiKey(FromApi):
    id: str = ""
    team_id: str = ""
    name: str = ""
    scope: str = "team"
    roles: list = field(default_factory=list)
    created_by: str = ""
    is_active: bool = True
    key: str | None = None  # the secret: only in what create_api_key returns
    key_value: str | None = None  # a listing's masked prefix
    permissions: list = field(default_factory=list)  # current_api_key only
    expires_at: str = ""
    created_at: str = ""
    updated_at: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Team(FromApi):
    id: str = ""
    name: str = ""
    slug: str = ""
    home_region_id: str = ""
    created_at: str = ""
    updated_at: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


def _team(team_id: str | None) -> dict | None:
    return {"X-Team-ID": team_id} if team_id else None


def _current(data) -> ApiKey:
    return ApiKey.from_api((data or {}).get("api_key") if isinstance(data, dict) else {})


class AccessOps:
    def _run(self, call: Call):  # pragma: no cover - provided by the client classes
        raise NotImplementedError

    def create_api_key(self, name: str, *, roles: list[str] | None = None, scope: str | None = None,
                       expires_in: str | None = None, team_id: str | None = None):
        body: dict = {"name": name}
        for key, value in (("roles", roles), ("scope", scope), ("expires_in", expires_in)):
            if value is not None:
                body[key] = value
        return self._run(Call("POST", "/api-keys", (201,), ApiKey.from_api, body=body, headers=_team(team_id)))

    def list_api_keys(self, *, team_id: str | None = None) -> Listing:
        return self._run(Call("GET", "/api-keys", (200,), _listing("api_keys", ApiKey.from_api),
                              headers=_team(team_id)))

    def current_api_key(self):
        return self._run(Call("GET", "/api-keys/current", (200,), _current))

    def deactivate_api_key(self, key_id: str, *, team_id: str | None = None):
        return self._run(Call("POST", f"/api-keys/{q(key_id)}/deactivate", (200,), Message.from_api,
                              headers=_team(team_id)))

    def delete_api_key(self, key_id: str, *, team_id: str | None = None):
        return self._run(Call("DELETE", f"/api-keys/{q(key_id)}", (200,), Message.from_api, headers=_team(team_id)))

    def create_team(self, name: str, *, slug: str | None = None, home_region_id: str = "local"):
        body = {"name": name, "home_region_id": home_region_id, **({"slug": slug} if slug else {})}
        return self._run(Call("POST", "/teams", (201,), Team.from_api, body=body))

    def list_teams(self) -> Listing:
        return self._run(Call("GET", "/teams", (200,), _listing("teams", Team.from_api)))

    def get_team(self, team_id: str):
        return self._run(Call("GET", f"/teams/{q(team_id)}", (200,), Team.from_api))

    def update_team(self, team_id: str, *, name: str | None = None, slug: str | None = None):
        body = {k: v for k, v in (("name", name), ("slug", slug)) if v is not None}
        return self._run(Call("PUT", f"/teams/{q(team_id)}", (200,), Team.from_api, body=body))

    def delete_team(self, team_id: str):
        return self._run(Call("DELETE", f"/teams/{q(team_id)}", (200,), Message.from_api))
