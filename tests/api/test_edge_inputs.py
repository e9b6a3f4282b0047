"""Edge inputs that used to get the wrong answer: a unix socket read as a file (500), base64 with
padding after a complete group (accepted), a text frame that is not UTF-8 (no close)."""
from __future__ import annotations

import pytest
from websockets.exceptions import ConnectionClosedError
from websockets.sync.client import connect

from tests.helpers import TOKEN, b64, create_session, err, ok, run_to_exit, wait_event

MAKE_SOCKET_AND_FIFO = "import os, socket; socket.socket(socket.AF_UNIX).bind('/workspace/sock'); os.mkfifo('/workspace/fifo')"


def test_reading_a_unix_socket_or_a_fifo_is_409_not_a_file(http, sandbox_id):
    exited, out = run_to_exit(http, sandbox_id, ["python3", "-c", MAKE_SOCKET_AND_FIFO.replace(
        "/workspace", ".")])
    assert exited["exit_code"] == 0, out
    for name in ("sock", "fifo"):
        for accept in ("application/octet-stream", "application/json"):
            resp = http.get(f"/api/v1/sandboxes/{sandbox_id}/files", params={"path": f"/workspace/{name}"},
                            headers={"accept": accept})
            err(resp, 409, "path_not_file")
        assert ok(http.get(f"/api/v1/sandboxes/{sandbox_id}/files/stat",
                           params={"path": f"/workspace/{name}"}), 200)["name"] == name


@pytest.mark.parametrize("encoded", ["aGVsbG8K==", "aGVsbG8K====", "aGVsbG8", "aGVs bG8K", "aGVsbG8=x"])
def test_base64_input_with_padding_or_characters_out_of_place_is_refused(http, sandbox_id, encoded):
    sid = create_session(http, sandbox_id, {"command": ["cat"]})["id"]
    resp = http.post(f"/api/v1/sandboxes/{sandbox_id}/sessions/{sid}/inputs",
                     json={"input_id": "pad", "data_base64": encoded})
    assert "data_base64" in err(resp, 400)["message"]
    accepted = http.post(f"/api/v1/sandboxes/{sandbox_id}/sessions/{sid}/inputs",
                         json={"input_id": "ok", "data_base64": b64(b"hello\n")})
    assert accepted.status_code == 202, accepted.text


def ws_url(server, path: str) -> str:
    return server.url.replace("http://", "ws://") + path


@pytest.mark.parametrize("kind", ["session", "context", "files"])
def test_a_text_frame_that_is_not_utf8_closes_the_websocket_with_1007(server, http, sandbox_id, kind):
    if kind == "session":
        sid = create_session(http, sandbox_id, {"command": ["cat"]})["id"]
        wait_event(http, sandbox_id, sid, lambda e: e["type"] == "attempt.started")
        path = f"/api/v1/sandboxes/{sandbox_id}/sessions/{sid}/ws"
    elif kind == "context":
        ctx = ok(http.post(f"/api/v1/sandboxes/{sandbox_id}/contexts",
                           json={"type": "cmd", "cmd": {"command": ["sleep", "60"]}}), 201)["id"]
        path = f"/api/v1/sandboxes/{sandbox_id}/contexts/{ctx}/ws"
    else:
        path = f"/api/v1/sandboxes/{sandbox_id}/files/watch"
    with connect(ws_url(server, path), additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send(b"\xff\xfe{\"type\": \"input\"}", text=True)  # the client library sends it as it is
        with pytest.raises(ConnectionClosedError) as closed:
            while True:
                ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007, closed.value
