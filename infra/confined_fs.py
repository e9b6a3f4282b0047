"""File access confined to a sandbox's view: its /workspace (and its /tmp when that is on disk).

Paths are sandbox paths. They are walked one component at a time from directory file
descriptors opened with ``O_NOFOLLOW``, and every symlink on the way is read and resolved
*as the sandbox would see it*: an absolute target starts again at the sandbox's ``/``, a
relative one continues from the link's directory, and ``..`` never climbs above ``/``.
Where the walk ends outside the allowed areas (``/etc/passwd`` of the sandbox, which is the
host's read-only /etc, or a path that is not under /workspace or /tmp) the call is refused;
nothing here ever opens a host path by name, so a link the sandbox planted cannot point the
server at the host or at another sandbox. A swap of a component for a symlink between the
check and the open fails the open (``O_NOFOLLOW``) instead of following it.

Writes go to a temporary file in the target's directory, are fsynced and renamed over the
target, so a reader (or a checkpoint) sees the old file or the new one, never half of one.
Everything here blocks: callers run it in a thread.
"""
from __future__ import annotations

import functools
import heapq
import os
import time
import stat as st
import uuid
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from session_supervisor.domain.model.errors import (
    FileNotFoundInSandboxError,
    InvalidRequestError,
    NotADirectoryInSandboxError,
    NotAFileInSandboxError,
    PathExistsError,
    PathOutsideSandboxError,
)

from .atomic_upload import Upload
from .confined_errors import translate
from .file_listing import LIST_PAGE, Listing
from .tree_walk import remove_tree

MAX_LINKS = 40  # as the kernel's MAXSYMLINKS
# Directories one walk holds open, one per level: a path deeper than this (a tenant can make any
# depth) is refused rather than costing the server a descriptor per level.
MAX_DEPTH = 256
DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
TMP_PREFIX = ".sessiond-upload-"
# The one area of a rooted view (a volume's files: its root is "/"). No path and no link target can
# hold a NUL, so no name a caller or a tenant makes can reach it except as the view's root.
ROOT = "\0"


@dataclass
class Entry:
    """Where a sandbox path ended: ``name`` inside the directory ``parent_fd`` (None for an area root)."""

    view: str
    parent_fd: int | None
    name: str | None
    self_fd: int | None  # an O_PATH fd of the entry itself when it is a directory
    fds: list

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()


class ConfinedFS:
    def __init__(self, areas: dict[str, str], owner: tuple[int, int] | None = None, reserve=None,
                 rooted: bool = False) -> None:
        self.areas = {name.strip("/"): host for name, host in areas.items()}  # "workspace" -> host dir
        # Rooted: one area that is the view's "/" (``rooted_at``): a volume's paths are relative to
        # its root, an absolute link inside it starts again there and ``..`` never climbs above it.
        self.rooted = rooted
        # What the API creates belongs to the sandbox's own root (its host uid under the
        # hardened runtime), so the sandbox can change and delete it like its own files.
        self.owner = owner
        # infra.disk_reserve.DiskReserve: what the API writes for the tenant stays above the server's
        # reserve (it writes as root, so the filesystem's own reserve for root would not stop it).
        self.reserve = reserve

    @classmethod
    def rooted_at(cls, host: str, owner: tuple[int, int] | None = None, reserve=None) -> "ConfinedFS":
        """The files under ``host`` as a view of their own: ``/`` is ``host``."""
        return cls({ROOT: host}, owner, reserve, rooted=True)

    def _parts(self, path: str) -> list[str]:
        if not self.rooted:
            return _components(path)
        _check_path(path)
        return ["", ROOT, *path.split("/")]

    def _view(self, stack: list[str]) -> str:
        return "/" + "/".join(stack[1:] if self.rooted else stack)

    def admit(self, size: int, what: str = "this upload") -> None:
        if self.reserve is not None:
            self.reserve.admit(max(size, 1), what)

    # ---- the walk -----------------------------------------------------------------------------
    def resolve(self, path: str, *, follow_last: bool = True) -> Entry:
        todo = deque(self._parts(path))
        stack: list[str] = []  # view components from "/"
        fds: list[int] = []    # fds[i] is the directory stack[:i+1] (inside an area)
        owned: list[int] = []
        links = 0
        try:
            while todo:
                part = todo.popleft()
                if part in ("", "."):
                    continue
                if part == "..":
                    if stack and not (self.rooted and len(stack) == 1):
                        stack.pop()
                        fds.pop()
                    continue
                if not stack:
                    host = self.areas.get(part)
                    if host is None:
                        raise PathOutsideSandboxError(f"{self._view([part])} is outside the sandbox's "
                                                      f"{' and '.join('/' + a for a in self.areas)}")
                    fd = os.open(host, DIR_FLAGS)
                    owned.append(fd)
                    stack.append(part)
                    fds.append(fd)
                    continue
                last = not any(p not in ("", ".") for p in todo)
                if last and not follow_last:
                    return Entry(self._view(stack + [part]), fds[-1], part, None, owned)
                try:
                    info = os.stat(part, dir_fd=fds[-1], follow_symlinks=False)
                except FileNotFoundError:
                    if last:
                        return Entry(self._view(stack + [part]), fds[-1], part, None, owned)
                    raise FileNotFoundInSandboxError(f"directory not found: {self._view(stack + [part])}") from None
                if st.S_ISLNK(info.st_mode):
                    links += 1
                    if links > MAX_LINKS:
                        raise InvalidRequestError(f"too many levels of symbolic links: {path}")
                    target = os.readlink(part, dir_fd=fds[-1])
                    todo.extendleft(reversed(target.split("/")))
                    if target.startswith("/"):
                        stack.clear()
                        fds.clear()
                        if self.rooted:
                            todo.appendleft(ROOT)
                    continue
                if st.S_ISDIR(info.st_mode):
                    if len(fds) >= MAX_DEPTH:
                        raise InvalidRequestError(f"path is deeper than {MAX_DEPTH} directories: {path[:200]}")
                    fd = os.open(part, DIR_FLAGS, dir_fd=fds[-1])
                    owned.append(fd)
                    stack.append(part)
                    fds.append(fd)
                    continue
                if not last:
                    raise NotADirectoryInSandboxError(f"not a directory: {self._view(stack + [part])}")
                return Entry(self._view(stack + [part]), fds[-1], part, None, owned)
            if not stack:
                raise PathOutsideSandboxError("/ is outside the sandbox's file areas")
            parent = fds[-2] if len(fds) > 1 else None
            return Entry(self._view(stack), parent, stack[-1] if parent is not None else None, fds[-1], owned)
        except OSError as exc:
            _close(owned)
            raise translate(exc, path) from None
        except BaseException:
            _close(owned)
            raise

    # ---- reads --------------------------------------------------------------------------------
    @contextmanager
    def _walked(self, path: str, *, follow_last: bool = True) -> Iterator[Entry]:
        """The resolved entry for the body of a ``with``; OS errors become the API's, fds are closed."""
        entry = self.resolve(path, follow_last=follow_last)
        try:
            yield entry
        except OSError as exc:
            raise translate(exc, path) from None
        finally:
            entry.close()

    def open_read(self, path: str) -> tuple[int, int]:
        """An fd of the regular file and its size; the caller closes the fd."""
        with self._walked(path) as entry:
            if entry.self_fd is not None:
                raise NotAFileInSandboxError(f"not a file: {entry.view}")
            info = os.stat(entry.name, dir_fd=entry.parent_fd, follow_symlinks=False)
            if not st.S_ISREG(info.st_mode):  # a socket, FIFO or device is never opened
                raise NotAFileInSandboxError(f"not a regular file: {entry.view}")
            fd = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                         dir_fd=entry.parent_fd)
            info = os.fstat(fd)
            if not st.S_ISREG(info.st_mode):  # a FIFO or device must not block or leak
                os.close(fd)
                raise NotAFileInSandboxError(f"not a regular file: {entry.view}")
            os.set_blocking(fd, True)
            return fd, info.st_size

    def stat(self, path: str) -> dict:
        with self._walked(path, follow_last=False) as entry:
            return self.entry_info(entry.parent_fd, entry.name, entry.view, entry.self_fd)

    def list(self, path: str, after: str = "", limit: int = LIST_PAGE) -> list[dict]:
        """One page of entries (see ``open_listing``), rendered at once: for small directories."""
        listing = self.open_listing(path, after, limit)
        try:
            return listing.render(0, len(listing.names))
        finally:
            listing.close()

    def open_listing(self, path: str, after: str = "", limit: int = LIST_PAGE) -> "Listing":
        """The first ``limit`` names after ``after``, in name order, of a directory; the caller
        renders them in batches (``Listing.render``) and closes it. Only the page's names are held,
        however large the directory."""
        with self._walked(path) as entry:
            if entry.self_fd is None:
                if entry.name is not None and not _exists(entry):
                    raise FileNotFoundInSandboxError(f"directory not found: {entry.view}")
                raise NotADirectoryInSandboxError(f"not a directory: {entry.view}")
            fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=entry.self_fd)
            try:
                with os.scandir(fd) as entries:
                    names = heapq.nsmallest(limit + 1, (e.name for e in entries if e.name > after))
            except BaseException:
                os.close(fd)
                raise
            more = len(names) > limit
            return Listing(self, fd, entry.view.rstrip("/"), names[:limit], more)

    def entry_info(self, dir_fd: int | None, name: str | None, view: str, self_fd: int | None) -> dict:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False) if name is not None else os.fstat(self_fd)
        kind = "dir" if st.S_ISDIR(info.st_mode) else "symlink" if st.S_ISLNK(info.st_mode) else "file"
        out = {"name": view.rsplit("/", 1)[-1], "path": view, "type": kind, "size": info.st_size,
               "mode": f"{st.S_IMODE(info.st_mode) & 0o777:04o}",
               "mod_time": _rfc3339(info.st_mtime_ns),
               "is_link": kind == "symlink"}
        if kind == "symlink":
            out["link_target"] = os.readlink(name, dir_fd=dir_fd)
        return out

    # ---- writes -------------------------------------------------------------------------------
    def begin_write(self, path: str, mode: int = 0o644) -> "Upload":
        """A temporary file next to the target; ``Upload.commit`` renames it over the target."""
        self.admit(1)
        entry = self.resolve(path)
        try:
            if entry.self_fd is not None:
                raise NotAFileInSandboxError(f"is a directory: {entry.view}")
            temp = f"{TMP_PREFIX}{uuid.uuid4().hex}"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=entry.parent_fd)
            if self.owner is not None:
                os.fchown(fd, *self.owner)
            if mode != 0o644:
                os.fchmod(fd, mode & 0o777)
        except OSError as exc:
            entry.close()
            raise translate(exc, path) from None
        except BaseException:
            entry.close()
            raise
        return Upload(entry, temp, fd, self.reserve)

    def write(self, path: str, chunks: Iterator[bytes]) -> None:
        upload = self.begin_write(path)
        try:
            for chunk in chunks:
                upload.write(chunk)
            upload.commit()
        finally:
            upload.abort()

    def mkdir(self, path: str, recursive: bool) -> None:
        self.admit(4096, "a new directory")  # a directory takes a block
        if recursive:
            parts = [p for p in (path.split("/") if self.rooted else _components(path)) if p not in ("", ".")]
            for i in range(1, len(parts) + 1):
                self._mkdir_one("/" + "/".join(parts[:i]), exist_ok=True)
            return
        self._mkdir_one(path, exist_ok=False)

    def _mkdir_one(self, path: str, exist_ok: bool) -> None:
        with self._walked(path) as entry:
            if entry.self_fd is not None:
                if not exist_ok:
                    raise PathExistsError(f"path exists: {entry.view}")
                return
            try:
                os.mkdir(entry.name, 0o755, dir_fd=entry.parent_fd)
                if self.owner is not None:
                    os.chown(entry.name, *self.owner, dir_fd=entry.parent_fd, follow_symlinks=False)
            except FileExistsError:  # a file (or a link) already has the name
                raise (NotADirectoryInSandboxError if exist_ok else PathExistsError)(
                    f"path exists: {entry.view}") from None

    def symlink(self, path: str, target: str) -> None:
        """A symbolic link at ``path`` (one there that is not a directory is replaced). Its target
        is only ever read as the view resolves it, so any target is harmless."""
        with self._walked(path, follow_last=False) as entry:
            if entry.name is None:
                raise PathOutsideSandboxError(f"{entry.view} itself cannot be replaced")
            try:
                os.symlink(target, entry.name, dir_fd=entry.parent_fd)
            except FileExistsError:
                info = os.stat(entry.name, dir_fd=entry.parent_fd, follow_symlinks=False)
                if st.S_ISDIR(info.st_mode):
                    raise PathExistsError(f"path exists: {entry.view}") from None
                os.unlink(entry.name, dir_fd=entry.parent_fd)
                os.symlink(target, entry.name, dir_fd=entry.parent_fd)
            if self.owner is not None:
                os.chown(entry.name, *self.owner, dir_fd=entry.parent_fd, follow_symlinks=False)

    def remove(self, path: str) -> None:
        """Delete a file, a link (not its target) or a directory tree."""
        with self._walked(path, follow_last=False) as entry:
            if entry.name is None:
                raise PathOutsideSandboxError(f"{entry.view} itself cannot be deleted")
            info = os.stat(entry.name, dir_fd=entry.parent_fd, follow_symlinks=False)
            if st.S_ISDIR(info.st_mode):
                remove_tree(entry.parent_fd, entry.name)  # iterative: any depth a tenant made
            else:
                os.unlink(entry.name, dir_fd=entry.parent_fd)

    def move(self, source: str, destination: str) -> None:
        with self._walked(source, follow_last=False) as src, \
                self._walked(destination, follow_last=False) as dst:  # a link at the destination is replaced
            if src.name is None or dst.name is None:
                raise PathOutsideSandboxError("an area root cannot be moved or replaced")
            os.stat(src.name, dir_fd=src.parent_fd, follow_symlinks=False)  # 404 before anything else
            os.rename(src.name, dst.name, src_dir_fd=src.parent_fd, dst_dir_fd=dst.parent_fd)


@functools.lru_cache(maxsize=4096)
def _utc_second(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def _rfc3339(ns: int) -> str:
    """As ``datetime.isoformat`` in UTC (microseconds when there are any), a fifth of its cost:
    a listing renders one per entry, and the files of one directory often share their second."""
    seconds, micro = divmod((ns + 500) // 1000, 1_000_000)  # to the nearest microsecond, as datetime
    return f"{_utc_second(seconds)}.{micro:06d}Z" if micro else f"{_utc_second(seconds)}Z"


def _exists(entry: Entry) -> bool:
    try:
        os.stat(entry.name, dir_fd=entry.parent_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def _check_path(path: str) -> None:
    if not isinstance(path, str) or not path.strip():
        raise InvalidRequestError("path is required")
    if "\0" in path:
        raise InvalidRequestError("path must not contain NUL bytes")


def _components(path: str) -> list[str]:
    _check_path(path)
    if not path.startswith("/"):
        path = "/workspace/" + path  # relative paths are relative to the workspace, as cwd is
    return path.split("/")


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
    fds.clear()
