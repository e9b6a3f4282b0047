"""The README's "Sandbox images and templates" blocks, run verbatim (address and data dir replaced)
against a hardened server: importing an image, creating a template, claiming it, and building
``coding-agent`` (from the tests' build cache)."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
import subprocess

import pytest

from tests.serverproc import ServerProcess
from tests.test_readme import block_after, blocks_after, clean_env, localized

from .fixtures import CACHE, debian_image

HEADING = "## Sandbox images and templates"


@pytest.fixture(scope="module")
def readme_bwrap_server(tmp_path_factory):
    server = ServerProcess(tmp_path_factory.mktemp("readme-images"), token=None, runtime="bwrap")
    server.start()
    yield server
    server.stop()


def run_block(script: str, server, cwd: Path, extra_env: dict | None = None, timeout: float = 300):
    bin_dir = str(Path(sys.executable).parent)
    env = {**clean_env(server), "SESSIOND_URL": server.url, "PATH": bin_dir + os.pathsep + os.environ["PATH"],
           **(extra_env or {})}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", localized(script, server)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd, env=env)


def test_the_readme_image_import_template_and_claim_walkthrough_runs(readme_bwrap_server, tmp_path):
    shutil.copy(debian_image(), tmp_path / "debian-trixie.oci.tar")
    done = run_block(block_after(HEADING, "sh"), readme_bwrap_server, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "trixie@sha256:" in out and '"template_id":"trixie"' in out
    assert "VERSION_CODENAME=trixie\nPython 3.13." in out
    assert '"message":"template deleted"' in out


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_readme_coding_agent_build_runs(readme_bwrap_server, tmp_path):
    done = run_block(blocks_after(HEADING, "sh")[1], readme_bwrap_server, tmp_path,
                     {"SESSIOND_BUILD_CACHE": str(CACHE / "coding-agent-build")}, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "codex-cli" in done.stdout or any(ch.isdigit() for ch in done.stdout)
