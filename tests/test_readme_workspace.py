"""The README's "Contexts and workspace files" blocks run verbatim against a real server."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.test_readme import block_after, clean_env, localized, readme_server, sandboxes_left  # noqa: F401

HEADING = "## Contexts and workspace files"


def test_the_readme_context_and_file_sdk_example_runs(readme_server):  # noqa: F811
    code = localized(block_after(HEADING, "python"), readme_server)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=clean_env(readme_server))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "Hello, Sandbox0!" in [line.strip() for line in lines]
    assert "out err 3 crashed" in lines
    assert lines[-1] == "b'the task' ['task.txt']"
    assert sandboxes_left(readme_server) == []


def test_the_readme_run_and_cp_walkthrough_runs(readme_server, tmp_path):  # noqa: F811
    script = localized(block_after(HEADING, "sh"), readme_server)
    bin_dir = str(Path(sys.executable).parent)
    env = {**clean_env(readme_server), "SESSIOND_URL": readme_server.url,
           "PATH": bin_dir + os.pathsep + os.environ["PATH"]}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == ["hello from a context", "THE TASK"]
    assert sandboxes_left(readme_server) == []
