"""docs/operating.md's two-node walkthrough ("cluster-walkthrough") runs as printed: ``DB`` is a
private PostgreSQL cluster's database, ``CP`` a shared directory, ``HOME`` the test's own directory."""
from __future__ import annotations

from tests.docs_blocks import block, docs_env, run_block
from tests.serverproc import forget_host_network, kill_servers_over


def test_the_docs_two_node_walkthrough_runs_as_written(tmp_path, pg_url):
    shared = tmp_path / "checkpoints"
    shared.mkdir()
    env = docs_env(tmp_path, DB=pg_url, CP=str(shared))
    try:
        run = run_block(block("cluster-walkthrough"), env, timeout=120)
    finally:
        for n in (1, 2):
            kill_servers_over(tmp_path / f"sessiond-node{n}")  # still running when the script timed out
            forget_host_network(tmp_path / f"sessiond-node{n}")
    logs = "".join((tmp_path / f"sessiond-node{n}.log").read_text(errors="replace") for n in (1, 2)
                   if (tmp_path / f"sessiond-node{n}.log").exists())
    assert run.returncode == 0, run.stdout + run.stderr + logs
    assert "echo seen through node 2" in run.stdout, run.stdout
    assert '"resumed":true' in run.stdout, run.stdout
