"""The README's ``sessionctl run`` block and its ``sessions.toml`` block, run as printed."""
from __future__ import annotations

import json
import re
import subprocess

from session_supervisor.client import Client
from tests.client.test_cli import ROOT, cli_env
from tests.helpers import TOKEN


def block(marker: str, lang: str) -> str:
    after = (ROOT / "README.md").read_text().split(f"<!-- {marker} -->", 1)[1]
    return re.search(rf"```{lang}\n(.*?)```", after, re.S).group(1)


def test_the_readme_run_block_runs_verbatim_and_leaves_no_sandbox(server):
    with Client(server.url, TOKEN) as client:
        before = {b.id for b in client.list_sandboxes(limit=200)}
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block("sessionctl-run", "sh")], cwd=ROOT,
                              env=cli_env(server), capture_output=True, text=True, timeout=120)
        assert (done.returncode, done.stdout, done.stderr) == (0, "42\n", ""), done
        assert {b.id for b in client.list_sandboxes(limit=200)} == before


def test_the_readme_sessions_toml_applies_then_reports_no_changes(server, tmp_path):
    (tmp_path / "sessions.toml").write_text(block("sessionctl-apply", "toml"))
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
