"""``sessiond template build coding-agent``, then the four agent CLIs inside a coding-agent sandbox
on a host where none of them is installed, and the harness driver's codex resume flow in it.

Slow the first time (Debian packages, Node.js and four npm packages: several minutes); the build
cache in ``/var/cache/sessiond-tests/coding-agent-build`` makes later runs take seconds. Run by
``.ci/run`` like every other test.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from session_supervisor.client import Client
from session_supervisor.client.harness import HarnessDriver, harness_spec
from tests.conftest import make_http
from tests.helpers import TOKEN, claim_sandbox, run_to_exit
from tests.serverproc import ServerProcess

from .fixtures import CACHE, tools_missing

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # the first test waits for a cold build
CLIS = {"codex": ["codex", "--version"], "claude": ["claude", "--version"],
        "opencode": ["opencode", "--version"], "pi": ["pi", "--version"]}


def host_path_without_the_clis() -> str:
    """The host's PATH minus every directory holding one of the four CLIs: none can come from it."""
    dirs = [d for d in os.environ.get("PATH", "").split(":") if d]
    return ":".join(d for d in dirs if not any(os.path.exists(os.path.join(d, cli)) for cli in CLIS))


@pytest.fixture(scope="module")
def agent_server(tmp_path_factory):
    problem = tools_missing()
    if problem:
        pytest.skip(problem)
    data = tmp_path_factory.mktemp("coding-agent-data")
    build = subprocess.run([sys.executable, "-m", "session_supervisor.api", "template", "build", "coding-agent",
                            "--data-dir", str(data), "--cache-dir", str(CACHE / "coding-agent-build")],
                           capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, build.stderr[-3000:]
    assert build.stdout.strip().startswith("coding-agent@sha256:")
    assert "[" in build.stderr and "s]" in build.stderr  # visible progress, one line per step
    path = host_path_without_the_clis()
    assert all(shutil.which(cli, path=path) is None for cli in CLIS)
    proc = ServerProcess(data, token=TOKEN, runtime="bwrap", extra_env={"PATH": path})
    proc.start()
    proc.reference = build.stdout.strip()
    yield proc
    proc.stop()


def test_the_built_template_is_published_with_its_image_and_no_creation_status(agent_server):
    with make_http(agent_server.url) as http:
        template = http.get("/api/v1/templates/coding-agent").json()["data"]
    assert template["spec"]["mainContainer"]["image"] == agent_server.reference
    assert "status" not in template


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_each_agent_cli_runs_in_a_coding_agent_sandbox(agent_server, cli):
    with make_http(agent_server.url) as http:
        sandbox = claim_sandbox(http, "coding-agent")
        try:
            exited, out = run_to_exit(http, sandbox, CLIS[cli], timeout=90)
            assert exited["exit_code"] == 0, out
            assert any(ch.isdigit() for ch in out.decode()), out  # a version number
        finally:
            http.delete(f"/api/v1/sandboxes/{sandbox}")


def test_the_sandbox_has_the_reference_environment_and_node_22_19_or_newer(agent_server):
    with make_http(agent_server.url) as http:
        sandbox = claim_sandbox(http, "coding-agent")
        try:
            exited, out = run_to_exit(http, sandbox, ["sh", "-c", "pwd; echo $HOME $DISABLE_AUTOUPDATER "
                                      "$OPENCODE_DISABLE_AUTOUPDATE $PI_SKIP_VERSION_CHECK $PI_TELEMETRY; node -v"])
            lines = out.decode().split()
            assert lines[:6] == ["/workspace", "/workspace", "1", "1", "1", "0"], out
            major, minor = (int(x) for x in lines[6].lstrip("v").split(".")[:2])
            assert (major, minor) >= (22, 19)
        finally:
            http.delete(f"/api/v1/sandboxes/{sandbox}")


@pytest.mark.timeout(300)
def test_the_harness_driver_resumes_the_codex_thread_after_a_replaced_attempt(agent_server, tmp_path):
    """No model is reachable (block-all), so the turn never completes; the thread is persisted all
    the same (its first item, the user's message), which is what a resume needs."""
    client = Client(agent_server.url, token=TOKEN)
    sandbox = client.claim_sandbox("coding-agent", config={"network": {"mode": "block-all"}}).sandbox_id
    try:
        session = client.create_session(sandbox, harness_spec("codex"), idempotency_key="agent-1")
        with HarnessDriver(client, sandbox, session.id, "codex", state_path=tmp_path / "state.json") as driver:
            thread = driver.open_conversation()
            driver.call("turn/start", {"threadId": thread, "input": [{"type": "text", "text": "hi"}]}, timeout=60)
            # Persisted once its first item (the user's message) is: the turn itself keeps retrying.
            driver.wait_notification(lambda n: n.get("method") == "item/completed", timeout=60)
            first = driver.state.attempt_id
            client.create_attempt(sandbox, session.id, replace_current=True)
            read = driver.call("thread/read", {"threadId": thread}, timeout=60)
            assert read["thread"]["id"] == thread
            assert driver.recoveries == 1 and driver.state.attempt_id != first
    finally:
        client.delete_sandbox(sandbox)
        client.close()
