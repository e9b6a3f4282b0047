"""Output bytes out of line: per-session append-only segment files next to the journal.

SQLite writes every byte twice (the WAL, then the checkpoint) on the one writer thread, which
capped the ingest of incompressible output at about half of ``cat > file`` + fsync. A large
stored ``output`` event (its codec frame, as ``infra.codec`` made it, at least
OUT_OF_LINE_MIN bytes) is therefore written once, to a segment file, and the journal row
keeps a short reference in its place: the row is still the public event (same seq, topic,
time, fields once resolved), only its bytes live beside it. Small events stay inline, so echo
latency and the replay of small events do not change, and stores written before this keep
loading (a reference starts with b"S", an inline frame with b"B" or b"{").

The file format and the reads are in ``segment_format``.

The rules that keep the journal and the segments consistent:

- Durability point: a tick writes every segment record first, then fdatasyncs each file
  it touched once (and the directory of a file it created), and only then does the SQLite
  transaction commit. A commit that makes an output event visible never precedes its bytes.
- A refused commit (full disk, I/O error) truncates what it appended and unlinks the files it
  created: the held batch is retried whole, with the same seqs.
- Recovery (a kill -9 between the segment write and the commit) runs for a session the first
  time the writer touches it: the newest file referenced is truncated to the end of its last
  referenced record, newer files are removed, and files older than the oldest referenced one
  too. A journal opened only to be read (``SqliteJournals.record``) never truncates.
- Retention: once every output row up to a seq is deleted, a file whose successor starts at or
  below the seq after it is unlinked; disk stays bounded by the retained window plus one file.
- A file gone under a reader (retention won the race) reads as None, never as other bytes.
"""
from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Callable

from session_supervisor.domain.model.events import Output

from .checkpoint import fsync_dir
from .segment_format import REF, RECORD, SEGMENTS_DIR, SegmentReader, file_name, first_seqs, make_ref, session_dir

OUTPUT_TOPIC = Output.TOPIC
# Measured on the writer's commit alone (incompressible, 4 MiB ticks): out of line is 2.3x
# faster from 32 KiB events up (184 -> 440 MB/s; 256 KiB: 385 -> 830 MB/s) and reads are as
# fast or faster, at +0.15 ms p50 per commit for the second fdatasync. Below 32 KiB (echo,
# a terminal's redraw) latency matters more than bulk: those stay in the row.
OUT_OF_LINE_MIN = 32 * 1024
# A file is closed once it holds this much: retention frees disk in whole files, so the
# disk above a session's retained window is at most about one file.
SEGMENT_BYTES = 16 * 1024 * 1024
_IOV_MAX = 512  # buffers per pwritev (Linux allows 1024)


class FrameParts:
    """A large output event's stored state as its two parts (``codec.output_frame_parts``),
    never joined: the segment record is written from both, and the row gets a reference. It
    exists only between the encoding of a commit and its segment write."""

    __slots__ = ("head", "data")

    def __init__(self, head: bytes, data: bytes) -> None:
        self.head, self.data = head, data

    def __len__(self) -> int:
        return len(self.head) + len(self.data)


def goes_out_of_line(topic: str, state) -> bool:
    """Only output: it is what floods, and what retention trims (lifecycle rows are kept for
    good, so their bytes must never sit in a file that retention unlinks)."""
    return topic == OUTPUT_TOPIC and len(state) >= OUT_OF_LINE_MIN


class _Tail:
    """The file a session appends to: its fd and the logical end (the next record's offset)."""

    __slots__ = ("path", "first_seq", "fd", "size")

    def __init__(self, path: Path, first_seq: int, fd: int, size: int) -> None:
        self.path, self.first_seq, self.fd, self.size = path, first_seq, fd, size


class SegmentWrite:
    """What one commit appended, to undo it when the commit is refused."""

    def __init__(self) -> None:
        self.before: dict[str, tuple[_Tail | None, int]] = {}  # session -> (its tail, size) before
        self.created: list[_Tail] = []
        self.retired: list[_Tail] = []  # full files this commit rotated away from


class OutputSegments:
    """The segment files of one journal. Appends, recovery and retention run on the writer
    thread; reads in any thread (they only open, pread and close)."""

    def __init__(self, state_dir: Path, refs_of: Callable[[str], tuple[bytes | None, bytes | None]]) -> None:
        self.root = state_dir / SEGMENTS_DIR
        self._refs_of = refs_of  # session id -> (its oldest, its newest reference), from the journal
        self._tails: dict[str, _Tail | None] = {}  # sessions recovered this run -> their open file
        self._swept = False
        self._lock = threading.Lock()  # appends (writer) against delete_stream (a worker thread)

    def _dir(self, originator_id: str) -> Path:
        return session_dir(self.root, originator_id)

    # ---- the write path (the writer thread) ------------------------------------------------
    def append(self, stored: list) -> tuple[list, SegmentWrite | None]:
        """Write the large output states of ``stored`` to their sessions' files and make them
        durable; returns the events to insert (references in their place) and what to hand
        to ``committed`` or ``undo``. Raises OSError (e.g. ENOSPC) after undoing its writes."""
        if not any(goes_out_of_line(s.topic, s.state) for s in stored):
            return stored, None
        write = SegmentWrite()
        with self._lock:
            try:
                out = self._write(stored, write)
            except BaseException:
                self._undo_locked(write)
                raise
        return out, write

    def committed(self, write: SegmentWrite | None) -> None:
        """The commit that followed ``append`` went in: the files it rotated away from are
        closed (not before: a refused commit makes them the sessions' tails again)."""
        if write is not None:
            for tail in write.retired:
                _close_quietly(tail.fd)

    def _write(self, stored: list, write: SegmentWrite) -> list:
        self._sweep()
        out = []
        pending: dict[int, tuple[_Tail, int, list]] = {}  # id(tail) -> (tail, start, buffers)
        for item in stored:
            if not goes_out_of_line(item.topic, item.state):
                out.append(item)
                continue
            oid, seq, state = item.originator_id, item.originator_version, item.state
            tail = self._tail_for(oid, seq, write)
            if id(tail) not in pending:
                pending[id(tail)] = (tail, tail.size, [])
            record = pending[id(tail)][2]
            record.append(RECORD.pack(seq, len(state)))
            if type(state) is FrameParts:
                record += (state.head, state.data)
            else:
                record.append(state)
            offset = tail.size + RECORD.size
            tail.size = offset + len(state)
            out.append(type(item)(oid, seq, item.topic, make_ref(tail.first_seq, offset, len(state))))
        for tail, start, buffers in pending.values():
            _write_all(tail.fd, buffers, start)
        for tail, _start, _buffers in pending.values():
            os.fdatasync(tail.fd)  # once per file per tick, before the commit that references it
        for directory in {t.path.parent for t in write.created}:
            fsync_dir(directory)  # a new file's name must be durable before a row names it
        return out

    def _tail_for(self, oid: str, seq: int, write: SegmentWrite) -> _Tail:
        if oid not in self._tails:
            self._recover(oid)
        tail = self._tails[oid]
        if oid not in write.before:
            write.before[oid] = (tail, tail.size if tail else 0)
        if tail is None or tail.size >= SEGMENT_BYTES:
            if tail is not None:
                write.retired.append(tail)  # closed once this commit's bytes are durable
            tail = self._create(oid, seq)
            write.created.append(tail)
            self._tails[oid] = tail
        return tail

    def _create(self, oid: str, seq: int) -> _Tail:
        directory = self._dir(oid)
        if not directory.is_dir():
            directory.mkdir(parents=True, exist_ok=True)
            fsync_dir(directory.parent)
            fsync_dir(directory.parent.parent)
        path = directory / file_name(seq)
        # O_TRUNC is safe: a file named after seq N holds seqs >= N only, and no commit that
        # holds N has gone in yet (a held batch is retried with the same seqs, in order).
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        return _Tail(path, seq, fd, 0)

    def undo(self, write: SegmentWrite | None) -> None:
        """The commit that followed ``append`` was refused: forget what it appended."""
        if write is not None:
            with self._lock:
                self._undo_locked(write)

    def _undo_locked(self, write: SegmentWrite) -> None:
        write.retired = []  # the tails it rotated away from are the sessions' tails again
        for tail in write.created:
            _close_quietly(tail.fd)
            _unlink_quietly(tail.path)
        for oid, (tail, size) in write.before.items():
            self._tails[oid] = tail
            if tail is not None:
                try:
                    os.ftruncate(tail.fd, size)
                    tail.size = size
                except OSError:  # leave the garbage behind (never referenced): start a new file
                    _close_quietly(tail.fd)
                    self._tails[oid] = None

    # ---- recovery (the writer thread, once per session and run) ---------------------------
    def _sweep(self) -> None:
        """Once per run: sessions whose stream has no reference left lose their files (a
        delete_stream or retention that a crash interrupted before the unlink)."""
        if self._swept:
            return
        self._swept = True
        try:
            names = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return
        for oid in names:
            if oid not in self._tails and (self.root / oid).is_dir():
                try:
                    self._recover(oid)
                except ValueError:  # not a name this module makes: not ours to remove
                    continue

    def _recover(self, oid: str) -> None:
        directory = self._dir(oid)
        self._tails[oid] = None
        files = first_seqs(directory)
        if not files:
            return
        oldest, newest = self._refs_of(oid)
        if newest is None:  # nothing references any of them
            shutil.rmtree(directory, ignore_errors=True)
            return
        low, _o, _l = REF.unpack_from(oldest, 1)
        last, offset, length = REF.unpack_from(newest, 1)
        for first in files:
            if first > last or first < low:
                _unlink_quietly(directory / file_name(first))
        path = directory / file_name(last)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:  # the newest reference is gone (retention): start a new file
            return
        end = offset + length
        if os.fstat(fd).st_size > end:
            os.ftruncate(fd, end)  # bytes a crash left after the last committed record
            os.fdatasync(fd)
        self._tails[oid] = _Tail(path, last, fd, end)

    # ---- retention and deletion -------------------------------------------------------------
    def release_through(self, oid: str, seq: int) -> int:
        """Every output row of ``oid`` up to ``seq`` is deleted: unlink the files that hold
        nothing above it. Returns how many went."""
        with self._lock:
            files = first_seqs(self._dir(oid))
            removed = 0
            for first, following in zip(files, files[1:]):  # never the newest: it is appended to
                if following > seq + 1:
                    break
                _unlink_quietly(self._dir(oid) / file_name(first))
                removed += 1
            return removed

    def remove_stream(self, oid: str) -> None:
        with self._lock:
            tail = self._tails.pop(oid, None)
            if tail is not None:
                _close_quietly(tail.fd)
            shutil.rmtree(self._dir(oid), ignore_errors=True)

    # ---- reads (any thread) ------------------------------------------------------------------
    def reader(self) -> SegmentReader:
        return SegmentReader(self.root)

    def close(self) -> None:
        with self._lock:
            for tail in self._tails.values():
                if tail is not None:
                    _close_quietly(tail.fd)
            self._tails.clear()
            self._swept = False

    def sync_dirs(self) -> None:
        """Make retention's unlinks durable (seal: the state dir is then what is checkpointed)."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return
        for name in names:
            if (self.root / name).is_dir():
                fsync_dir(self.root / name)
        fsync_dir(self.root)


def _write_all(fd: int, buffers: list, offset: int) -> None:
    """pwritev until every byte is written: a filling disk gives short writes before ENOSPC."""
    views = [memoryview(b) for b in buffers]
    while views:
        done = os.pwritev(fd, views[:_IOV_MAX], offset)
        offset += done
        while views and done >= len(views[0]):
            done -= len(views[0])
            views.pop(0)
        if done:
            views[0] = views[0][done:]


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
