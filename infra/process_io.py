"""What both runners share: the child's identity and status, when ``wait_exited`` may
return (``OutputGate``), and our ends of its stdio.

Output comes through a pipe of 1 MiB (``output_pipe``) read by ``PipeOutput``: the loop
watches the fd and each ``os.read`` of READ_BYTES becomes one ``bytes`` handed straight to
``on_output``. A loop transport read into its own buffer and copied out (uvloop: 256,000
bytes at a time, so every 256 KiB chunk of the journal was also joined from two reads), and a
socketpair's 208 KiB queue made the child and the loop take turns every 200 KiB: on a busy
2-CPU machine each turn waits for a CPU. The terminal relay's output (``infra.pty_relay``)
stays a socket read by the loop's transport (``OutputStream``): its ``cat`` writes what one
read of the master gave it, about 4 KiB, so the loop wakes for little each time, and there
uvloop's read loop in C costs less per wake-up than ``PipeOutput``'s in Python (a PTY
ingest measured 8-9 CPU-s per GB through the transport, 11-15 through ``PipeOutput``).
Input goes through the loop's write transport:
ordered writes, flow control (``write`` waits while more than 64 KiB is queued), and the
loss of the reader reported as ``BrokenPipeError``.
"""
from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import socket
from typing import Callable

from session_supervisor.domain.ports import ExitStatus, StartFailedError

EOF_GRACE_S = 1.0  # after exit, how long a grandchild may hold our output open
_READ_SIZE = 1 << 20
# One read is one journal chunk (the write path's 256 KiB runs): a run is then a single bytes
# object, never a join of two reads. ``os.read`` allocates what it is asked for up front, from
# the heap (the server raises glibc's mmap threshold), and gives back what it did not fill.
READ_BYTES = 256 * 1024
READS_PER_WAKE = 8  # up to 2 MiB per loop wake-up: more than the pipe holds
PIPE_BYTES = 1 << 20  # /proc/sys/fs/pipe-max-size's default: no privilege needed
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def proc_start_time(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat: lets the reconciler tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0
    # comm (field 2) may contain spaces and ')', so split after the last ')'.
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return int(fields[19])  # fields[0] is field 3
    except (IndexError, ValueError):
        return 0


def status_from_returncode(returncode: int) -> ExitStatus:
    """asyncio/os convention (-N = killed by N) to the Go one (exit_code -1)."""
    if returncode >= 0:
        return ExitStatus(exit_code=returncode)
    return ExitStatus(exit_code=-1, signal=-returncode)


class OutputGate:
    """Decides when ``wait_exited()`` may return.

    Normally once output reached EOF. But a grandchild that inherited the
    output (``sleep 100 &``) keeps it open after the process exited, so then
    we give up after ``grace_s`` and call ``abandon``. Time spent paused does
    not count: unread bytes are still queued behind our own back-pressure,
    and dropping them would lose output the process really wrote.
    """

    def __init__(self, abandon: Callable[[], None], grace_s: float = EOF_GRACE_S) -> None:
        self._abandon = abandon
        self._grace_s = grace_s
        self.exited = False
        self.eof = False
        self.paused = False
        self._changed = asyncio.Event()

    def mark_exited(self) -> None:
        self.exited = True
        self._changed.set()

    def mark_eof(self) -> None:
        self.eof = True
        self._changed.set()

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self._changed.set()

    async def wait(self, *, need_exit: bool) -> None:
        """Return once output is done (EOF or abandoned) and, if asked, the process exited."""
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        while not self.eof or (need_exit and not self.exited):
            if self.eof or not self.exited or self.paused:
                deadline = None  # the grace clock restarts after a pause
            elif deadline is None:
                deadline = loop.time() + self._grace_s
            elif loop.time() >= deadline:
                self._abandon()
                self.mark_eof()
                break
            # Safe with several waiters: state is re-checked before each wait
            # and only loop callbacks set the event, never between check and wait.
            self._changed.clear()
            try:
                async with asyncio.timeout_at(deadline):
                    await self._changed.wait()
            except TimeoutError:
                pass



class OutputStream(asyncio.Protocol):
    """One output socket: each chunk read goes straight to ``deliver`` (the hot path)."""

    def __init__(self, deliver: Callable[[bytes], None], on_closed: Callable[[], None]) -> None:
        self._deliver = deliver
        self._on_closed = on_closed
        self.transport: asyncio.ReadTransport | None = None

    @classmethod
    async def connect(cls, sock: socket.socket, deliver: Callable[[bytes], None],
                      on_closed: Callable[[], None]) -> "OutputStream":
        """The loop's transport owns ``sock`` from here on."""
        stream = cls(deliver, on_closed)
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: stream, sock)
        if hasattr(transport, "max_size"):  # asyncio's pure-Python transport: 256 KiB reads
            transport.max_size = _READ_SIZE  # uvloop reads up to 256,000 bytes, not settable
        return stream

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._deliver(data)

    def eof_received(self) -> None:
        return None  # the transport closes itself, then connection_lost

    def connection_lost(self, exc: BaseException | None) -> None:
        self._on_closed()

    def pause(self) -> None:
        # Both loops hand each chunk to the protocol as they read it: after this returns
        # nothing more arrives until resume().
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class PipeOutput:
    """Our end of an output pipe, read by the loop: each read goes straight to ``deliver``.

    ``pause`` stops reading at once (also between two reads of one wake-up), so after it
    returns nothing more arrives until ``resume``. End of file, a read error, or ``close``
    call ``on_closed`` once, from the loop.
    """

    def __init__(self, fd: int, deliver: Callable[[bytes], None], on_closed: Callable[[], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._fd: int | None = fd
        self._deliver = deliver
        self._on_closed: Callable[[], None] | None = on_closed
        self._paused = False
        os.set_blocking(fd, False)  # our end only: the child's end of a pipe is its own file
        self._loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        fd = self._fd
        for _ in range(READS_PER_WAKE):
            try:
                data = os.read(fd, READ_BYTES)
            except BlockingIOError:
                return
            except OSError:  # EIO and the like: nothing more will come
                data = b""
            if not data:
                self.close()
                return
            self._deliver(data)
            if self._paused or self._fd is None:
                return
            if len(data) < READ_BYTES:  # drained: wait for the next wake-up
                return

    def pause(self) -> None:
        if self._fd is not None and not self._paused:
            self._paused = True
            self._loop.remove_reader(self._fd)

    def resume(self) -> None:
        if self._fd is not None and self._paused:
            self._paused = False
            self._loop.add_reader(self._fd, self._readable)

    def close(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        if not self._paused:
            self._loop.remove_reader(fd)
        os.close(fd)
        closed, self._on_closed = self._on_closed, None
        self._loop.call_soon(closed)


def output_pipe() -> tuple[int, int]:
    """(our read end, the child's write end), close-on-exec, 1 MiB when the kernel allows
    (past the per-user pipe budget an unprivileged server keeps the 64 KiB default); out of
    descriptors: StartFailedError."""
    try:
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
    except OSError as exc:
        raise StartFailedError(f"no descriptors for the output of the process: {exc}") from exc
    try:
        fcntl.fcntl(read_end, _F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass
    return read_end, write_end


class InputStream(asyncio.BaseProtocol):
    """The input socket: ordered writes with flow control, its loss as BrokenPipeError."""

    def __init__(self) -> None:
        self.transport: asyncio.WriteTransport | None = None
        self._can_write = asyncio.Event()
        self._can_write.set()
        self.done = asyncio.Event()  # closed, or nobody left to read it
        self._error: BaseException | None = None

    @classmethod
    async def connect(cls, sock: socket.socket) -> "InputStream":
        stream = cls()
        await asyncio.get_running_loop().connect_write_pipe(lambda: stream, sock)
        return stream

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._error = exc
        self.finish()

    def finish(self) -> None:
        """Nobody reads any more (it closed, or the process exited): wake the writers."""
        self.done.set()
        self._can_write.set()

    @property
    def open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing() and not self.done.is_set()

    async def write(self, data: bytes) -> None:
        if not self.open:
            raise BrokenPipeError(errno.EPIPE, "input is closed")
        transport = self.transport
        transport.write(data)
        while not self._can_write.is_set():
            await self._can_write.wait()
        # The transport swallows write errors and reports them as a lost pipe.
        if self._error is not None:
            raise BrokenPipeError(errno.EPIPE, f"input lost: {self._error}")
        if self.done.is_set() and transport.get_write_buffer_size():
            raise BrokenPipeError(errno.EPIPE, "the reader went away before reading the input")

    async def close(self) -> None:
        """EOF after the queued bytes; returns once flushed or the reader is gone (unbounded
        while it neither reads nor goes away)."""
        if self.transport is None or self.done.is_set():
            return
        self.transport.close()  # flushes queued bytes before closing the fd
        await self.done.wait()

    def abort(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()


def socketpairs(count: int) -> list[tuple[socket.socket, socket.socket]]:
    """``count`` (ours, the child's) pairs, close-on-exec; out of descriptors: StartFailedError."""
    pairs: list[tuple[socket.socket, socket.socket]] = []
    try:
        for _ in range(count):
            pairs.append(socket.socketpair())
    except OSError as exc:  # EMFILE
        for pair in pairs:
            for sock in pair:
                sock.close()
        raise StartFailedError(f"no descriptors for the stdio of the process: {exc}") from exc
    return pairs
