"""``sessiond serve`` checks the hardened runtime at start and says what is missing."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.serverproc import REPO_ROOT, free_port


def serve(tmp_path, path: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path}
    argv = [sys.executable, "-m", "api", "serve", "--runtime", "bwrap", "--port", str(free_port()),
            "--data-dir", str(tmp_path / "data")]
    return subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, timeout=60, check=False)


def test_serve_refuses_a_host_without_the_launch_tools_and_names_them(tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("bwrap", "env", "true", "bash"):  # no util-linux: setpriv, unshare, mount are missing
        os.symlink(shutil.which(name), tools / name)
    done = serve(tmp_path, str(tools))
    assert done.returncode != 0
    message = done.stderr.decode()
    assert "hardened bwrap runtime unavailable" in message, message
    for missing in ("setpriv is not on PATH", "unshare is not on PATH", "mount is not on PATH"):
        assert missing in message, message
    assert "--runtime host" in message and "Traceback" not in message, message


def test_the_check_passes_here_and_starts_one_trial_sandbox(tmp_path):
    from infra.runtime import detect_runtime

    runtime = detect_runtime("bwrap", work_dir=str(tmp_path))
    assert runtime.hardening is not None
    assert os.path.getsize(runtime.hardening.seccomp_program) > 0
    assert not any(p.name.startswith("check-") for p in tmp_path.iterdir())  # the trial cleaned up


def test_the_pids_cap_is_configurable(tmp_path):
    from infra.runtime import detect_runtime

    runtime = detect_runtime("bwrap", work_dir=str(tmp_path / "rt"), pids_max=64)
    workspace = tmp_path / "sandboxes" / "sb-pids" / "workspace"
    workspace.mkdir(parents=True)
    bound = runtime.isolate("sb-pids", str(workspace), {})
    try:
        if bound.isolation.cgroup is None or "pids" not in bound.isolation.cgroup.dirs:
            import pytest
            pytest.skip("no pids cgroup controller here")
        with open(os.path.join(bound.isolation.cgroup.dirs["pids"], "pids.max")) as f:
            assert f.read().strip() == "64"
    finally:
        bound.release()
