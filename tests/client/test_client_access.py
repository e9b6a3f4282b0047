"""The Python client's API key and team methods against a real server, sync and async."""
from __future__ import annotations

import asyncio

import pytest

from session_supervisor.client import ApiKey, AsyncClient, Client, NotFound, Team, Unauthorized
from tests.helpers import TOKEN


def test_the_client_makes_teams_and_keys_and_a_team_key_client_is_scoped_to_its_team(server):
    with Client(server.url, TOKEN, timeout=30.0) as admin:
        team = admin.create_team("client-alpha")
        assert isinstance(team, Team) and team.slug == "client-alpha" and admin.get_team(team.id).id == team.id
        key = admin.create_api_key("client-dev", roles=["developer"], expires_in="30d", team_id=team.id)
        assert isinstance(key, ApiKey) and key.key.startswith("s0_") and key.team_id == team.id
        listed = admin.list_api_keys(team_id=team.id)
        assert [k.id for k in listed] == [key.id] and listed[0].key is None and listed[0].key_value.endswith("***")
        platform_sandbox = admin.claim_sandbox("default").sandbox_id
        try:
            with Client(server.url, key.key, timeout=30.0) as dev:
                assert dev.current_api_key().permissions and dev.current_api_key().id == key.id
                mine = dev.claim_sandbox("default").sandbox_id
                assert dev.get_sandbox(mine).team_id == team.id
                assert platform_sandbox not in {sb.id for sb in dev.list_sandboxes()}
                with pytest.raises(NotFound):
                    dev.get_sandbox(platform_sandbox)
                dev.delete_sandbox(mine)
                admin.deactivate_api_key(key.id, team_id=team.id)
                with pytest.raises(Unauthorized, match="api key inactive"):
                    dev.list_sandboxes()
        finally:
            admin.delete_sandbox(platform_sandbox)
        admin.delete_api_key(key.id, team_id=team.id)
        assert admin.update_team(team.id, name="Client Alpha").name == "Client Alpha"

        async def teams() -> list[str]:
            async with AsyncClient(server.url, TOKEN, timeout=30.0) as client:
                return [t.id for t in await client.list_teams()]

        assert team.id in asyncio.run(teams())
        admin.delete_team(team.id)
        with pytest.raises(NotFound):
            admin.get_team(team.id)
