"""docs/cli.md's ``sessions.toml`` blocks, applied as printed: a second apply changes nothing."""
from __future__ import annotations

import json
import subprocess

import pytest

from session_supervisor.client import Client
from tests.client.test_cli import cli_env
from tests.docs_blocks import block
from tests.helpers import TOKEN


@pytest.mark.parametrize("name", ["sessions-toml", "sessions-toml-full"])
def test_the_docs_sessions_toml_applies_then_reports_no_changes(server, tmp_path, name):
    (tmp_path / "sessions.toml").write_text(block(name).text)
    apply = ["bash", "-c", "sessionctl apply -f sessions.toml"]
    first = subprocess.run(apply, cwd=tmp_path, env=cli_env(server), capture_output=True, text=True, timeout=60)
    assert first.returncode == 0 and "applied: 2 created" in first.stdout, first
    state = json.loads((tmp_path / "sessions.toml.state.json").read_text())["servers"][server.url]["sandboxes"]
    try:
        again = subprocess.run(apply, cwd=tmp_path, env=cli_env(server), capture_output=True, text=True, timeout=60)
        assert again.returncode == 0 and "applied: no changes" in again.stdout, again
        with Client(server.url, TOKEN) as client:
            session = client.get_session(state["web"]["id"], state["web"]["sessions"]["server"]["id"])
            assert session.spec["command"] == ["python3", "-m", "http.server", "8080"] and session.name == "server"
    finally:
        with Client(server.url, TOKEN) as client:
            client.delete_sandbox(state["web"]["id"])
