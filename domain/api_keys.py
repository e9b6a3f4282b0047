"""API keys and teams: who a bearer secret is, and the management calls of ``/api-keys`` and ``/teams``.

A key's secret is shown once, at creation; the store keeps only its SHA-256 and its first 12
characters (what a listing shows, masked). A plain hash is enough because the secret is 192
random bits: nothing can be guessed from a leaked hash, so a slow password hash would only cost
every request. Validation and the error texts follow the Sandbox0 gateway's, so the SDKs' callers
see the same answers; where this server differs (no users: the server's own token and a team's
``admin`` keys manage keys) it says so in docs/api-keys.md.
"""
from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from typing import Awaitable, Callable

from .model.access import (APIKEY_MANAGE, DEFAULT_EXPIRES_IN, DEFAULT_ROLES, EXPIRES_IN, ROLE_PERMISSIONS,
                           PLATFORM_KEY_ID, SCOPE_PLATFORM, SCOPE_TEAM, ApiKey, Principal, Team, permissions_of)
from .model.errors import (AccessRequestError, ApiKeyNotFoundError, ForbiddenError, TeamNotEmptyError,
                           TeamNotFoundError, UnauthorizedError)
from .ports import Clock, KeyStore

KEY_PREFIX = "s0_local_"  # the reference's s0_<region>_<random>; this server is the region "local"
SHOWN_PREFIX = 12  # characters of the secret a listing shows (the reference masks the rest)
MAX_NAME = 255
_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _uuid(value: str, what: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise AccessRequestError(f"invalid {what} id") from None


def _name(value, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AccessRequestError(f"{what} is required")
    if len(value.strip().encode()) > MAX_NAME:
        raise AccessRequestError(f"{what} must be at most {MAX_NAME} bytes")
    return value.strip()


def normalize_roles(roles) -> tuple[str, ...]:
    if roles is None or roles == []:
        return DEFAULT_ROLES
    if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
        raise AccessRequestError("roles must be a list of strings")
    out: list[str] = []
    for role in (role.strip() for role in roles):
        if not role:
            raise AccessRequestError("role cannot be empty")
        if role not in ROLE_PERMISSIONS:
            raise AccessRequestError(f"unsupported role: {role}")
        if role not in out:
            out.append(role)
    return tuple(out)


def _slug(value, name: str) -> str:
    if value is None or value == "":
        derived = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:63].strip("-")
        return derived or "team"
    if not isinstance(value, str) or len(value) > 63 or not _SLUG.match(value.strip().lower()):
        raise AccessRequestError("slug must be lowercase letters, digits and single hyphens (at most 63)")
    return value.strip().lower()


def _region(value) -> str:
    if value is not None and not isinstance(value, str):
        raise AccessRequestError("home_region_id must be a string")
    return (value or "").strip() or "local"


class ApiKeys:
    def __init__(self, store: KeyStore, clock: Clock, new_secret: Callable[[], str],
                 new_uuid: Callable[[], str]) -> None:
        self.store = store
        self.clock = clock
        self.new_secret = new_secret  # 48 random hex characters
        self.new_uuid = new_uuid

    async def _io(self, fn, *args):
        return await asyncio.to_thread(fn, *args)

    # ---- who is calling --------------------------------------------------------------------------
    async def authenticate(self, secret: str, selected_team: str = "") -> Principal:
        """The principal of a bearer secret that is not the server's own token, or 401."""
        if not secret.startswith("s0_"):
            raise UnauthorizedError("invalid token")
        digest = hash_secret(secret)
        key = self.store.key_by_hash(digest) if self.store.memory_reads else await self._io(
            self.store.key_by_hash, digest)
        if key is None:
            raise UnauthorizedError("invalid token")
        if not key.is_active:
            raise UnauthorizedError("api key inactive")
        if self.clock.now_ns() >= key.expires_ns:
            raise UnauthorizedError("api key expired")
        principal = key.principal()
        if selected_team and key.scope == SCOPE_PLATFORM:
            return await self.select_team(principal, selected_team)
        if selected_team and selected_team != key.team_id:
            raise UnauthorizedError("the selected team is not this API key's team")
        return principal

    async def select_team(self, platform: Principal, team_id: str) -> Principal:
        """The platform key acting for one team (``X-Team-ID``): that team must exist."""
        team = await self._io(self.store.team, _uuid(team_id, "team"))
        if team is None:
            raise AccessRequestError("x-team-id names no team")
        return platform.as_team(team.id)

    # ---- keys ------------------------------------------------------------------------------------
    def _manager(self, caller: Principal) -> None:
        if not caller.can(APIKEY_MANAGE):
            raise ForbiddenError("API key management requires team admin access")

    async def create_key(self, caller: Principal, name, scope, roles, expires_in) -> tuple[ApiKey, str]:
        self._manager(caller)
        name = _name(name, "name")
        if expires_in is not None and not isinstance(expires_in, str):
            raise AccessRequestError("unsupported expires_in")
        lifetime = EXPIRES_IN.get((expires_in or "").strip() or DEFAULT_EXPIRES_IN)
        if lifetime is None:
            raise AccessRequestError("unsupported expires_in")
        scope = (scope.strip() if isinstance(scope, str) else scope) or SCOPE_TEAM
        if scope == SCOPE_PLATFORM:
            if not caller.platform:
                raise ForbiddenError("platform API keys can only be created with the platform key")
            if roles:
                raise AccessRequestError("platform API keys do not support roles")
            team, granted = "", ()
        elif scope == SCOPE_TEAM:
            if caller.all_teams:
                raise AccessRequestError("x-team-id is required for team-scoped platform API key requests")
            granted = normalize_roles(roles)
            if not caller.platform and not permissions_of(granted) <= caller.permissions:
                raise ForbiddenError("cannot create API key with roles that grant permissions outside the "
                                     "caller's permissions")
            team = caller.team_id
        else:
            raise AccessRequestError("scope must be team or platform")
        secret = KEY_PREFIX + self.new_secret()
        now = self.clock.now_ns()
        key = ApiKey(id=self.new_uuid(), team_id=team, name=name, scope=scope, roles=granted,
                     created_by=caller.key_id, secret_hash=hash_secret(secret), prefix=secret[:SHOWN_PREFIX],
                     expires_ns=now + lifetime, created_ns=now, updated_ns=now)
        await self._io(self.store.add_key, key)
        return key, secret

    async def list_keys(self, caller: Principal) -> list[ApiKey]:
        self._manager(caller)
        keys = await self._io(self.store.keys, None if caller.all_teams else caller.team_id)
        return sorted(keys, key=lambda k: (-k.created_ns, k.id))

    async def current(self, caller: Principal) -> ApiKey | None:
        """The caller's own key record; None for the server's own token, which has none."""
        if caller.key_id == PLATFORM_KEY_ID:
            return None
        return await self._io(self.store.key, caller.key_id)

    async def _visible_key(self, caller: Principal, key_id) -> ApiKey:
        self._manager(caller)
        key = await self._io(self.store.key, _uuid(key_id, "API key"))
        if key is None or not caller.sees(key.team_id) or (key.scope == SCOPE_PLATFORM and not caller.platform):
            raise ApiKeyNotFoundError()  # another team's key does not exist for this caller
        return key

    async def deactivate(self, caller: Principal, key_id) -> None:
        key = await self._visible_key(caller, key_id)
        if not await self._io(self.store.deactivate_key, key.id, self.clock.now_ns()):
            raise ApiKeyNotFoundError()

    async def delete(self, caller: Principal, key_id) -> None:
        key = await self._visible_key(caller, key_id)
        if not await self._io(self.store.delete_key, key.id):
            raise ApiKeyNotFoundError()

    # ---- teams -----------------------------------------------------------------------------------
    async def create_team(self, caller: Principal, name, slug, home_region_id) -> Team:
        if not caller.all_teams:
            raise ForbiddenError("teams can only be created with the platform key")
        name = _name(name, "team name")
        now = self.clock.now_ns()
        team = Team(id=self.new_uuid(), name=name, slug=_slug(slug, name), home_region_id=_region(home_region_id),
                    created_ns=now, updated_ns=now)
        await self._io(self.store.create_team, team)
        return team

    async def list_teams(self, caller: Principal) -> list[Team]:
        if caller.all_teams:
            teams = await self._io(self.store.teams)
        else:
            team = await self._io(self.store.team, caller.team_id)
            teams = [team] if team is not None else []
        return sorted(teams, key=lambda t: (t.created_ns, t.id))

    async def team(self, caller: Principal, team_id) -> Team:
        team_id = _uuid(team_id, "team")
        team = await self._io(self.store.team, team_id) if caller.sees(team_id) else None
        if team is None:
            raise TeamNotFoundError()
        return team

    async def update_team(self, caller: Principal, team_id, changes: dict) -> Team:
        team = await self.team(caller, team_id)
        if not caller.can(APIKEY_MANAGE):
            raise ForbiddenError("updating a team requires team admin access")
        region = changes.get("home_region_id")
        if region is not None and _region(region) != team.home_region_id:
            raise AccessRequestError("home_region_id cannot be changed")
        if changes.get("name") is not None:
            team.name = _name(changes["name"], "team name")
        if changes.get("slug") is not None:
            team.slug = _slug(changes["slug"] or None, team.name)
        team.updated_ns = self.clock.now_ns()
        if not await self._io(self.store.update_team, team):
            raise TeamNotFoundError()
        return team

    async def delete_team(self, caller: Principal, team_id, sandboxes_of: Callable[[str], Awaitable[int]]) -> None:
        """Only the platform key deletes a team, and only once it owns no sandbox; its keys go with it."""
        team = await self.team(caller, team_id)
        if not caller.all_teams:
            raise ForbiddenError("teams can only be deleted with the platform key")
        count = await sandboxes_of(team.id)
        if count:
            raise TeamNotEmptyError(team.id, count)
        if not await self._io(self.store.delete_team, team.id):
            raise TeamNotFoundError()
