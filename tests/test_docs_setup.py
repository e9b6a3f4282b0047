"""The README's set-up command runs as printed (as root where apt-get reaches Debian's mirror):
it refreshes the package lists, installs the runtime's packages, the venv and the package, and
starts the server, which answers on port 8780 with its data dir under HOME."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import httpx
import pytest

from tests.docs_blocks import ROOT, SETUP_PORT, block, docs_env
from tests.serverproc import forget_host_network, forget_sandbox_cgroups

START_S = 600  # apt-get update and pip on a cold cache


@pytest.mark.slow
@pytest.mark.timeout(START_S + 60)
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("apt-get") is None,
                    reason="the set-up installs Debian packages: root and apt-get")
def test_the_set_up_command_installs_and_starts_the_server(tmp_path):
    setup = block("setup")
    assert setup.text.startswith("apt-get update && apt-get install -y bubblewrap")
    log = open(tmp_path / "setup.log", "wb")
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", setup.text], cwd=ROOT, env=docs_env(tmp_path),
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    data_dir = tmp_path / ".local" / "share" / "sessiond"
    try:
        deadline = time.monotonic() + START_S
        while True:
            assert proc.poll() is None, (tmp_path / "setup.log").read_text(errors="replace")[-4000:]
            try:
                if httpx.get(f"http://127.0.0.1:{SETUP_PORT}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "setup.log").read_text(errors="replace")[-4000:]
            time.sleep(0.5)
        assert (data_dir / "token").stat().st_mode & 0o777 == 0o600
        printed = (tmp_path / "setup.log").read_text(errors="replace")
        assert f"sessiond listening on http://127.0.0.1:{SETUP_PORT} data={data_dir}" in printed
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        log.close()
        forget_host_network(data_dir)
        forget_sandbox_cgroups(data_dir)
