"""The README's two-node walkthrough ("More than one machine") runs verbatim: ``DB`` is a private
PostgreSQL cluster's database, ``CP`` a shared directory, ``HOME`` the test's own directory."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.serverproc import forget_host_network, kill_servers_over

README = Path(__file__).resolve().parent.parent / "README.md"


def walkthrough() -> str:
    text = README.read_text()
    return re.search(r"<!-- cluster-walkthrough -->\n```sh\n(.*?)```", text, re.S).group(1)


def test_the_readme_two_node_walkthrough_runs_as_written(tmp_path, pg_url):
    shared = tmp_path / "checkpoints"
    shared.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIOND_")}
    env.update(DB=pg_url, CP=str(shared), HOME=str(tmp_path),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    script = "set -e\ntrap 'kill %1 %2 2>/dev/null || true' EXIT\n" + walkthrough()
    try:
        run = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    finally:
        for n in (1, 2):
            kill_servers_over(tmp_path / f"sessiond-node{n}")  # still running when the script timed out
            forget_host_network(tmp_path / f"sessiond-node{n}")
    logs = "".join((tmp_path / f"sessiond-node{n}.log").read_text(errors="replace") for n in (1, 2)
                   if (tmp_path / f"sessiond-node{n}.log").exists())
    assert run.returncode == 0, run.stdout + run.stderr + logs
    assert "echo seen through node 2" in run.stdout, run.stdout
    assert '"resumed":true' in run.stdout, run.stdout
