"""Contexts through the official ``sandbox0`` Python SDK, unmodified: ``run``, ``cmd``, ``cmd_stream``
and the context routes, as the SDK's own e2e tests (test_sandbox_run.py, test_sandbox_contexts.py)
call them, plus the reference's error codes."""
from __future__ import annotations

import os
import uuid

import pytest

from sandbox0.apispec.models.create_cmd_context_request import CreateCMDContextRequest
from sandbox0.apispec.models.create_context_request import CreateContextRequest
from sandbox0.apispec.models.create_context_request_env_vars import CreateContextRequestEnvVars
from sandbox0.apispec.models.create_repl_context_request import CreateREPLContextRequest
from sandbox0.apispec.models.process_type import ProcessType
from sandbox0.apispec.models.pty_size import PTYSize
from sandbox0.sandbox import CmdOptions, RunOptions
from tests.helpers import TOKEN, err, ok, wait_for


@pytest.fixture
def sandbox(sdk):
    sb = sdk.sandboxes.claim("default")
    yield sb
    sdk.sandboxes.delete(sb.id)


def test_run_python_prints_hello_and_keeps_state_between_calls(sandbox):
    first = sandbox.run("python", "print('Hello, Sandbox0!')")
    assert "Hello, Sandbox0!\r\n" in first.output_raw
    assert first.output_raw.startswith("_S0_> ") and not first.output_raw.endswith("_S0_> ")
    sandbox.run("python", "x = 41")
    again = sandbox.run("python", "print(x + 1)")
    assert again.context_id == first.context_id  # the SDK caches one REPL per language
    assert "42\r\n" in again.output_raw


def test_run_bash_and_node_repls(sandbox):
    assert "from-bash\r\n" in sandbox.run("bash", "echo from-$0-ignored >/dev/null; echo from-bash").output_raw
    assert "\r\n3\r\n" in sandbox.run("node", "console.log(1 + 2)").output_raw


def test_cmd_returns_split_output_exit_code_and_state(sandbox):
    result = sandbox.cmd("sh -c 'echo out; echo err >&2; exit 3'")
    assert (result.stdout, result.stderr, result.exit_code, result.state) == ("out\n", "err\n", 3, "crashed")
    assert sorted(result.output_raw.splitlines()) == ["err", "out"]
    clean = sandbox.cmd("true")
    assert (clean.exit_code, clean.state) == (0, "stopped")


def test_cmd_honours_cwd_env_and_a_terminal(sandbox):
    result = sandbox.cmd("x", CmdOptions(command=["sh", "-c", "pwd; echo $SDK_VAR; tty >/dev/null && echo tty"],
                                         cwd="/workspace", env_vars={"SDK_VAR": "set"}, pty_rows=24, pty_cols=80))
    cwd, *rest = result.output_raw.split("\r\n")
    assert cwd.endswith("/workspace") and rest == ["set", "tty", ""]  # host runtime: the host path
    assert result.stdout == "" and result.exit_code == 0  # a terminal has no split output


def test_cmd_stream_yields_output_then_done(sandbox):
    stream = sandbox.cmd_stream("x", CmdOptions(command=["sh", "-c", "echo hello && echo warn >&2"]))
    try:
        outputs = list(stream.iter_outputs())
        done = stream.wait()
    finally:
        stream.close()
    assert {(o.source, o.data) for o in outputs} == {("stdout", "hello\n"), ("stderr", "warn\n")}
    assert (done.exit_code, done.state) == (0, "stopped")


def test_cmd_stream_of_a_command_killed_by_a_signal_reports_killed(sandbox):
    stream = sandbox.cmd_stream("x", CmdOptions(command=["sh", "-c", "echo started; kill -9 $$"]))
    try:
        assert [o.data for o in stream.iter_outputs()] == ["started\n"]
        done = stream.wait()
    finally:
        stream.close()
    assert (done.exit_code, done.state) == (-1, "killed")


def test_the_sdk_e2e_context_operations_work(sandbox):
    """The calls of sdk-py tests/e2e/test_sandbox_contexts.py and test_sandbox_run.py, in order."""
    env_vars = CreateContextRequestEnvVars()
    env_vars.additional_properties["SDK_PY_E2E_CTX"] = "true"
    repl = sandbox.create_context(CreateContextRequest(
        type_=ProcessType.REPL, repl=CreateREPLContextRequest(alias="python"),
        pty_size=PTYSize(rows=24, cols=80), env_vars=env_vars, idle_timeout_sec=60, ttl_sec=120))
    assert repl.id and repl.running and repl.alias == "python"
    assert any(c.id == repl.id for c in sandbox.list_contexts())
    assert sandbox.get_context(repl.id).id == repl.id
    assert sandbox.context_input(repl.id, "print('hi')\n").data.written is True
    exec_out = sandbox.context_exec(repl.id, "import os; print(os.environ['SDK_PY_E2E_CTX'])\n")
    assert "true\r\n" in exec_out.output_raw
    assert sandbox.context_resize(repl.id, 40, 100).data.resized is True
    assert sandbox.context_signal(repl.id, "SIGINT").data.signaled is True
    restarted = sandbox.restart_context(repl.id)
    assert restarted.id == repl.id and restarted.running
    assert "after-restart" in sandbox.run("python", "print('after-' + 'restart')",
                                          RunOptions(context_id=repl.id)).output_raw
    sandbox.connect_ws_context(repl.id).close()

    # test_sandbox_run.py passes plain dicts here, which this SDK version cannot serialise; models do.
    custom = sandbox.create_context(CreateContextRequest(
        type_=ProcessType.REPL, repl=CreateREPLContextRequest(alias="python"), cwd="/tmp",
        env_vars=env_vars, ttl_sec=120, idle_timeout_sec=60, pty_size=PTYSize(rows=24, cols=80)))
    assert "/tmp\r\n" in sandbox.run("python", "import os; print(os.getcwd())\n",
                                     RunOptions(context_id=custom.id)).output_raw

    cmd = sandbox.create_context(CreateContextRequest(
        type_=ProcessType.CMD, cmd=CreateCMDContextRequest(command=["/bin/sh", "-lc", "echo sdk-py-e2e"]),
        wait_until_done=True))
    assert (cmd.output_raw, cmd.exit_code, cmd.state) == ("sdk-py-e2e\n", 0, "stopped")
    for context_id in (repl.id, custom.id, cmd.id):
        assert sandbox.delete_context(context_id).data.deleted is True
    assert sandbox.list_contexts() == []


def test_context_errors_use_the_reference_codes(http, sandbox_id):
    base = f"/api/v1/sandboxes/{sandbox_id}/contexts"
    err(http.get(f"{base}/ctx-missing"), 404, "context_not_found")
    err(http.post(base, json={"type": "repl", "repl": {"alias": "cobol"}}), 400, "invalid_request")
    err(http.post(base, json={"type": "cmd", "cmd": {"command": []}}), 400, "invalid_request")
    err(http.post(base, json={"type": "cmd", "repl": {"alias": "python"}}), 400, "invalid_request")
    err(http.post(base, json={"type": "cmd", "cmd": {"command": ["true"]}, "ttl_sec": -1}), 400, "invalid_request")
    err(http.post(base, content=b"{not json"), 400, "invalid_request")
    err(http.post(base, json={"type": "cmd", "cmd": {"command": ["/no/such/binary"]}}), 500)

    done = ok(http.post(base, json={"type": "cmd", "cmd": {"command": ["true"]}, "wait_until_done": True}), 201)
    err(http.post(f"{base}/{done['id']}/input", json={"data": "x"}), 410, "process_finished")
    err(http.post(f"{base}/{done['id']}/exec", json={"data": "x"}), 410, "process_finished")
    err(http.post(f"{base}/{done['id']}/signal", json={"signal": "TERM"}), 409, "process_not_running")

    cat = ok(http.post(base, json={"type": "cmd", "cmd": {"command": ["cat"]}}), 201)
    err(http.post(f"{base}/{cat['id']}/resize", json={"rows": 10, "cols": 10}), 409, "pty_unavailable")
    err(http.post(f"{base}/{cat['id']}/resize", json={"rows": 0, "cols": 10}), 400, "invalid_request")
    err(http.post(f"{base}/{cat['id']}/signal", json={"signal": "NOPE"}), 400, "invalid_request")
    err(http.post(f"{base}/{cat['id']}/input", json={}), 400, "invalid_request")
    err(http.post(f"{base}/{cat['id']}/exec", json={"data": ""}), 400, "invalid_request")
    assert ok(http.post(f"{base}/{cat['id']}/input", json={"data": "echoed\n"}), 200) == {"written": True}
    assert ok(http.post(f"{base}/{cat['id']}/signal", json={"signal": "TERM"}), 200) == {"signaled": True}
    assert ok(http.delete(f"{base}/{cat['id']}"), 200) == {"deleted": True}
    err(http.delete(f"{base}/{cat['id']}"), 404, "context_not_found")
    err(http.get("/api/v1/sandboxes/sb-missing/contexts"), 404, "not_found")


def processes_with(marker: bytes) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            pass
    return found


def test_contexts_have_no_journal_and_end_with_the_runtime(http, sandbox_id):
    """A context is not a session: it is not listed with them, and a pause/resume ends it."""
    base = f"/api/v1/sandboxes/{sandbox_id}"
    marker = f"{600 + os.getpid() % 1000}.{uuid.uuid4().int % 10**6}"  # a sleep only this test runs
    ctx = ok(http.post(f"{base}/contexts", json={"type": "cmd", "cmd": {"command": ["sleep", marker]}}), 201)
    assert ok(http.get(f"{base}/sessions"), 200) == {"sessions": []}
    assert processes_with(marker.encode())
    ok(http.post(f"{base}/pause", json={}), 200)
    wait_for(lambda: not processes_with(marker.encode()), timeout=10, describe="the context process ended")
    ok(http.post(f"{base}/resume", json={}), 200)
    err(http.get(f"{base}/contexts/{ctx['id']}"), 404, "context_not_found")
    assert ok(http.get(f"{base}/contexts"), 200) == {"contexts": []}


def test_a_context_past_its_ttl_is_ended_and_forgotten(http, sandbox_id):
    base = f"/api/v1/sandboxes/{sandbox_id}/contexts"
    ctx = ok(http.post(base, json={"type": "cmd", "cmd": {"command": ["sleep", "600"]}, "ttl_sec": 1}), 201)
    idle = ok(http.post(base, json={"type": "cmd", "cmd": {"command": ["sleep", "600"]}, "idle_timeout_sec": 1}),
              201)
    kept = ok(http.post(base, json={"type": "cmd", "cmd": {"command": ["sleep", "600"]}}), 201)
    wait_for(lambda: http.get(f"{base}/{ctx['id']}").status_code == 404
             and http.get(f"{base}/{idle['id']}").status_code == 404, timeout=10,
             describe="contexts past ttl_sec / idle_timeout_sec deleted")
    assert ok(http.get(f"{base}/{kept['id']}"), 200)["running"] is True
    ok(http.delete(f"{base}/{kept['id']}"), 200)


def test_the_context_websocket_answers_a_repl_request_at_its_prompt(server, sandbox):
    """ContextWebSocketInput with a request_id gets ContextWebSocketDone {request_id} at the next prompt."""
    import json

    from websockets.sync.client import connect

    sandbox.run("python", "pass")  # the cached REPL is ready
    context_id = sandbox.list_contexts()[0].id
    url = server.url.replace("http://", "ws://") + f"/api/v1/sandboxes/{sandbox.id}/contexts/{context_id}/ws"
    with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}, open_timeout=10) as ws:
        ws.send(json.dumps({"type": "input", "data": "print(6 * 7)\n", "request_id": "req-1"}))
        seen = []
        while not seen or seen[-1].get("type") != "done":
            seen.append(json.loads(ws.recv(timeout=10)))
    assert seen[-1] == {"type": "done", "request_id": "req-1"}
    assert "42\r\n" in "".join(m.get("data", "") for m in seen if m["type"] == "output")
    assert all(m.get("source") in (None, "pty") for m in seen)
