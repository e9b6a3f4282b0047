"""The server's memory and descriptors as the kernel counts them (/proc), sampled while a test runs."""
from __future__ import annotations

import os
import threading
import time

MIB = 1 << 20


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def inotify_instances(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                count += 1
        except OSError:
            pass  # closed meanwhile
    return count


class PeakSampler:
    """``with PeakSampler(pid, measure) as peak:`` samples ``measure(pid)`` every 20 ms; ``peak.max``."""

    def __init__(self, pid: int, measure=rss_bytes, every_s: float = 0.02) -> None:
        self.pid, self.measure, self.every_s = pid, measure, every_s
        self.max = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.max = max(self.max, self.measure(self.pid))
            except (OSError, AssertionError):
                return
            time.sleep(self.every_s)

    def __enter__(self) -> "PeakSampler":
        self.max = self.measure(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.max = max(self.max, self.measure(self.pid))


def settle_rss(pid: int, target: int, timeout_s: float = 60.0) -> int:
    """The RSS once it is at or below ``target`` (the trim runs off the loop), or the last one seen."""
    deadline = time.monotonic() + timeout_s
    rss = rss_bytes(pid)
    while rss > target and time.monotonic() < deadline:
        time.sleep(0.5)
        rss = rss_bytes(pid)
    return rss
