"""The on-disk format of output segments (``output_segments``) and reading it back.

In the sandbox's state dir (one store per sandbox: checkpointing the rootfs checkpoints them with the journal)::

    segments/<session id>/<first seq, 16 digits>.seg

A file holds records ``seq (u64) + length (u32) + stored state`` back to back and is named
after the seq of its first record, so a session's files sort in seq order and a file holds
only seqs below the next file's name. The journal row of an event kept out of line holds
``b"S" + file (u64) + offset (u64) + length (u32)`` in place of its state: an inline state
starts with b"B" or b"{" (``infra.codec``), so stores written before this read unchanged.
A read checks the record's seq and length: a reference never yields another event's bytes.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from struct import Struct

SEGMENTS_DIR = "segments"
REF_MARK = b"S"
REF = Struct(">QQI")  # after REF_MARK: the file (its first seq), the state's offset, its length
REF_LEN = 1 + REF.size
RECORD = Struct(">QI")  # before each state in a file: its seq, its length
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}\Z")


def is_ref(state: bytes) -> bool:
    return len(state) == REF_LEN and state[:1] == REF_MARK


def make_ref(first_seq: int, offset: int, length: int) -> bytes:
    return REF_MARK + REF.pack(first_seq, offset, length)


def session_dir(root: Path, originator_id: str) -> Path:
    if not _SAFE_ID.match(originator_id):  # ids are ours (ses-<hex>); never a path outside root
        raise ValueError(f"not a storable session id: {originator_id!r}")
    return root / originator_id


def file_name(first_seq: int) -> str:
    return f"{first_seq:016d}.seg"


def first_seqs(directory: Path) -> list[int]:
    """The first seqs of a session's files, oldest first (none when it has no directory)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        stem, dot, ext = name.partition(".")
        if dot and ext == "seg" and stem.isdigit():
            found.append(int(stem))
    return sorted(found)


class SegmentReader:
    """Resolves references for one read call (any thread), each file opened once. A file that
    retention unlinks after it was opened stays readable until the call ends."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._fds: dict[tuple[str, int], int | None] = {}

    def __enter__(self) -> "SegmentReader":
        return self

    def __exit__(self, *exc) -> None:
        for fd in self._fds.values():
            if fd is not None:
                os.close(fd)
        self._fds.clear()

    def state(self, oid: str, seq: int, ref: bytes) -> bytes | None:
        """The stored state a reference points at; None when its file is gone or the record
        there is not this event's (never someone else's bytes)."""
        first, offset, length = REF.unpack_from(ref, 1)
        key = (oid, first)
        if key not in self._fds:
            try:
                path = session_dir(self._root, oid) / file_name(first)
                self._fds[key] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                self._fds[key] = None
        fd = self._fds[key]
        if fd is None or offset < RECORD.size:
            return None
        head = os.pread(fd, RECORD.size, offset - RECORD.size)
        if len(head) != RECORD.size or RECORD.unpack(head) != (seq, length):
            return None
        data = os.pread(fd, length, offset)
        return data if len(data) == length else None
