"""docs/snapshots-and-forks.md's ``sessionctl`` block runs as printed against a server with disks:
the restored sandbox prints the snapshot's file, the fork the file as it was at the fork."""
from __future__ import annotations

import subprocess

from tests.client.test_cli import cli_env
from tests.docs_blocks import ROOT, block
from tests.helpers import ok
from tests.snapshots.conftest import needs_disks

pytestmark = needs_disks


def test_the_docs_snapshot_restore_and_fork_block_runs_as_printed(snap_server, snap_http):
    before = {s["id"] for s in ok(snap_http.get("/api/v1/sandboxes"), 200)["sandboxes"]}
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", block("snapshots-cli").text], cwd=ROOT,
                         env=cli_env(snap_server), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[:2] == ["restored: v1", "fork: v2"], run.stdout
    assert len(lines) == 3 and lines[2].startswith("rootfs-snapshot-") and lines[2].endswith("v1"), run.stdout
    after = {s["id"] for s in ok(snap_http.get("/api/v1/sandboxes"), 200)["sandboxes"]}
    assert after == before  # the block deletes what it made
