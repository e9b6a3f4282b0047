"""What the runner tests look at in /proc."""
from __future__ import annotations

import os


def children() -> list[int]:
    """This process's children, live or unreaped (a PTY's relay processes among them)."""
    me = str(os.getpid())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[1].decode() == me:
            found.append(int(pid))
    return found
