"""The AeroLVM facade under /v1, driven by the official ``aerolvm-sdk==0.6.4`` (import ``microvm``).

Every wait is bounded: ``handle.wait(timeout)`` and ``wait_for`` polls. Callbacks run on
the SDK's reader threads and only append to lists.
"""
from __future__ import annotations

import json
import threading

import httpx
import pytest
import websocket
from microvm import MicroVM
from microvm.client import MicroVMError, MicroVMHTTPError

from tests.helpers import TOKEN, get_session, ok, spath, wait_for
from tests.serverproc import ServerProcess

WAIT_S = 15


@pytest.fixture
def client(server):
    return MicroVM(pat_token=TOKEN, api_url=server.url, config={"retry": {"maxRetries": 0}})


@pytest.fixture
def sandbox(client):
    sandbox = client.create({"image": "ghcr.io/aerol-ai/ubuntu:22.04"})
    yield sandbox
    try:
        client._do_json("DELETE", f"/v1/sandboxes/{sandbox.id}", None)
    except MicroVMHTTPError:
        pass


class Collected:
    """stdout/stderr callbacks of one attachment."""

    def __init__(self) -> None:
        self.stdout: list[bytes] = []
        self.stderr: list[bytes] = []
        self.lock = threading.Lock()

    def options(self, **extra) -> dict:
        return {"onStdout": self._out, "onStderr": self._err, **extra}

    def _out(self, chunk: bytes) -> None:
        with self.lock:
            self.stdout.append(chunk)

    def _err(self, chunk: bytes) -> None:
        with self.lock:
            self.stderr.append(chunk)

    def out(self) -> bytes:
        with self.lock:
            return b"".join(self.stdout)

    def err(self) -> bytes:
        with self.lock:
            return b"".join(self.stderr)


# ---- acceptance: the seed's example, unmodified -----------------------------------------------
def test_seed_example_shell_session_echoes_exits_zero_and_a_second_client_sees_the_same(sandbox):
    session = sandbox.create_session(
        {"name": "shell", "command": "bash", "workDir": "/workspace", "pty": True, "cols": 120, "rows": 40})
    assert session["id"] and session["status"] == "running" and session["pty"] is True
    first = Collected()
    handle = sandbox.attach_session(session["id"], first.options(cols=120, rows=40))
    handle.write("echo hello\n")
    wait_for(lambda: b"hello\r\n" in first.out(), timeout=WAIT_S, describe=first.out)
    second = Collected()
    other = sandbox.attach_session(session["id"], second.options())
    wait_for(lambda: b"hello\r\n" in second.out(), timeout=WAIT_S, describe=second.out)  # the replay
    handle.write("exit\n")
    assert handle.wait(WAIT_S) == {"code": 0}
    assert other.wait(WAIT_S) == {"code": 0}
    assert b"hello" in sandbox.session_log(session["id"])
    assert second.out().endswith(first.out()[-200:])  # the same output, through to the end
    after = sandbox.get_session(session["id"])
    assert after["status"] == "exited" and after["exitCode"] == 0 and after["exitedAt"]


def test_a_pipes_session_keeps_stderr_on_0x02_and_reports_its_exit_code(sandbox):
    session = sandbox.create_session({"command": "echo out; sleep 0.2; echo err >&2; exit 3"})
    live = Collected()
    assert sandbox.attach_session(session["id"], live.options()).wait(WAIT_S) == {"code": 3}
    assert live.out() == b"out\n" and live.err() == b"err\n"
    late = Collected()  # the replay keeps each stream on its own prefix too
    assert sandbox.attach_session(session["id"], late.options()).wait(WAIT_S) == {"code": 3}
    assert late.out() == b"out\n" and late.err() == b"err\n"
    assert sandbox.session_log(session["id"]) == b"out\nerr\n"
    assert sandbox.get_session(session["id"])["status"] == "exited"


def test_attaching_to_an_exited_session_gets_the_replay_then_the_exit_at_once(sandbox):
    session = sandbox.create_session({"argv": ["sh", "-c", "printf 'a\\nb\\n'"]})
    wait_for(lambda: sandbox.get_session(session["id"])["status"] == "exited", timeout=WAIT_S)
    late = Collected()
    assert sandbox.attach_session(session["id"], late.options(cols=80, rows=24)).wait(WAIT_S) == {"code": 0}
    assert late.out() == b"a\nb\n"


def test_replay_and_log_carry_at_least_the_last_mebibyte(sandbox):
    script = "head -c 3000000 /dev/zero | tr '\\0' x; echo END"
    session = sandbox.create_session({"command": script})
    live = Collected()
    assert sandbox.attach_session(session["id"], live.options()).wait(WAIT_S * 2) == {"code": 0}
    log = sandbox.session_log(session["id"])
    assert len(log) >= 1 << 20 and log.endswith(b"x" * 100 + b"END\n") and set(log[:-4]) == {ord("x")}
    assert live.out().endswith(b"END\n") and set(live.out()[:-4]) == {ord("x")}
    late = Collected()  # after the exit, the replay is exactly the log window
    assert sandbox.attach_session(session["id"], late.options()).wait(WAIT_S) == {"code": 0}
    assert late.out() == log


def test_a_signal_ends_the_session_and_the_exit_frame_names_it(sandbox):
    session = sandbox.create_session({"argv": ["sleep", "300"]})
    handle = sandbox.attach_session(session["id"], {})
    sandbox.signal_session(session["id"], "TERM")
    assert handle.wait(WAIT_S) == {"code": -1, "signal": "TERM"}
    after = sandbox.get_session(session["id"])
    assert after["status"] == "killed" and after["exitCode"] == -1 and after["exitSignal"] == "TERM"


def test_deleting_a_session_kills_it_and_attached_clients_get_the_exit(sandbox):
    session = sandbox.create_session({"command": "bash", "pty": True})
    handle = sandbox.attach_session(session["id"], {})
    sandbox.delete_session(session["id"])
    assert handle.wait(WAIT_S) == {"code": -1, "signal": "KILL"}
    with pytest.raises(MicroVMHTTPError) as caught:
        sandbox.get_session(session["id"])
    assert caught.value.status_code == 404 and str(caught.value) == "session not found"


def test_resize_over_http_and_over_attach_reaches_the_pty_and_pipes_ignore_it(sandbox):
    session = sandbox.create_session({"argv": ["sh"], "pty": True, "env": {"PS1": "$ "}})
    sandbox.resize_session(session["id"], cols=90, rows=20)
    seen = Collected()
    handle = sandbox.attach_session(session["id"], seen.options())
    handle.write("stty size\n")
    wait_for(lambda: b"20 90" in seen.out(), timeout=WAIT_S, describe=seen.out)
    handle.resize(100, 30)
    handle.write("stty size\n")
    wait_for(lambda: b"30 100" in seen.out(), timeout=WAIT_S, describe=seen.out)
    handle.close()
    pipes = sandbox.create_session({"argv": ["cat"]})
    sandbox.resize_session(pipes["id"], cols=90, rows=20)  # a no-op, not an error


def test_a_detached_client_leaves_the_session_running_and_its_stdin_open(sandbox):
    session = sandbox.create_session({"argv": ["cat"]})
    first = sandbox.attach_session(session["id"], {})
    first.write("one\n")
    first.close()
    with pytest.raises(MicroVMError):
        first.wait(WAIT_S)
    wait_for(lambda: sandbox.session_log(session["id"]) == b"one\n", timeout=WAIT_S)
    assert sandbox.get_session(session["id"])["status"] == "running"
    again = Collected()
    handle = sandbox.attach_session(session["id"], again.options())
    handle.write("two\n")
    wait_for(lambda: again.out() == b"one\ntwo\n", timeout=WAIT_S, describe=again.out)
    sandbox.signal_session(session["id"], "KILL")
    assert handle.wait(WAIT_S) == {"code": -1, "signal": "KILL"}


def test_three_clients_attached_at_once_share_stdin_and_output(sandbox):
    session = sandbox.create_session({"argv": ["cat"]})
    clients = [Collected() for _ in range(3)]
    handles = [sandbox.attach_session(session["id"], c.options()) for c in clients]
    wait_for(lambda: sandbox.get_session(session["id"])["attached"] == 3, timeout=WAIT_S)
    for n, handle in enumerate(handles):
        handle.write(f"from-{n}\n")
    for c in clients:
        wait_for(lambda c=c: c.out().count(b"from-") == 3, timeout=WAIT_S, describe=c.out)
    assert clients[0].out() == clients[1].out() == clients[2].out()
    sandbox.signal_session(session["id"], "INT")
    assert [h.wait(WAIT_S) for h in handles] == [{"code": -1, "signal": "INT"}] * 3


# ---- both APIs, sandboxes, errors -------------------------------------------------------------
def test_an_aerolvm_session_is_an_ordinary_supervised_session_in_both_apis(sandbox, http):
    created = sandbox.create_session({"name": "job", "command": "cat", "env": {"A": "1"}, "workDir": "sub"})
    native = get_session(http, sandbox.id, created["id"])
    assert native["spec"]["command"] == ["sh", "-c", "cat"] and native["spec"]["name"] == "job"
    assert native["spec"]["cwd"] == "sub" and native["spec"]["env"] == {"A": "1"}
    assert native["spec"]["lifecycle"]["restart"]["policy"] == "never"
    other = ok(http.post(spath(sandbox.id), json={"command": ["sleep", "300"]}), 201)
    listed = {s["id"]: s for s in sandbox.list_sessions()}
    assert set(listed) == {created["id"], other["id"]}
    assert listed[other["id"]]["argv"] == ["sleep", "300"] and listed[other["id"]]["status"] == "running"


def test_sandbox_routes_map_onto_our_sandboxes(client, http):
    sandbox = client.create({"image": "ubuntu:22.04", "name": "named-box", "env": {"X": "1"}})
    assert sandbox.to_dict()["id"] == sandbox.id and sandbox.status == "running"
    assert client.get(sandbox.id).id == sandbox.id
    assert client.get(sandbox.id, include_env=True).to_dict()["env"] == {"X": "1"}
    assert client.get_by_name("named-box").id == sandbox.id
    assert sandbox.id in [sb.id for sb in client.list()]
    ok(http.get(f"/api/v1/sandboxes/{sandbox.id}"), 200)  # the same sandbox in the Sandbox0 API
    with pytest.raises(MicroVMHTTPError) as taken:
        client.create({"image": "ubuntu:22.04", "name": "named-box"})
    assert taken.value.status_code == 409
    assert http.delete(f"/v1/sandboxes/{sandbox.id}").status_code == 204
    with pytest.raises(MicroVMHTTPError) as gone:
        client.get(sandbox.id)
    assert gone.value.status_code == 404 and str(gone.value) == "sandbox not found"


def test_errors_are_error_objects_and_bearer_auth_guards_http_and_the_upgrade(server, sandbox):
    with httpx.Client(base_url=server.url, timeout=10) as anonymous:
        for response in (anonymous.get(f"/v1/sandboxes/{sandbox.id}"),
                         anonymous.get(f"/v1/sandboxes/{sandbox.id}/sessions",
                                       headers={"Authorization": "Bearer wrong"})):
            assert (response.status_code, response.json()) == (401, {"error": "unauthorized"})
        authed = {"Authorization": f"Bearer {TOKEN}"}
        bad = anonymous.post(f"/v1/sandboxes/{sandbox.id}/sessions", json={"argv": "ls"}, headers=authed)
        assert (bad.status_code, bad.json()) == (400, {"error": "argv must be an array of strings"})
        for response in (anonymous.get(f"/v1/sandboxes/{sandbox.id}/sessions/ses-x/log", headers=authed),
                         anonymous.post(f"/v1/sandboxes/{sandbox.id}/sessions/ses-x/signal",
                                        json={"signal": "TERM"}, headers=authed)):
            assert (response.status_code, response.json()) == (404, {"error": "session not found"})
        missing = anonymous.get("/v1/nothing-here", headers=authed)
        assert missing.status_code == 404 and set(missing.json()) == {"error"}
    session = sandbox.create_session({"argv": ["cat"]})
    url = server.url.replace("http://", "ws://") + f"/v1/sandboxes/{sandbox.id}/sessions/{session['id']}/attach"
    unknown = url.replace(session["id"], "ses-00000000-000")
    for target, header in ((url, []), (url, [f"Authorization: Bearer {TOKEN}x"]), (unknown, [])):
        with pytest.raises(websocket.WebSocketBadStatusException) as caught:
            websocket.create_connection(target, header=header, timeout=10)
        assert caught.value.status_code == 401  # auth is checked before anything else
        assert json.loads(caught.value.resp_body) == {"error": "unauthorized"}
    with pytest.raises(MicroVMError, match="status=404"):
        sandbox.attach_session("ses-00000000-000")


def test_server_shutdown_ends_an_attachment_with_an_error_not_a_silent_close(tmp_path):
    with ServerProcess(tmp_path / "data", token=TOKEN, runtime="host") as own:
        client = MicroVM(pat_token=TOKEN, api_url=own.url, config={"retry": {"maxRetries": 0}})
        sandbox = client.create({"image": "ubuntu:22.04"})
        session_id = sandbox.create_session({"argv": ["cat"]})["id"]
        handle = sandbox.attach_session(session_id, {})
        wait_for(lambda: sandbox.get_session(session_id)["attached"] == 1, timeout=WAIT_S)
        own.stop()
        with pytest.raises(MicroVMError, match="server shutting down"):
            handle.wait(WAIT_S)


def test_the_sdk_health_call_reads_our_health_route(client, sandbox):
    health = client.health()  # GET /health, outside /v1
    assert health["status"] == "ok" and health["sandboxes"] >= 1 and health["version"], health
    anonymous = httpx.get(f"{client.api_url}/health")
    assert anonymous.status_code == 200 and anonymous.json()["status"] == "ok"  # liveness needs no token
