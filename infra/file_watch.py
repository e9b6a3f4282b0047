"""Watching sandbox directories (the files watch WebSocket): one inotify instance for the server.

inotify's limit on instances (``fs.inotify.max_user_instances``, 128) is per uid and host-wide,
and the server runs as root: an instance per subscription would let one client deny inotify to
every root process on the host. So every watch of the server shares one instance
(``WatchHub``): a directory watched twice is one kernel watch with two users, and a watch's
events are dispatched to its subscriptions by watch descriptor. asyncinotify (a small,
maintained ctypes binding with an asyncio reader) reads it, so events arrive as they happen.

Watches are added on ``/proc/self/fd/N`` of a directory that ``ConfinedFS`` resolved inside the
sandbox, never on a path by name, so a link planted in the workspace cannot make the server
watch a host directory. A recursive watch walks the tree iteratively with a few descriptors
(``infra.tree_walk``: a watch holds none once it is set up, however deep the tree) and picks up
new directories as they are created. Bounds: ``MAX_DIRS_PER_WATCH`` directories per
subscription (deeper or further ones are not watched), ``MAX_DIRS_PER_SANDBOX`` for all of a
sandbox's subscriptions and ``MAX_DIRS`` for the server (past them a subscribe answers an
error), ``EVENT_QUEUE`` events waiting per subscription (past it the client is told that events
were dropped).
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections import Counter
from typing import AsyncIterator, Callable

from asyncinotify import Inotify, Mask

from session_supervisor.domain.model.errors import DomainError, NotADirectoryInSandboxError

from .confined_fs import MAX_DEPTH, TMP_PREFIX, ConfinedFS
from .tree_walk import walk_tree

log = logging.getLogger(__name__)

MAX_DIRS_PER_WATCH = 1024
MAX_DIRS_PER_SANDBOX = 4096
MAX_DIRS = 65536
EVENT_QUEUE = 4096
MASK = (Mask.CREATE | Mask.MODIFY | Mask.CLOSE_WRITE | Mask.DELETE | Mask.MOVED_FROM | Mask.MOVED_TO
        | Mask.ATTRIB | Mask.DELETE_SELF | Mask.ONLYDIR)
_NAMES = ((Mask.CREATE, "create"), (Mask.MOVED_FROM, "rename"), (Mask.MOVED_TO, "rename"),
          (Mask.DELETE, "remove"), (Mask.MODIFY, "write"), (Mask.CLOSE_WRITE, "write"), (Mask.ATTRIB, "chmod"))
DROPPED = ("dropped", "")


class WatchLimitError(DomainError):
    """Too many watched directories (a sandbox's share or the server's)."""


class _Full(Exception):
    """This subscription has its MAX_DIRS_PER_WATCH directories: the walk stops."""


class WatchHub:
    """The server's one inotify instance and who listens to each of its watch descriptors."""

    def __init__(self) -> None:
        self._inotify: Inotify | None = None
        self._lock = threading.Lock()  # subscriptions are set up on file threads, events read on the loop
        self._users: dict[int, dict["DirectoryWatch", str]] = {}  # wd -> {subscription: view path}
        self._kernel: dict[int, object] = {}  # wd -> asyncinotify Watch
        self._per_sandbox: Counter = Counter()
        self._total = 0
        self._reader: asyncio.Task | None = None

    async def subscribe(self, calls, fs: ConfinedFS, sandbox_id: str, path: str,
                        recursive: bool) -> "DirectoryWatch":
        """A watch set up on the sandbox's share of the file threads (``calls``, infra.file_calls),
        as are the watches of directories that appear under it later."""
        self.start_reader()

        def spawn(fn, *args):
            task = asyncio.ensure_future(calls.run(sandbox_id, fn, *args))
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return await calls.run(sandbox_id, self.watch, fs, sandbox_id, path, recursive, spawn)

    # ---- set-up (blocking: on a file thread) ---------------------------------------------------
    def watch(self, fs: ConfinedFS, sandbox_id: str, path: str, recursive: bool,
              spawn: Callable) -> "DirectoryWatch":
        watch = DirectoryWatch(self, fs, sandbox_id, recursive, spawn)
        try:
            watch.add_tree(path, first=True)
        except BaseException:
            watch.close()
            raise
        return watch

    def add(self, watch: "DirectoryWatch", fd: int, view: str) -> None:
        with self._lock:
            if watch.closed:
                raise _Full()
            if len(watch.wds) >= MAX_DIRS_PER_WATCH:
                raise _Full()
            if self._per_sandbox[watch.sandbox_id] >= MAX_DIRS_PER_SANDBOX:
                raise WatchLimitError(f"the sandbox watches {MAX_DIRS_PER_SANDBOX} directories already")
            if self._total >= MAX_DIRS:
                raise WatchLimitError(f"the server watches {MAX_DIRS} directories already")
            if self._inotify is None:
                raise WatchLimitError("file watches are not started")
            kernel = self._inotify.add_watch(f"/proc/self/fd/{fd}", MASK)
            users = self._users.setdefault(kernel.wd, {})
            self._kernel[kernel.wd] = kernel
            if watch not in users:
                users[watch] = view
                watch.wds.add(kernel.wd)
                self._per_sandbox[watch.sandbox_id] += 1
                self._total += 1

    def remove(self, watch: "DirectoryWatch") -> None:
        with self._lock:
            watch.closed = True
            for wd in watch.wds:
                users = self._users.get(wd)
                if users is None or users.pop(watch, None) is None:
                    continue
                self._count_out(watch.sandbox_id)
                if not users:
                    del self._users[wd]
                    kernel = self._kernel.pop(wd, None)
                    if kernel is not None and self._inotify is not None:
                        try:
                            self._inotify.rm_watch(kernel)
                        except OSError:
                            pass  # the directory is gone: the kernel dropped the watch already
            watch.wds.clear()

    def _count_out(self, sandbox_id: str) -> None:
        self._total -= 1
        self._per_sandbox[sandbox_id] -= 1
        if self._per_sandbox[sandbox_id] <= 0:
            del self._per_sandbox[sandbox_id]

    # ---- events (the loop) -------------------------------------------------------------------
    def start_reader(self) -> None:
        """On the loop, before the first subscription: the instance, once, and its reader."""
        with self._lock:
            if self._inotify is None:
                self._inotify = Inotify()
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for event in self._inotify:
            try:
                self._dispatch(event)
            except Exception:
                log.exception("file watch event could not be delivered")

    def _dispatch(self, event) -> None:
        wd = event.watch.wd if event.watch is not None else None
        with self._lock:
            users = list(self._users.get(wd, {}).items()) if wd is not None else []
            if wd is not None and Mask.IGNORED in event.mask:  # the directory is gone, and its watch
                for watch, _view in users:
                    watch.wds.discard(wd)
                    self._count_out(watch.sandbox_id)
                self._users.pop(wd, None)
                self._kernel.pop(wd, None)
                return
        for watch, view in users:
            watch.deliver(event, view)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {"directories": self._total, "instances": int(self._inotify is not None)}

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        with self._lock:
            if self._inotify is not None:
                self._inotify.close()
                self._inotify = None
            self._users.clear()
            self._kernel.clear()


class DirectoryWatch:
    """One subscription: the directories it watches and the events waiting for its client."""

    def __init__(self, hub: WatchHub, fs: ConfinedFS, sandbox_id: str, recursive: bool, spawn: Callable) -> None:
        self.hub, self.fs, self.sandbox_id, self.recursive = hub, fs, sandbox_id, recursive
        self.spawn = spawn  # runs a blocking call on the file threads (a new directory's watches)
        self.wds: set[int] = set()
        self.closed = False
        self.queue: asyncio.Queue = asyncio.Queue(EVENT_QUEUE)
        self.overflowed = False
        self.loop: asyncio.AbstractEventLoop | None = None  # set by the first event delivered

    def _announce_contents(self, dir_fd: int, view: str) -> None:
        """A new directory is watched only after it was made: what was made in it before its watch
        existed (``mkdir -p a/b && touch a/b/f``) is reported as created, from a file thread."""
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                if not entry.name.startswith(TMP_PREFIX):
                    self.loop.call_soon_threadsafe(self._put, ("create", f"{view}/{entry.name}"))

    def add_tree(self, path: str, first: bool = False) -> None:
        """Watch ``path`` (and, recursive, every directory below it): blocking. A directory that
        appeared while watched (``first`` false) also has its entries reported as created."""
        entry = self.fs.resolve(path)
        try:
            if entry.self_fd is None:
                raise NotADirectoryInSandboxError(f"not a directory: {entry.view}")
            base = entry.view.rstrip("/")
            if not self.recursive:
                self.hub.add(self, entry.self_fd, entry.view)
                return
            fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=entry.self_fd)

            def watch_dir(dir_fd: int, names: list[str]) -> None:
                view = "/".join([base, *names]) if names else entry.view
                self.hub.add(self, dir_fd, view)
                if not first and self.loop is not None:
                    self._announce_contents(dir_fd, view.rstrip("/"))

            try:
                depth = max(0, MAX_DEPTH - base.count("/"))
                walk_tree(fd, on_dir=watch_dir, max_depth=depth)
            except _Full:
                if first and not self.wds:
                    raise WatchLimitError("no directory could be watched") from None
            finally:
                os.close(fd)
        except _Full:
            if first:
                raise WatchLimitError("no directory could be watched") from None
        finally:
            entry.close()

    def deliver(self, event, view: str) -> None:
        if event.name is None or self.closed:
            return
        name = str(event.name)
        if name.startswith(TMP_PREFIX):  # the file API's upload temporaries
            return
        path = f"{view.rstrip('/')}/{name}"
        if self.recursive and Mask.CREATE in event.mask and Mask.ISDIR in event.mask:
            self.loop = asyncio.get_running_loop()
            self.spawn(self._add_new, path)
        for flag, label in _NAMES:
            if flag in event.mask:
                self._put((label, path))
                break

    def _add_new(self, path: str) -> None:
        try:
            self.add_tree(path)
        except (OSError, DomainError, _Full):  # gone again, swapped for a link, too deep, or a limit
            pass

    def _put(self, item: tuple[str, str]) -> None:
        if self.overflowed:
            return
        if self.queue.qsize() >= EVENT_QUEUE - 1:
            self.overflowed = True
            self.queue.put_nowait(DROPPED)
            return
        self.queue.put_nowait(item)

    async def events(self) -> AsyncIterator[tuple[str, str]]:
        """(event, view path) as they happen; ("dropped", "") once when the client fell behind."""
        while not self.closed:
            item = await self.queue.get()
            yield item
            if item is DROPPED:
                return

    def close(self) -> None:
        self.hub.remove(self)
