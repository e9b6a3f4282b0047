"""What the console's browser relies on, checked with a raw client: the bearer carried as a
WebSocket subprotocol (echoed as ``sessiond.v1``, never echoed itself), no credential
taken from a query string, and foreign ``Origin``s refused before the upgrade."""
from __future__ import annotations

import base64
import json

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.helpers import TOKEN, create_session, spath

CONSOLE = "sessiond.v1"


def bearer_protocol(token: str) -> str:
    return "sessiond.bearer." + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def ws_url(server, sb, sid) -> str:
    return server.url.replace("http://", "ws://") + spath(sb, sid, "/ws") + "?after=0"


@pytest.fixture
def cat_session(http, sandbox_id):
    return create_session(http, sandbox_id, {"command": ["cat"]})["id"]


def refused_status(url, **kw) -> int:
    with pytest.raises(InvalidStatus) as refused:
        connect(url, open_timeout=10, **kw).close()
    return refused.value.response.status_code


def test_a_bearer_offered_as_a_subprotocol_opens_the_websocket_and_only_the_console_protocol_is_echoed(
        server, sandbox_id, cat_session):
    with connect(ws_url(server, sandbox_id, cat_session), subprotocols=[CONSOLE, bearer_protocol(TOKEN)],
                 open_timeout=10) as conn:
        assert conn.subprotocol == CONSOLE
        assert TOKEN not in str(conn.response.headers)
        first = json.loads(conn.recv(timeout=10))
        assert first["type"] == "event" and first["event"]["type"] == "session.created"


def test_a_wrong_or_undecodable_bearer_subprotocol_is_401(server, sandbox_id, cat_session):
    url = ws_url(server, sandbox_id, cat_session)
    assert refused_status(url, subprotocols=[CONSOLE, bearer_protocol("wrong")]) == 401
    assert refused_status(url, subprotocols=[CONSOLE, "sessiond.bearer.%%%"]) == 401
    assert refused_status(url, subprotocols=[CONSOLE]) == 401


def test_a_token_in_the_query_string_is_never_a_credential(server, http, sandbox_id, cat_session):
    assert refused_status(ws_url(server, sandbox_id, cat_session) + f"&token={TOKEN}") == 401
    assert refused_status(ws_url(server, sandbox_id, cat_session) + f"&access_token={TOKEN}") == 401


def test_a_websocket_from_a_foreign_origin_is_refused_even_with_the_token(server, sandbox_id, cat_session):
    url = ws_url(server, sandbox_id, cat_session)
    auth = {"additional_headers": {"Authorization": f"Bearer {TOKEN}"}}
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{server.port + 1}", "https://127.0.0.1"):
        assert refused_status(url, origin=origin, **auth) == 403, origin
    assert refused_status(url, origin="http://evil.example", subprotocols=[CONSOLE, bearer_protocol(TOKEN)]) == 403
    with connect(url, origin=f"http://127.0.0.1:{server.port}", open_timeout=10, **auth) as conn:
        assert conn.subprotocol is None  # nothing offered, nothing chosen: the SDK's handshake
        assert json.loads(conn.recv(timeout=10))["type"] == "event"


def test_an_api_call_from_a_foreign_origin_is_refused_in_the_envelope(server, http):
    refused = http.get("/api/v1/sandboxes", headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403
    assert refused.json() == {"success": False, "error": {"code": "forbidden", "message": "origin not allowed"}}
    same = http.get("/api/v1/sandboxes", headers={"Origin": server.url})
    assert same.status_code == 200
