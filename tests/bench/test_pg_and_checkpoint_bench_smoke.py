"""The issue 15 measurement scripts (PostgreSQL store layout, workspace checkpoints) still run
end to end on tiny sizes; no timing is asserted."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.pgcluster import find_bin_dir

ROOT = Path(__file__).resolve().parents[2]


def run_module(*argv: str) -> str:
    done = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.timeout(300)
def test_the_workspace_checkpoint_benchmark_runs_and_reports_save_and_restore():
    out = run_module("tests.bench.bench_workspace_checkpoint", "--mib", "2", "--rounds", "1")
    assert "save" in out and "restore" in out and "archive size (ours)" in out


@pytest.mark.timeout(300)
@pytest.mark.skipif(find_bin_dir() is None, reason="PostgreSQL server binaries not found (.ci/run installs postgresql)")
def test_the_pg_store_benchmark_runs_its_table_and_group_commit_parts():
    out = run_module("tests.bench.bench_pg_store", "--quick", "--only", "group,tables")
    assert "insert_batch, one txn" in out and "create pair" in out
