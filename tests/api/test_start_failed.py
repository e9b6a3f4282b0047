"""A command or cwd that does not exist in the sandbox is a failed start, as the contract says:
201 with phase ``failed`` (restart ``never``) or ``backoff`` then ``failed`` (``on_failure``),
every attempt ``reason: start_failed`` without an exit code, no output, and a message that
names the command or the cwd (never the launcher's). Through the official Python and
TypeScript SDKs, on the hardened runtime, where the check runs inside the sandbox.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import sandbox0
from sandbox0.apispec.models.execution_session_desired_state import ExecutionSessionDesiredState
from sandbox0.apispec.models.execution_session_io_mode import ExecutionSessionIOMode
from sandbox0.apispec.models.execution_session_io_spec import ExecutionSessionIOSpec
from sandbox0.apispec.models.execution_session_lifecycle_spec import ExecutionSessionLifecycleSpec
from sandbox0.apispec.models.execution_session_restart_policy import ExecutionSessionRestartPolicy
from sandbox0.apispec.models.execution_session_restart_spec import ExecutionSessionRestartSpec
from sandbox0.apispec.models.execution_session_spec import ExecutionSessionSpec
from sandbox0.apispec.types import Unset
from sandbox0.sandbox_sessions import SessionEventOptions

from tests.api.test_sdk_js import installed_sdk
from tests.helpers import TOKEN
from tests.serverproc import ServerProcess

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

MISSING_COMMAND = "no-such-command-here"
MISSING_CWD = "/workspace/no/such/dir"
LAUNCHER_WORDS = ("/usr/bin/env", "bwrap:", "env:", "No such file or directory")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("start-failed"), token=TOKEN, runtime="bwrap") as srv:
        yield srv


@pytest.fixture
def sandbox(server):
    client = sandbox0.Client(token=TOKEN, base_url=server.url)
    sb = client.sandboxes.claim("default")
    yield sb
    client.sandboxes.delete(sb.id)


def on_failure() -> ExecutionSessionLifecycleSpec:
    return ExecutionSessionLifecycleSpec(restart=ExecutionSessionRestartSpec(
        policy=ExecutionSessionRestartPolicy.ON_FAILURE, max_restarts=2, window_seconds=60,
        initial_backoff_ms=50, max_backoff_ms=100))


def wait_phase(sb, session_id: str, phase: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        session = sb.get_session(session_id)
        if str(session.phase.value) == phase or time.monotonic() > deadline:
            return session
        time.sleep(0.05)


def exits_and_outputs(sb, session_id: str, count: int = 1, timeout: float = 10.0):
    """Once ``count`` exits are in the journal (a page shows committed events only, and the
    session's phase may be read a moment before its exit is committed)."""
    deadline = time.monotonic() + timeout
    while True:
        events = sb.list_session_events(session_id, SessionEventOptions(after=0)).events
        exits = [(e.reason, e.exit_code) for e in events if e.type_ == "attempt.exited"]
        if len(exits) >= count or time.monotonic() > deadline:
            return exits, [e for e in events if e.type_ == "output"]
        time.sleep(0.05)


SPECS = {
    "missing command": dict(command=[MISSING_COMMAND]),
    "missing cwd": dict(command=["true"], cwd=MISSING_CWD),
    "missing command on a terminal": dict(command=[MISSING_COMMAND], io=ExecutionSessionIOSpec(mode=ExecutionSessionIOMode.PTY)),
    "a relative command that is not there": dict(command=["./not-here"]),
}


@pytest.mark.parametrize("case", sorted(SPECS))
def test_a_start_that_cannot_happen_rests_in_failed_with_start_failed_and_no_exit_code(sandbox, case):
    created = sandbox.create_session(ExecutionSessionSpec(**SPECS[case]))
    assert created.phase.value == "failed"
    assert created.attempt.reason == "start_failed" and isinstance(created.attempt.exit_code, Unset)
    assert isinstance(created.attempt.started_at, Unset)  # no process ever ran the command
    exits, outputs = exits_and_outputs(sandbox, created.id)
    assert [reason for reason, _ in exits] == ["start_failed"]
    assert all(isinstance(code, Unset) for _, code in exits)
    assert outputs == []  # the launcher's words are not the session's output


def test_with_on_failure_a_missing_command_backs_off_then_fails_without_a_crash_loop(sandbox):
    created = sandbox.create_session(ExecutionSessionSpec(command=[MISSING_COMMAND], lifecycle=on_failure()))
    assert created.phase.value == "backoff" and created.attempt.reason == "start_failed"
    session = wait_phase(sandbox, created.id, "failed")
    assert session.phase.value == "failed" and session.restart_count == 2
    assert session.attempt.number == 3 and session.attempt.reason == "start_failed"
    exits, outputs = exits_and_outputs(sandbox, created.id, count=3)
    assert [r for r, _ in exits] == ["start_failed"] * 3 and all(isinstance(c, Unset) for _, c in exits)
    assert outputs == []
    time.sleep(0.5)  # nothing more is started once it failed
    assert sandbox.get_session(created.id).attempt.number == 3


def test_with_on_failure_a_missing_cwd_backs_off_then_fails(sandbox):
    created = sandbox.create_session(ExecutionSessionSpec(command=["true"], cwd=MISSING_CWD, lifecycle=on_failure()))
    assert created.phase.value == "backoff"
    session = wait_phase(sandbox, created.id, "failed")
    assert (session.phase.value, session.attempt.number, session.attempt.reason) == ("failed", 3, "start_failed")


def error_message(error: sandbox0.APIError) -> str:
    """The envelope's message: the SDK declares no 500 here, so it keeps the raw body."""
    return json.loads(error.message.split("Unexpected API response: ", 1)[1])["error"]["message"]


def test_the_failure_names_the_command_or_the_cwd_and_never_the_launcher(server, sandbox):
    missing = sandbox.create_session(ExecutionSessionSpec(command=[MISSING_COMMAND]))
    with pytest.raises(sandbox0.APIError) as command_error:  # a start asked for later is a 500
        sandbox.set_session_desired_state(missing.id, ExecutionSessionDesiredState.RUNNING)
    assert command_error.value.status_code == 500
    assert error_message(command_error.value) == f'exec: "{MISSING_COMMAND}": executable file not found in $PATH'
    nowhere = sandbox.create_session(ExecutionSessionSpec(command=["true"], cwd=MISSING_CWD))
    with pytest.raises(sandbox0.APIError) as cwd_error:
        sandbox.create_session_attempt(nowhere.id)
    assert error_message(cwd_error.value) == f"chdir {MISSING_CWD}: no such file or directory"
    log = server.log_path.read_text()
    assert f'exec: "{MISSING_COMMAND}": executable file not found' in log
    assert not any(word in log for word in LAUNCHER_WORDS), log[-2000:]


def test_a_command_that_exists_still_starts_runs_and_exits_with_its_code(sandbox):
    created = sandbox.create_session(ExecutionSessionSpec(command=["sh", "-c", "echo hi; exit 3"], cwd="/tmp"))
    session = wait_phase(sandbox, created.id, "exited")
    assert session.attempt.exit_code == 3 and session.attempt.reason == "crashed"
    exits, outputs = exits_and_outputs(sandbox, created.id)
    assert exits == [("crashed", 3)] and outputs


def test_the_typescript_sdk_sees_the_same_phases_and_attempts(server):
    assert shutil.which("node") and shutil.which("npm"), "node and npm are needed for the TypeScript SDK"
    env = dict(os.environ, SANDBOX0_TOKEN=TOKEN, SANDBOX0_BASE_URL=server.url, SANDBOX0_JS_ENTRY=str(installed_sdk()))
    script = Path(__file__).parent / "sdk_js" / "start_failed.mjs"
    run = subprocess.run(["node", str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    results = {r["name"]: r for r in map(json.loads, run.stdout.splitlines())}
    for name in ("missing command, never", "missing cwd, never"):
        r = results[name]
        assert (r["created_phase"], r["phase"]) == ("failed", "failed"), r
        assert r["attempt"] == {"number": 1, "reason": "start_failed", "exit_code": None}, r
        assert r["exits"] == [{"reason": "start_failed", "exit_code": None}] and r["outputs"] == 0, r
    for name in ("missing command, on_failure", "missing cwd, on_failure"):
        r = results[name]
        assert (r["created_phase"], r["phase"]) == ("backoff", "failed"), r
        assert r["attempt"] == {"number": 3, "reason": "start_failed", "exit_code": None}, r
        assert r["exits"] == [{"reason": "start_failed", "exit_code": None}] * 3 and r["outputs"] == 0, r
