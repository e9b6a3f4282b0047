"""The API key and team rules (``domain.api_keys``) over both real stores: SQLite in a data dir and
PostgreSQL (the private test cluster), with a manual clock for expiry."""
from __future__ import annotations

import asyncio
import itertools
import os
import sqlite3
import stat
import threading
import uuid

import pytest

from session_supervisor.domain.api_keys import ApiKeys, hash_secret
from session_supervisor.domain.model import access as a
from session_supervisor.domain.model.errors import (AccessRequestError, ApiKeyNotFoundError, ForbiddenError,
                                                    TeamNotEmptyError, TeamNotFoundError, UnauthorizedError)
from session_supervisor.infra.fakes import FakeClock
from session_supervisor.infra.key_store import FILE_NAME, SqliteKeyStore

_secrets = itertools.count()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "sqlite":
        made = SqliteKeyStore(tmp_path)
        yield made
        made.close()
        return
    from session_supervisor.infra.pg_key_store import PostgresKeyStore
    from session_supervisor.infra.pg_store import connect

    datastore = connect(request.getfixturevalue("pg_url"))
    made = PostgresKeyStore(datastore)
    made.create_tables()
    yield made
    datastore.close()


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def keys(store, clock):
    return ApiKeys(store, clock, lambda: f"{next(_secrets):048x}", lambda: str(uuid.uuid4()))


def run(coroutine):
    return asyncio.run(coroutine)


def team_with_keys(keys, *roles):
    team = run(keys.create_team(a.PLATFORM, "alpha", None, "local"))
    as_team = a.PLATFORM.as_team(team.id)
    made = [run(keys.create_key(as_team, f"key-{role}", "team", [role], "30d")) for role in roles]
    return team, made


def test_a_key_authenticates_as_its_team_with_its_roles_permissions(keys):
    team, [(key, secret)] = team_with_keys(keys, "viewer")
    principal = run(keys.authenticate(secret))
    assert (principal.team_id, principal.key_id, principal.roles) == (team.id, key.id, ("viewer",))
    assert principal.can(a.SANDBOX_READ) and not principal.can(a.SANDBOX_WRITE)
    assert principal.sees(team.id) and not principal.sees("") and not principal.all_teams
    assert run(keys.authenticate(secret, team.id)) == principal  # selecting its own team is fine


@pytest.mark.parametrize("secret, message", [("s0_local_" + "0" * 48, "invalid token"), ("nope", "invalid token")])
def test_an_unknown_secret_is_refused(keys, secret, message):
    with pytest.raises(UnauthorizedError, match=message):
        run(keys.authenticate(secret))


def test_a_deactivated_key_and_an_expired_key_are_refused_with_the_reason(keys, clock):
    team, [(first, first_secret), (_second, second_secret)] = team_with_keys(keys, "developer", "viewer")
    run(keys.deactivate(a.PLATFORM.as_team(team.id), first.id))
    with pytest.raises(UnauthorizedError, match="api key inactive"):
        run(keys.authenticate(first_secret))
    run(keys.authenticate(second_secret))
    clock._now += 30 * a.DAY_NS  # "30d" ends exactly then
    with pytest.raises(UnauthorizedError, match="api key expired"):
        run(keys.authenticate(second_secret))


def test_a_team_key_cannot_select_another_team(keys):
    _team, [(_key, secret)] = team_with_keys(keys, "admin")
    other = run(keys.create_team(a.PLATFORM, "beta", None, None))
    with pytest.raises(UnauthorizedError):
        run(keys.authenticate(secret, other.id))


def test_only_the_secrets_hash_and_prefix_are_stored(keys, store, tmp_path):
    _team, [(key, secret)] = team_with_keys(keys, "developer")
    stored = store.key(key.id)
    assert stored.secret_hash == hash_secret(secret) and stored.prefix == secret[:12]
    assert secret not in repr(stored)
    if isinstance(store, SqliteKeyStore):
        path = tmp_path / FILE_NAME
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        dump = "\n".join(sqlite3.connect(path).iterdump())
        assert secret not in dump and hash_secret(secret) in dump


@pytest.mark.parametrize("body, message", [
    ({"name": " "}, "name is required"),
    ({"name": "k", "roles": ["root"]}, "unsupported role: root"),
    ({"name": "k", "roles": [""]}, "role cannot be empty"),
    ({"name": "k", "expires_in": "7d"}, "unsupported expires_in"),
    ({"name": "k", "scope": "global"}, "scope must be team or platform"),
    ({"name": "k", "scope": "platform", "roles": ["admin"]}, "platform API keys do not support roles"),
])
def test_bad_key_requests_are_refused_with_the_gateways_words(keys, body, message):
    team = run(keys.create_team(a.PLATFORM, "alpha", None, None))
    args = (body.get("name"), body.get("scope"), body.get("roles"), body.get("expires_in"))
    with pytest.raises(AccessRequestError, match=message):
        run(keys.create_key(a.PLATFORM.as_team(team.id), *args))


def test_defaults_are_a_developer_key_for_ninety_days(keys, clock):
    team = run(keys.create_team(a.PLATFORM, "alpha", None, None))
    key, _ = run(keys.create_key(a.PLATFORM.as_team(team.id), "ci", None, None, None))
    assert (key.scope, key.roles, key.expires_ns - key.created_ns) == ("team", ("developer",), 90 * a.DAY_NS)


def test_the_platform_key_needs_a_team_for_team_keys_and_only_it_makes_platform_keys(keys):
    with pytest.raises(AccessRequestError, match="x-team-id is required"):
        run(keys.create_key(a.PLATFORM, "k", "team", ["viewer"], None))
    platform_key, secret = run(keys.create_key(a.PLATFORM, "ops", "platform", None, "never"))
    assert run(keys.authenticate(secret)).all_teams
    team, [(_admin, admin_secret)] = team_with_keys(keys, "admin")
    admin = run(keys.authenticate(admin_secret))
    with pytest.raises(ForbiddenError):
        run(keys.create_key(admin, "ops2", "platform", None, None))
    # A team's admin manages its own team's keys, and sees no platform key.
    made, _ = run(keys.create_key(admin, "dev", "team", ["developer", "viewer", "developer"], None))
    assert made.team_id == team.id and made.roles == ("developer", "viewer")
    assert platform_key.id not in {k.id for k in run(keys.list_keys(admin))}
    with pytest.raises(ApiKeyNotFoundError):
        run(keys.deactivate(admin, platform_key.id))


def test_roles_without_key_management_cannot_manage_keys(keys):
    _team, made = team_with_keys(keys, "developer", "builder", "viewer")
    for _key, secret in made:
        caller = run(keys.authenticate(secret))
        with pytest.raises(ForbiddenError, match="requires team admin access"):
            run(keys.list_keys(caller))
        with pytest.raises(ForbiddenError):
            run(keys.create_key(caller, "more", "team", ["viewer"], None))


def test_another_teams_key_does_not_exist_for_a_team_admin(keys):
    _alpha, [(_admin, admin_secret)] = team_with_keys(keys, "admin")
    beta = run(keys.create_team(a.PLATFORM, "beta", None, None))
    beta_key, beta_secret = run(keys.create_key(a.PLATFORM.as_team(beta.id), "b", "team", ["developer"], None))
    admin = run(keys.authenticate(admin_secret))
    for call in (keys.deactivate, keys.delete):
        with pytest.raises(ApiKeyNotFoundError):
            run(call(admin, beta_key.id))
    with pytest.raises(AccessRequestError, match="invalid API key id"):
        run(keys.delete(admin, "not-a-uuid"))
    with pytest.raises(TeamNotFoundError):
        run(keys.team(admin, beta.id))
    run(keys.authenticate(beta_secret))  # untouched


def test_teams_are_made_and_deleted_by_the_platform_key_only_when_they_own_no_sandbox(keys):
    team, [(key, secret)] = team_with_keys(keys, "admin")
    assert team.slug == "alpha" and team.home_region_id == "local"
    admin = run(keys.authenticate(secret))
    with pytest.raises(ForbiddenError):
        run(keys.create_team(admin, "mine", None, None))
    assert [t.id for t in run(keys.list_teams(admin))] == [team.id]
    renamed = run(keys.update_team(admin, team.id, {"name": "Alpha Squad", "slug": ""}))
    assert (renamed.name, renamed.slug) == ("Alpha Squad", "alpha-squad")

    async def two(_team_id):
        return 2

    async def none(_team_id):
        return 0

    with pytest.raises(TeamNotEmptyError) as blocked:
        run(keys.delete_team(a.PLATFORM, team.id, two))
    assert blocked.value.details["blocking_resources"] == [{"category": "sandboxes", "count": 2}]
    run(keys.delete_team(a.PLATFORM, team.id, none))
    with pytest.raises(UnauthorizedError):  # its keys went with it
        run(keys.authenticate(secret))
    assert run(keys.list_teams(a.PLATFORM)) == []
    with pytest.raises(AccessRequestError, match="names no team"):
        run(keys.select_team(a.PLATFORM, team.id))



class FirstRefreshWaits(SqliteKeyStore):
    """The real store, with one pause: its first read of every key (the refresh of the in-memory
    copy after a write) waits until another write has gone through, or 2 s. It forces the one
    interleaving in which an older copy could replace a newer one."""

    def __init__(self, path) -> None:
        self.armed = False
        self.second_written = threading.Event()
        super().__init__(path)

    def _run(self, name, args=(), fetch=False):
        result = super()._run(name, args, fetch)
        if name == "keys" and self.armed:
            self.armed = False
            self.second_written.wait(2.0)
        return result


def test_two_keys_created_at_once_both_authenticate(tmp_path, clock):
    store = FirstRefreshWaits(tmp_path)
    keys = ApiKeys(store, clock, lambda: f"{next(_secrets):048x}", lambda: str(uuid.uuid4()))
    team = run(keys.create_team(a.PLATFORM, "alpha", None, None))
    as_team = a.PLATFORM.as_team(team.id)

    async def both():
        store.armed = True
        first = asyncio.ensure_future(keys.create_key(as_team, "first", "team", ["viewer"], None))
        await asyncio.sleep(0.1)  # the first is in its refresh (or past it): either order must work
        second = await keys.create_key(as_team, "second", "team", ["viewer"], None)
        store.second_written.set()
        return [await first, second]

    for _key, secret in run(both()):
        assert run(keys.authenticate(secret)).team_id == team.id
    store.close()
