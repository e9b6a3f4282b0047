"""One atomic write into a sandbox directory: a temporary file, fsynced, renamed over the target.

A reader, or a checkpoint of the rootfs, sees the old file or the new one, never a part;
an upload that fails (the client went away) leaves the old file and no temporary behind.
"""
from __future__ import annotations

import os

from .confined_errors import translate


class Upload:
    """One atomic write in progress: bytes go to a temporary file until ``commit``."""

    def __init__(self, entry, temp: str, fd: int, reserve=None) -> None:  # entry: a ConfinedFS Entry, owned now
        self.entry, self.temp, self.fd = entry, temp, fd
        self.reserve = reserve  # infra.disk_reserve.DiskReserve: a tenant's bytes stay above the server's reserve
        self.size = 0

    def write(self, data: bytes) -> None:
        if self.reserve is not None:
            self.reserve.admit(len(data), "this upload")
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError as exc:  # ENOSPC, EDQUOT: 507
            raise translate(exc, self.entry.view) from None
        self.size += len(data)

    def commit(self) -> None:
        try:
            os.fsync(self.fd)
            os.close(self.fd)
            self.fd = -1
            os.rename(self.temp, self.entry.name, src_dir_fd=self.entry.parent_fd,
                      dst_dir_fd=self.entry.parent_fd)
            self.temp = ""
            _fsync_dir(self.entry.parent_fd)  # the rename itself survives a crash too
        except OSError as exc:
            raise translate(exc, self.entry.view) from None
        finally:
            self.abort()

    def abort(self) -> None:
        """Idempotent: drop the temporary file (if not committed) and every fd."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.temp:
            try:
                os.unlink(self.temp, dir_fd=self.entry.parent_fd)
            except OSError:
                pass
            self.temp = ""
        self.entry.close()


def _fsync_dir(dir_fd: int) -> None:
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)  # O_PATH fds cannot sync
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
