"""Watching a sandbox directory (the files watch WebSocket), with inotify through asyncinotify.

asyncinotify is a small, maintained ctypes binding with an asyncio reader; it is used instead
of a polling loop so that events arrive as they happen. Watches are added on
``/proc/self/fd/N`` of a directory that ``ConfinedFS`` resolved inside the sandbox, never on a
path by name, so a link planted in the workspace cannot make the server watch a host directory.
Recursive watches walk subdirectories the same way (links are not followed) and pick up new
directories as they are created, up to ``MAX_WATCHES``.
"""
from __future__ import annotations

import os
import stat as st
from typing import AsyncIterator

from asyncinotify import Inotify, Mask

from session_supervisor.domain.model.errors import DomainError

from .confined_fs import TMP_PREFIX, ConfinedFS

MAX_WATCHES = 4096
MASK = (Mask.CREATE | Mask.MODIFY | Mask.CLOSE_WRITE | Mask.DELETE | Mask.MOVED_FROM | Mask.MOVED_TO
        | Mask.ATTRIB | Mask.DELETE_SELF | Mask.ONLYDIR)
_NAMES = ((Mask.CREATE, "create"), (Mask.MOVED_FROM, "rename"), (Mask.MOVED_TO, "rename"),
          (Mask.DELETE, "remove"), (Mask.MODIFY, "write"), (Mask.CLOSE_WRITE, "write"), (Mask.ATTRIB, "chmod"))


class DirectoryWatch:
    def __init__(self, fs: ConfinedFS, path: str, recursive: bool) -> None:
        self.fs = fs
        self.recursive = recursive
        self.inotify = Inotify()
        self.views: dict[int, str] = {}  # watch descriptor -> view path of the directory
        try:
            self._add(path)
        except BaseException:
            self.inotify.close()
            raise

    def _add(self, path: str) -> None:
        entry = self.fs.resolve(path)
        try:
            if entry.self_fd is None:
                raise NotADirectoryError(f"not a directory: {entry.view}")
            if len(self.views) >= MAX_WATCHES:
                return
            watch = self.inotify.add_watch(f"/proc/self/fd/{entry.self_fd}", MASK)
            self.views[watch.wd] = entry.view
            if self.recursive:
                for name in self._subdirectories(entry.self_fd):
                    self._add(f"{entry.view}/{name}")
        finally:
            entry.close()

    @staticmethod
    def _subdirectories(dir_fd: int) -> list[str]:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            return [name for name in os.listdir(fd)
                    if st.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)]
        finally:
            os.close(fd)

    async def events(self) -> AsyncIterator[tuple[str, str]]:
        """(event, view path) as they happen; the upload temporaries of the file API are left out."""
        async for event in self.inotify:
            base = self.views.get(event.watch.wd) if event.watch is not None else None
            if base is None or event.name is None:
                continue
            name = str(event.name)
            if name.startswith(TMP_PREFIX):
                continue
            path = f"{base}/{name}"
            if self.recursive and Mask.CREATE in event.mask and Mask.ISDIR in event.mask:
                try:
                    self._add(path)
                except (OSError, DomainError):  # gone again, or swapped for a link: nothing to watch
                    pass
            for flag, label in _NAMES:
                if flag in event.mask:
                    yield label, path
                    break

    def close(self) -> None:
        self.inotify.close()
