"""Which host uids this server's sandboxes hold, so a new one is chosen without a scan.

A sandbox's uid is its workspace's owner (``infra.confinement``). Choosing a free one used to
stat every other sandbox's workspace, a cost that grew with the number of sandboxes on every
claim; and a warm unit's workspace (``infra.warm_pool``) is owned before any sandbox has it, so
a scan of the sandboxes alone could hand its uid out twice. This table is read from the disk once
at start (every workspace it can see), then kept as uids are handed out and given back; each uid
is held by one owner (a sandbox id, or a warm unit's name until a sandbox takes it over).
"""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Iterable

UID_BASE = 100_000
UID_SPAN = 1_000_000


class UidsExhausted(RuntimeError):
    pass


class UidTable:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: dict[int, str] = {}

    def seed(self, held: Iterable[tuple[int, str]]) -> None:
        with self._lock:
            for uid, owner in held:
                self._owner.setdefault(uid, owner)

    def hold(self, uid: int, owner: str) -> bool:
        """``owner`` has ``uid`` (read back from its workspace); False when another owner has it."""
        with self._lock:
            return self._owner.setdefault(uid, owner) == owner

    def allot(self, owner: str) -> int:
        """A uid no one holds, starting from a hash of ``owner`` (two servers on one machine rarely
        start from the same one), now held by ``owner``."""
        start = int.from_bytes(hashlib.sha256(owner.encode()).digest()[:8], "big") % UID_SPAN
        with self._lock:
            for step in range(UID_SPAN):
                uid = UID_BASE + (start + step) % UID_SPAN
                if uid not in self._owner:
                    self._owner[uid] = owner
                    return uid
        raise UidsExhausted(f"every uid from {UID_BASE} to {UID_BASE + UID_SPAN - 1} is taken")

    def hand_over(self, uid: int, old: str, new: str) -> None:
        """A warm unit's uid becomes its sandbox's."""
        with self._lock:
            if self._owner.get(uid) == old:
                self._owner[uid] = new

    def release(self, uid: int | None, owner: str) -> None:
        if uid is None:
            return
        with self._lock:
            if self._owner.get(uid) == owner:
                del self._owner[uid]

    def held(self) -> int:
        with self._lock:
            return len(self._owner)


def workspace_owners(sandboxes_root: Path) -> list[tuple[int, str]]:
    """(uid, sandbox id) of every workspace visible under ``sandboxes_root`` (start-up, once)."""
    found = []
    try:
        entries = list(os.scandir(sandboxes_root))
    except FileNotFoundError:
        return found
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        for part in ("workspace", "disk/workspace"):
            try:
                uid = os.stat(os.path.join(entry.path, part)).st_uid
            except OSError:
                continue
            if UID_BASE <= uid < UID_BASE + UID_SPAN:
                found.append((uid, entry.name))
    return found
