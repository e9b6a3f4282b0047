"""Walking and removing directory trees that a sandbox made: no recursion, no path strings, few fds.

A tenant decides how deep its tree is. Python's ``os.walk`` (3.11) and ``shutil.rmtree`` recurse
once per level, so a 1,500-deep directory raises RecursionError (a sandbox could never be
deleted again), and a path string that deep is longer than PATH_MAX. Here every walk is a loop
over an explicit stack of directories, each opened relative to its parent's descriptor with
``O_NOFOLLOW`` (a link is never followed, a component swapped for one fails the open), and at
most ``WINDOW`` of those descriptors are open at once: when the stack grows past it the
shallowest ones are closed, and reopened by name from the nearest open ancestor on the way back
up. No walk ever goes through ``..``: a directory the tenant moved away meanwhile is simply lost
from the walk (or found again by listing its parent once more, for a removal), never followed
to wherever it now is.
"""
from __future__ import annotations

import errno
import os
import stat as st
from dataclasses import dataclass, field
from typing import Callable

WINDOW = 16  # directory descriptors one walk holds at most (plus the caller's root)
DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_RESCANS = 64  # a removal that keeps finding new entries (a tenant writing into it) gives up


@dataclass
class _Frame:
    name: str | None        # None for the root (the caller's fd)
    fd: int | None          # None while closed (outside the window)
    pending: list[str] | None = None  # subdirectories still to visit; None: not listed yet
    rescans: int = 0


@dataclass
class DirStack:
    """The directories from a root fd down to the current one, at most WINDOW of them open."""

    root_fd: int
    frames: list[_Frame] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.frames = [_Frame(None, self.root_fd)]

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def top(self) -> _Frame:
        return self.frames[-1]

    def names(self) -> list[str]:
        return [frame.name for frame in self.frames[1:]]

    def top_fd(self) -> int | None:
        """The current directory's fd, reopened by name if it fell out of the window; None when a
        directory on the way is gone or replaced (the stack is then cut above it)."""
        if self.top.fd is not None:
            return self.top.fd
        start = max(i for i, frame in enumerate(self.frames) if frame.fd is not None)
        for i in range(start + 1, len(self.frames)):
            try:
                self.frames[i].fd = os.open(self.frames[i].name, DIR_OPEN, dir_fd=self.frames[i - 1].fd)
            except OSError:
                self._cut(i)
                return None
        self._trim()
        return self.top.fd

    def push(self, name: str) -> bool:
        """Enter subdirectory ``name`` of the current one; False if it is no longer a directory."""
        parent = self.top_fd()
        if parent is None:
            return False
        try:
            fd = os.open(name, DIR_OPEN, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return False  # gone, or swapped for a file or a link
            raise
        self.frames.append(_Frame(name, fd))
        self._trim()
        return True

    def pop(self) -> _Frame:
        frame = self.frames.pop()
        if frame.fd is not None and frame.name is not None:
            os.close(frame.fd)
            frame.fd = None
        return frame

    def close(self) -> None:
        while len(self.frames) > 1:
            self.pop()

    def _cut(self, i: int) -> None:
        """Directory ``i`` cannot be reached any more: forget it and everything below it."""
        while len(self.frames) > i:
            self.pop()

    def _trim(self) -> None:
        open_frames = [f for f in self.frames[1:] if f.fd is not None]
        for frame in open_frames[:max(0, len(open_frames) - WINDOW)]:
            os.close(frame.fd)
            frame.fd = None


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def walk_tree(root_fd: int, *, on_dir: Callable[[int, list[str]], None] | None = None,
              on_entry: Callable[[int, os.DirEntry], None] | None = None,
              max_depth: int | None = None, sort: bool = False) -> None:
    """Visit every directory below ``root_fd`` (and the root), pre-order: ``on_dir(fd, names)``
    once per directory, ``on_entry(dir_fd, entry)`` for each of its entries, links never
    followed. Directories deeper than ``max_depth`` below the root are not entered; ``sort``
    visits subdirectories in name order."""
    stack = DirStack(root_fd)
    try:
        while len(stack):
            frame = stack.top
            if frame.pending is None:
                fd = stack.top_fd()
                if fd is None:
                    continue  # moved away while it was out of the window: lost from this walk
                if on_dir is not None:
                    on_dir(fd, stack.names())
                subdirs = []
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if on_entry is not None:
                            on_entry(fd, entry)
                        if _is_dir(entry):
                            subdirs.append(entry.name)
                if sort:
                    subdirs.sort()
                subdirs.reverse()  # popped from the end: visited in listing (or name) order
                frame.pending = subdirs if max_depth is None or len(stack) <= max_depth else []
            if frame.pending:
                stack.push(frame.pending.pop())
            else:
                stack.pop()
    finally:
        stack.close()


def remove_tree(parent_fd: int, name: str) -> None:
    """Remove directory ``name`` of ``parent_fd`` with everything in it (post-order, iterative)."""
    for _ in range(MAX_RESCANS):
        _empty_tree(parent_fd, name)
        try:
            os.rmdir(name, dir_fd=parent_fd)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    raise OSError(errno.ENOTEMPTY, "entries keep appearing in the directory being removed", name)


def _empty_tree(parent_fd: int, name: str) -> None:
    root = os.open(name, DIR_OPEN, dir_fd=parent_fd)
    stack = DirStack(root)
    try:
        while len(stack):
            frame = stack.top
            fd = stack.top_fd()
            if fd is None:
                stack.top.pending = None  # its parent is listed again: what moved is found anew
                stack.top.rescans += 1
                if stack.top.rescans > MAX_RESCANS:
                    raise OSError(errno.EBUSY, "the directory being removed keeps changing")
                continue
            if frame.pending is None:
                frame.pending = _unlink_files(fd)
            if frame.pending:
                child = frame.pending.pop()
                if not stack.push(child):
                    _unlink_quietly(fd, child)  # replaced by a file or a link meanwhile
                continue
            if len(stack) == 1:
                break
            done = stack.pop()
            parent = stack.top_fd()
            if parent is None:
                continue
            try:
                os.rmdir(done.name, dir_fd=parent)
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                stack.top.rescans += 1  # something new appeared in it: list the parent again
                if stack.top.rescans > MAX_RESCANS:
                    raise
                stack.top.pending = None
    finally:
        stack.close()
        os.close(root)


def _unlink_files(fd: int) -> list[str]:
    """Unlink every non-directory in ``fd``; return its subdirectories."""
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if _is_dir(entry):
                subdirs.append(entry.name)
            else:
                _unlink_quietly(fd, entry.name)
    return subdirs


def _unlink_quietly(fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    except IsADirectoryError:  # became a directory meanwhile: the next listing finds it
        pass


def remove_path(path: str) -> None:
    """Remove a host path the server owns (a sandbox's directory): a tree or a file, if there."""
    parent, name = os.path.split(os.path.abspath(path))
    parent_fd = os.open(parent, DIR_OPEN)
    try:
        try:
            info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if st.S_ISDIR(info.st_mode):
            remove_tree(parent_fd, name)
        else:
            os.unlink(name, dir_fd=parent_fd)
    finally:
        os.close(parent_fd)


def tree_usage(path: str) -> int:
    """Bytes allocated under ``path`` (st_blocks, links not followed)."""
    total = 0

    def count(_dir_fd: int, entry: os.DirEntry) -> None:
        nonlocal total
        try:
            total += entry.stat(follow_symlinks=False).st_blocks * 512
        except OSError:
            pass  # removed while we walked

    fd = os.open(path, DIR_OPEN)
    try:
        walk_tree(fd, on_entry=count)
    finally:
        os.close(fd)
    return total
