"""Rootfs snapshots on disk: ``<pool>/snapshots/<id>/{disk.img, snapshot.json}`` (or under the
data dir's ``snapshots/`` without a pool), one directory per snapshot.

A snapshot is made in ``.tmp-<id>/`` (its image copied, its record written and fsynced) and renamed
to ``<id>/`` only when complete, so after a crash it is either whole or not there; a delete renames
it to ``.deleting-<id>/`` first, so a half-deleted one is never listed. ``sweep`` (at start)
removes both kinds of leftovers. The records are also kept in memory: only this server writes
them, and a list is called on every console refresh.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from pathlib import Path

from .reflink import fsync_dir

log = logging.getLogger(__name__)

IMAGE, RECORD = "disk.img", "snapshot.json"
TEMP, DELETING = ".tmp-", ".deleting-"


class RootfsSnapshotStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._records: dict[str, dict] = {}
        self.sweep()
        for entry in os.scandir(self.root):
            if entry.name.startswith("."):
                continue
            try:
                self._records[entry.name] = json.loads((Path(entry.path) / RECORD).read_text())
            except (OSError, ValueError) as exc:
                log.warning("rootfs snapshot %s is unreadable (%s); removing it", entry.name, exc)
                shutil.rmtree(entry.path, ignore_errors=True)

    def sweep(self) -> int:
        """Snapshots a killed server left half-made or half-deleted, removed."""
        removed = 0
        for entry in os.scandir(self.root):
            whole = entry.is_dir(follow_symlinks=False) and (Path(entry.path) / RECORD).exists()
            if entry.name.startswith((TEMP, DELETING)) or not whole:
                shutil.rmtree(entry.path, ignore_errors=True) if entry.is_dir(follow_symlinks=False) \
                    else os.unlink(entry.path)
                removed += 1
        if removed:
            log.info("removed %d rootfs snapshot(s) a killed server left half-made", removed)
        return removed

    # ---- making ---------------------------------------------------------------------------------
    def begin(self, snapshot_id: str) -> Path:
        staging = self.root / f"{TEMP}{snapshot_id}"
        staging.mkdir(mode=0o700)
        return staging / IMAGE

    def publish(self, snapshot_id: str, record: dict) -> None:
        staging, final = self.root / f"{TEMP}{snapshot_id}", self.root / snapshot_id
        path = staging / RECORD
        with open(path, "w") as f:
            json.dump(record, f)
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(staging)
        with self._lock:
            os.rename(staging, final)
            fsync_dir(self.root)
            self._records[snapshot_id] = record

    def abandon(self, snapshot_id: str) -> None:
        shutil.rmtree(self.root / f"{TEMP}{snapshot_id}", ignore_errors=True)

    # ---- reading --------------------------------------------------------------------------------
    def records(self) -> list[dict]:
        with self._lock:
            return list(self._records.values())

    def record(self, snapshot_id: str) -> dict | None:
        with self._lock:
            return self._records.get(snapshot_id)

    def image(self, snapshot_id: str) -> Path:
        return self.root / snapshot_id / IMAGE

    # ---- deleting -------------------------------------------------------------------------------
    def delete(self, snapshot_id: str) -> bool:
        """Gone for readers at once (renamed aside), then removed; False when there was none."""
        doomed = self.root / f"{DELETING}{snapshot_id}"
        with self._lock:
            if self._records.pop(snapshot_id, None) is None:
                return False
            os.rename(self.root / snapshot_id, doomed)
            fsync_dir(self.root)
        shutil.rmtree(doomed, ignore_errors=True)
        return True
