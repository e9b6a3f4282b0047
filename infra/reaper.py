"""Reap what an old runtime generation left behind, identified by pid and start time.

A pid alone may have been reused; /proc/<pid>/stat field 22 (start time in clock
ticks since boot) tells the same process from a newcomer.
"""
from __future__ import annotations

import os
import signal
import time

from .pipe_runner import proc_start_time as process_start_time


def reap_leftover(pid: int, start_time: int, wait_s: float = 2.0) -> bool:
    """Kill the process group of ``pid`` if it is still the recorded process. True if killed."""
    if pid <= 0 or not start_time or process_start_time(pid) != start_time:
        return False
    for sig in (signal.SIGKILL, signal.SIGCONT):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(pid, sig)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and process_start_time(pid) == start_time:
        try:
            os.waitpid(pid, os.WNOHANG)  # only reaps if it happens to be our child
        except ChildProcessError:
            pass
        time.sleep(0.01)
    return True
