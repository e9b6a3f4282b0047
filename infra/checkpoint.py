"""The file side of the pause hook: seal a sandbox's store and keep its checkpoint manifest.

After ``seal`` the store on the sandbox's rootfs is one complete SQLite file: the library's
connections are closed, the WAL is checkpointed into the main file and truncated, and only the
latest snapshot of each aggregate is kept (``event_store.SqliteJournal.seal``). The manifest ``state/checkpoint.json.zst`` is
zstd-compressed JSON written atomically (temp file, fsync, rename, fsync of the directory, as
Go's ``writeFileAtomic``), so a reader sees either the previous manifest or the new one.
"""
from __future__ import annotations

import os
from pathlib import Path

import orjson
import zstandard

from .codec import compress, decompress
from .reflink import fsync_dir
from .sandbox_dirs import SandboxDirectories

MANIFEST_NAME = "checkpoint.json.zst"

class Checkpoints:
    def __init__(self, dirs: SandboxDirectories) -> None:
        self.dirs = dirs

    def _state(self, sandbox_id: str) -> Path:
        return self.dirs.state_dir(sandbox_id)

    def fetch(self, sandbox_id: str, newest_here: bool) -> None:
        """One machine: the sandbox's rootfs never leaves it, so there is nothing to bring."""

    def remove(self, sandbox_id: str) -> None:
        """The manifest is in the sandbox's state dir: it goes with the sandbox's directory."""

    # ---- the store ------------------------------------------------------------------------
    def seal(self, sandbox_id: str, store) -> None:
        """Close the sandbox's journal, complete and compacted on its rootfs (sync: run in a
        thread, or on the writer thread after every commit)."""
        store.journal.seal()

    # ---- the manifest -------------------------------------------------------------------------
    def write_manifest(self, sandbox_id: str, manifest: dict) -> None:
        state = self._state(sandbox_id)
        write_atomic(state / MANIFEST_NAME, compress(orjson.dumps(manifest)))

    def read_manifest(self, sandbox_id: str) -> dict | None:
        """The manifest, None when there is none; ValueError when it cannot be read back."""
        try:
            data = (self._state(sandbox_id) / MANIFEST_NAME).read_bytes()
        except FileNotFoundError:
            return None
        try:
            manifest = orjson.loads(decompress(data))
        except (zstandard.ZstdError, orjson.JSONDecodeError) as exc:
            raise ValueError(f"checkpoint manifest is corrupt: {exc}") from None
        if not isinstance(manifest, dict):
            raise ValueError("checkpoint manifest is not an object")
        return manifest

    def discard_manifest(self, sandbox_id: str) -> None:
        state = self._state(sandbox_id)
        try:
            (state / MANIFEST_NAME).unlink()
        except FileNotFoundError:
            return
        fsync_dir(state)


def write_atomic(path: Path, data: bytes) -> None:
    """Temp file, fsync, rename, fsync of the directory: a reader sees the old file or the new one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # two processes never share one
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    fsync_dir(path.parent)

