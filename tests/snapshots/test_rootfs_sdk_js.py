"""The TypeScript SDK (``sandbox0@0.9.5``, unmodified) snapshots, restores, forks, claims from a
snapshot and makes a template from a sandbox, on a Debian image with a dpkg package installed."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


from session_supervisor.infra.images import ImageStore, store_root
from tests.api.test_sdk_js import installed_sdk
from tests.helpers import TOKEN
from tests.images.fixtures import debian_image
from tests.serverproc import ServerProcess
from tests.snapshots.conftest import needs_disks

SCRIPT = Path(__file__).parent / "sdk_js" / "rootfs.mjs"


@needs_disks
def test_the_typescript_sdk_restores_forks_and_claims_from_a_snapshot_and_a_template(tmp_path):
    assert shutil.which("node") and shutil.which("npm"), "node and npm are needed for the TypeScript SDK"
    entry = installed_sdk()
    data = tmp_path / "data"
    image = ImageStore(store_root(data)).import_archive(debian_image(), "trixie")
    with ServerProcess(data, token=TOKEN, runtime="bwrap", extra_args=["--disk-quota", "on"]) as srv:
        env = dict(os.environ, SANDBOX0_TOKEN=TOKEN, SANDBOX0_BASE_URL=srv.url, SANDBOX0_JS_ENTRY=str(entry),
                   IMAGE_REFERENCE=image.reference)
        run = subprocess.run(["node", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "changed: v2 2.0",
        "restored: v1 1.0",
        "fork child: v1 1.0",
        "fork parent: v3 3.0",
        "claim from snapshot: v1 1.0",
        "claim of the template: v3 3.0",
        "rootfs ok",
    ], run.stdout + run.stderr
