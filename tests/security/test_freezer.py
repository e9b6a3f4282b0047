"""The sandbox's freezer stops every process at once, even one that left the attempt's group."""
from __future__ import annotations

import subprocess
import time

import pytest

from session_supervisor.domain.ports import ExitStatus
from session_supervisor.infra.runtime import detect_runtime
from tests.helpers import wait_for

# setsid: a new session and process group, out of reach of a SIGSTOP to the attempt's group.
TICKER = "setsid sh -c 'while :; do echo x >> /workspace/ticks; sleep 0.02; done' & sleep 60"


def test_freezing_a_sandbox_stops_a_process_outside_the_attempts_group(tmp_path):
    runtime = detect_runtime("bwrap", work_dir=str(tmp_path / "rt"))
    workspace = tmp_path / "sandboxes" / "sb-freeze" / "workspace"
    workspace.mkdir(parents=True)
    bound = runtime.isolate("sb-freeze", str(workspace), {})
    if bound.isolation.cgroup is None or "freezer" not in bound.isolation.cgroup.dirs:
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
