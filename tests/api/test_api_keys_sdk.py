"""API keys and teams through the official ``sandbox0`` Python SDK, against a real server with real sandboxes.

The acceptance story: the server's token (the platform key) makes two teams and their keys;
alpha's developer key claims a sandbox and runs a session; beta's key gets 404 on it (and does
not see it in lists); alpha's viewer key reads the journal and gets 403 on input; once
deactivated, the developer key gets 401.
"""
from __future__ import annotations

import base64
import shutil
import time

import pytest
import sandbox0
from sandbox0.apispec.api.api_keys import (delete_api_keys_id, get_api_keys, get_api_keys_current, post_api_keys,
                                           post_api_keys_id_deactivate)
from sandbox0.apispec.api.teams import get_teams, post_teams
from sandbox0.apispec.models.create_api_key_request import CreateAPIKeyRequest
from sandbox0.apispec.models.create_team_request import CreateTeamRequest
from sandbox0.apispec.models.execution_session_input_request import ExecutionSessionInputRequest
from sandbox0.apispec.models.execution_session_spec import ExecutionSessionSpec
from sandbox0.apispec.models.success_api_key_list_response import SuccessAPIKeyListResponse
from sandbox0.apispec.models.success_create_api_key_response import SuccessCreateAPIKeyResponse
from sandbox0.apispec.models.success_current_api_key_response import SuccessCurrentAPIKeyResponse
from sandbox0.apispec.models.success_message_response import SuccessMessageResponse
from sandbox0.apispec.models.success_team_list_response import SuccessTeamListResponse
from sandbox0.apispec.models.success_team_response import SuccessTeamResponse
from sandbox0.errors import APIError
from sandbox0.response import ensure_data

from tests.helpers import TOKEN
from tests.serverproc import ServerProcess

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
DEADLINE_S = 15.0


def client(url: str, token: str, team: str | None = None) -> sandbox0.Client:
    return sandbox0.Client(token=token, base_url=url, timeout=15.0, headers={"X-Team-ID": team} if team else None)


def make_team(admin: sandbox0.Client, name: str) -> str:
    team = ensure_data(post_teams.sync_detailed(client=admin.api, body=CreateTeamRequest(
        name=name, home_region_id="local")), SuccessTeamResponse)
    return str(team.id)


def make_key(as_team: sandbox0.Client, name: str, role: str):
    return ensure_data(post_api_keys.sync_detailed(client=as_team.api, body=CreateAPIKeyRequest(
        name=name, roles=[role], expires_in="30d")), SuccessCreateAPIKeyResponse)


def refused(call) -> APIError:
    with pytest.raises(APIError) as caught:
        call()
    return caught.value


def wait_for_output(sandbox, session_id: str, wanted: bytes) -> list:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        events = sandbox.list_session_events(session_id).events
        output = b"".join(base64.b64decode(e.data_base64) for e in events if e.type_ == "output")
        if wanted in output:
            return events
        assert time.monotonic() < deadline, f"no {wanted!r} in {output!r}"
        time.sleep(0.05)


def test_team_keys_scope_sandboxes_to_their_team_and_roles_limit_what_they_do(tmp_path):
    with ServerProcess(tmp_path / "data", token=TOKEN, runtime="bwrap") as srv:
        admin = client(srv.url, TOKEN)
        alpha, beta = make_team(admin, "alpha"), make_team(admin, "beta")
        teams = ensure_data(get_teams.sync_detailed(client=admin.api), SuccessTeamListResponse).teams
        assert {str(t.id) for t in teams} == {alpha, beta}

        as_alpha = client(srv.url, TOKEN, alpha)
        developer = make_key(as_alpha, "ci", "developer")
        viewer = make_key(as_alpha, "auditor", "viewer")
        outsider = make_key(client(srv.url, TOKEN, beta), "beta-ci", "developer")
        assert (developer.team_id, viewer.team_id, outsider.team_id) == (alpha, alpha, beta)
        assert developer.key.startswith("s0_") and developer.roles == ["developer"]

        # Listed without their secrets.
        listed = ensure_data(get_api_keys.sync_detailed(client=as_alpha.api), SuccessAPIKeyListResponse).api_keys
        assert {k.name for k in listed} == {"ci", "auditor"}
        assert all(k.key_value.endswith("***") and developer.key not in k.key_value for k in listed)

        dev = client(srv.url, developer.key)
        current = ensure_data(get_api_keys_current.sync_detailed(client=dev.api), SuccessCurrentAPIKeyResponse)
        assert current.api_key.id == developer.id and "sandbox:write" in current.api_key.permissions

        # The developer key claims a sandbox and runs a session in it.
        sandbox = dev.sandboxes.claim("default")
        assert dev.sandboxes.get(sandbox.id).team_id == alpha
        session = sandbox.create_session(ExecutionSessionSpec(command=["/bin/cat"]))
        sandbox.write_session_input(session.id, ExecutionSessionInputRequest(
            input_id="i1", data_base64=base64.b64encode(b"hello team\n").decode(),
            expected_attempt_id=session.attempt.id))
        wait_for_output(sandbox, session.id, b"hello team\n")

        # The other team's key: the sandbox does not exist for it.
        other = client(srv.url, outsider.key)
        for call in (lambda: other.sandboxes.get(sandbox.id),
                     lambda: other.sandbox(sandbox.id).list_session_events(session.id),
                     lambda: other.sandbox(sandbox.id).write_session_input(session.id, ExecutionSessionInputRequest(
                         input_id="i2", data_base64=base64.b64encode(b"intruder\n").decode())),
                     lambda: other.sandboxes.delete(sandbox.id)):
            assert refused(call).status_code == 404
        assert sandbox.id not in {s.id for s in other.sandboxes.list()}
        assert sandbox.id in {s.id for s in dev.sandboxes.list()}

        # The viewer reads the journal, and cannot write.
        watcher = client(srv.url, viewer.key).sandbox(sandbox.id)
        events = wait_for_output(watcher, session.id, b"hello team\n")
        assert b"intruder" not in b"".join(base64.b64decode(e.data_base64) for e in events if e.type_ == "output")
        denied = refused(lambda: watcher.write_session_input(session.id, ExecutionSessionInputRequest(
            input_id="i3", data_base64=base64.b64encode(b"viewer\n").decode())))
        # The SDK declares no 403 for input, so it hands over the body as it came (the contract's §7.5).
        assert denied.status_code == 403 and '"code":"forbidden"' in denied.message
        assert "insufficient permissions" in denied.message
        assert refused(lambda: client(srv.url, viewer.key).sandboxes.delete(sandbox.id)).status_code == 403

        # Deactivated: 401 from the next call on; the sandbox stays its team's.
        ensure_data(post_api_keys_id_deactivate.sync_detailed(id=developer.id, client=as_alpha.api),
                    SuccessMessageResponse)
        gone = refused(lambda: dev.sandboxes.get(sandbox.id))
        assert (gone.status_code, gone.message) == (401, "api key inactive")
        ensure_data(delete_api_keys_id.sync_detailed(id=viewer.id, client=as_alpha.api), SuccessMessageResponse)
        assert refused(lambda: watcher.list_session_events(session.id)).status_code == 401
        assert admin.sandboxes.get(sandbox.id).team_id == alpha  # the platform key sees every team
        admin.sandboxes.delete(sandbox.id)
