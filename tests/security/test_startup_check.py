"""``sessiond serve`` checks the hardened runtime at start and says what is missing; the
runtime's per-sandbox knobs (pids cap, network namespace) reach the sandbox."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from session_supervisor.domain.ports import ExitStatus
from session_supervisor.infra.bubblewrap import detect_launcher
from tests.serverproc import REPO_ROOT, free_port


def serve(tmp_path, path: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path}
    argv = [sys.executable, "-m", "session_supervisor.api", "serve", "--runtime", "bwrap", "--port", str(free_port()),
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
    runtime = detect_launcher("bwrap", work_dir=str(tmp_path))
    assert runtime.hardening is not None
    assert os.path.getsize(runtime.hardening.seccomp_program) > 0
    assert not any(p.name.startswith("check-") for p in tmp_path.iterdir())  # the trial cleaned up


def test_the_pids_cap_is_configurable(tmp_path):
    runtime = detect_launcher("bwrap", work_dir=str(tmp_path / "rt"), pids_max=64)
    workspace = tmp_path / "sandboxes" / "sb-pids" / "workspace"
    workspace.mkdir(parents=True)
    bound = runtime.isolate("sb-pids", str(workspace), {})
    try:
        if bound.confinement.cgroup is None or "pids" not in bound.confinement.cgroup.dirs:
            pytest.skip("no pids cgroup controller here")
        with open(os.path.join(bound.confinement.cgroup.dirs["pids"], "pids.max")) as f:
            assert f.read().strip() == "64"
    finally:
        bound.release()


def test_a_sandbox_joins_the_network_namespace_its_owner_names(tmp_path):
    name = f"sessiond-t11-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode != 0:
        pytest.skip("cannot create a network namespace here")
    try:
        runtime = detect_launcher("bwrap", work_dir=str(tmp_path / "rt"))
        runtime.netns_for = lambda sandbox_id: f"/run/netns/{name}"
        workspace = tmp_path / "sandboxes" / "sb-net" / "workspace"
        workspace.mkdir(parents=True)
        bound = runtime.isolate("sb-net", str(workspace), {})
        launch = bound.launch(str(workspace), ["readlink", "/proc/self/ns/net"], "", {"PATH": "/usr/bin:/bin"},
                              None, attempt_id="a1")
        try:
            inside = subprocess.run(launch.argv, cwd=launch.cwd, env=launch.env, capture_output=True, timeout=30)
        finally:
            bound.translate_exit(ExitStatus(0), "a1")
            bound.release()
        wanted = f"net:[{os.stat(f'/run/netns/{name}').st_ino}]"
        assert inside.stdout.decode().strip() == wanted, inside
        assert wanted != os.readlink("/proc/self/ns/net")
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)
