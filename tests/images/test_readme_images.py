"""docs/images-and-disks.md's blocks, run as printed against the set-up's server: importing an
image, creating a template, claiming it ("images-walkthrough", with IMAGE the tests' Debian trixie
archive), and building ``coding-agent`` ("coding-agent-build", from the tests' build cache)."""
from __future__ import annotations

import pytest

from session_supervisor.client import Client
from tests.docs_blocks import SetUpServer, block, docs_env, run_block

from .fixtures import CACHE, debian_image


@pytest.fixture(scope="module")
def setup_server(tmp_path_factory):
    server = SetUpServer(tmp_path_factory.mktemp("home"))
    server.start()
    yield server
    server.stop()


def no_sandbox_left(server) -> bool:
    with Client(server.url, server.token) as client:
        return client.list_sandboxes(limit=200) == []


def test_the_docs_image_import_template_and_claim_walkthrough_runs(setup_server):
    done = run_block(block("images-walkthrough"), docs_env(setup_server.home, IMAGE=str(debian_image())), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "trixie@sha256:" in out and '"template_id":"trixie"' in out
    assert "VERSION_CODENAME=trixie\nPython 3.13." in out
    assert '"message":"template deleted"' in out
    assert no_sandbox_left(setup_server)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_docs_coding_agent_build_runs(setup_server):
    env = docs_env(setup_server.home, SESSIOND_BUILD_CACHE=str(CACHE / "coding-agent-build"))
    done = run_block(block("coding-agent-build"), env, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "codex-cli" in done.stdout or any(ch.isdigit() for ch in done.stdout)
    assert no_sandbox_left(setup_server)
