"""``sessionctl`` with a team's API key in ``SESSIOND_TOKEN``: docs/cli.md's walkthrough runs as printed,
a viewer key exits 6 (forbidden) on input, and another team's key exits 3 (not found)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.helpers import TOKEN, ok

from tests.docs_blocks import block

from .test_cli import ROOT, cli_env, sessionctl

WALKTHROUGH_TIMEOUT_S = 120


def make_key(server, team: str, role: str) -> str:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}", "X-Team-ID": team}) as http:
        return ok(http.post("/api-keys", json={"name": f"cli-{role}", "roles": [role]}), 201)["key"]


@pytest.fixture
def teams(server):
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        return [ok(http.post("/teams", json={"name": name, "home_region_id": "local"}), 201)["id"]
                for name in ("cli-alpha", "cli-beta")]


@pytest.mark.skipif(shutil.which("sessionctl", path=str(Path(sys.executable).parent)) is None,
                    reason="sessionctl is not installed (pip install -e .)")
def test_the_docs_walkthrough_runs_as_printed_with_a_team_developer_key(server, teams):
    env = {**cli_env(server), "SESSIOND_TOKEN": make_key(server, teams[0], "developer")}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block("sessionctl-walkthrough").text],
                          capture_output=True, text=True,
                          timeout=WALKTHROUGH_TIMEOUT_S, env=env, cwd=ROOT)
    assert done.returncode == 0, f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    assert "typed by the walkthrough" in done.stdout and "sandbox terminated successfully" in done.stdout


def test_a_viewer_key_is_forbidden_to_write_and_another_team_finds_nothing(server, teams):
    developer = {"SESSIOND_TOKEN": make_key(server, teams[0], "developer")}
    viewer = {"SESSIOND_TOKEN": make_key(server, teams[0], "viewer")}
    outsider = {"SESSIOND_TOKEN": make_key(server, teams[1], "developer")}
    sandbox = sessionctl(server, "sandbox", "claim", "default", "-q", env=developer).stdout.strip()
    try:
        sid = sessionctl(server, "session", "create", sandbox, "-q", "--", "/bin/cat", env=developer).stdout.strip()
        assert sid.startswith("ses-")
        listed = sessionctl(server, "sandbox", "list", "-q", env=viewer)
        assert listed.returncode == 0 and sandbox in listed.stdout.split()
        assert sessionctl(server, "session", "get", sandbox, sid, env=viewer).returncode == 0
        refused = sessionctl(server, "session", "input", sandbox, sid, "--data", "x\n", env=viewer)
        assert refused.returncode == 6 and "insufficient permissions" in refused.stderr, refused.stderr
        missing = sessionctl(server, "sandbox", "get", sandbox, env=outsider)
        assert missing.returncode == 3, missing.stderr
        assert sandbox not in sessionctl(server, "sandbox", "list", "-q", env=outsider).stdout.split()
    finally:
        sessionctl(server, "sandbox", "delete", sandbox, env=developer)
