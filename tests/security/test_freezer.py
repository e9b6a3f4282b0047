"""The sandbox's freezer stops every process at once, even one that left the attempt's group."""
from __future__ import annotations

import subprocess
import time

import pytest

from session_supervisor.domain.ports import ExitStatus
from session_supervisor.infra.bubblewrap import detect_launcher
from tests.helpers import wait_for

# setsid: a new session and process group, out of reach of a SIGSTOP to the attempt's group.
TICKER = "setsid sh -c 'while :; do echo x >> /workspace/ticks; sleep 0.02; done' & sleep 60"


def test_freezing_a_sandbox_stops_a_process_outside_the_attempts_group(tmp_path):
    runtime = detect_launcher("bwrap", work_dir=str(tmp_path / "rt"))
    workspace = tmp_path / "sandboxes" / "sb-freeze" / "workspace"
    workspace.mkdir(parents=True)
    bound = runtime.isolate("sb-freeze", str(workspace), {})
    if bound.confinement.cgroup is None or "freezer" not in bound.confinement.cgroup.dirs:
        bound.release()
        pytest.skip("no freezer cgroup here")
    launch = bound.launch(str(workspace), ["sh", "-c", TICKER], "", {"PATH": "/usr/bin:/bin"}, None,
                          attempt_id="a1")
    proc = subprocess.Popen(launch.argv, cwd=launch.cwd, env=launch.env, start_new_session=True)
    ticks = workspace / "ticks"
    try:
        wait_for(lambda: ticks.exists() and ticks.stat().st_size > 20, timeout=20, describe="ticks")
        bound.freeze(True)
        time.sleep(0.2)  # a tick already in flight lands
        frozen_at = ticks.stat().st_size
        time.sleep(0.5)
        assert ticks.stat().st_size == frozen_at
        bound.freeze(False)
        wait_for(lambda: ticks.stat().st_size > frozen_at, timeout=20, describe="ticks after the thaw")
    finally:
        bound.freeze(False)
        proc.kill()
        proc.wait(10)
        bound.translate_exit(ExitStatus(-1, 9), "a1")
        bound.release()


def test_a_runtime_made_over_a_crashed_servers_frozen_sandbox_ends_the_leftovers_and_starts_thawed(tmp_path):
    """A server killed during a pause leaves its sandbox frozen; SIGKILL cannot end a frozen task.
    The next runtime of that sandbox must end them and must not start its own processes frozen."""
    runtime = detect_launcher("bwrap", work_dir=str(tmp_path / "rt"))
    workspace = tmp_path / "sandboxes" / "sb-crashed" / "workspace"
    workspace.mkdir(parents=True)
    crashed = runtime.isolate("sb-crashed", str(workspace), {})
    if crashed.confinement.cgroup is None or "freezer" not in crashed.confinement.cgroup.dirs:
        crashed.release()
        pytest.skip("no freezer cgroup here")
    launch = crashed.launch(str(workspace), ["sh", "-c", TICKER], "", {"PATH": "/usr/bin:/bin"}, None,
                            attempt_id="a1")
    leftover = subprocess.Popen(launch.argv, cwd=launch.cwd, env=launch.env, start_new_session=True)
    ticks = workspace / "ticks"
    try:
        wait_for(lambda: ticks.exists() and ticks.stat().st_size > 20, timeout=20, describe="ticks")
        crashed.freeze(True)  # ... and the server dies here: nothing thaws it
        members = crashed.confinement.cgroup.pids()
        assert members
        again = runtime.isolate("sb-crashed", str(workspace), {})  # the next start of the sandbox
        wait_for(lambda: not crashed.confinement.cgroup.pids(), timeout=20, describe="leftovers still there")
        leftover.wait(10)
        second = again.launch(str(workspace), ["sh", "-c", "echo fresh > /workspace/fresh"], "",
                              {"PATH": "/usr/bin:/bin"}, None, attempt_id="a2")
        fresh = subprocess.run(second.argv, cwd=second.cwd, env=second.env, timeout=20)
        assert fresh.returncode == 0 and (workspace / "fresh").read_text() == "fresh\n"
        again.translate_exit(ExitStatus(0), "a2")
        again.release()
    finally:
        crashed.freeze(False)
        leftover.kill()
        leftover.wait(10)
        crashed.release()
