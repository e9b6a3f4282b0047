"""The README's "Contexts and workspace files" blocks run verbatim against a real server."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.test_readme import DEFAULT_URL, block_after, open_server  # noqa: F401  (the fixture)

HEADING = "## Contexts and workspace files"


def test_the_readme_context_and_file_sdk_example_runs(open_server):  # noqa: F811
    code = block_after(HEADING, "python").replace(DEFAULT_URL, open_server.url)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "Hello, Sandbox0!" in [line.strip() for line in lines]
    assert "out err 3 crashed" in lines
    assert lines[-1] == "b'the task' ['task.txt']"


def test_the_readme_run_and_cp_walkthrough_runs(open_server, tmp_path):  # noqa: F811
    script = block_after(HEADING, "sh")
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "SESSIOND_URL": open_server.url, "PATH": bin_dir + os.pathsep + os.environ["PATH"]}
    env.pop("SESSIOND_TOKEN", None)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == ["hello from a context", "THE TASK"]
