"""PipeRunner: the ProcessRunner for sessions without a terminal.

Output arrives through a ``SubprocessProtocol`` rather than StreamReaders so
every chunk the loop reads goes straight to ``on_output`` with no extra
buffering or copies: the ingest path depends on that (hundreds of MB/s).

Read sizes, measured with a 2 GiB ``dd bs=1M`` child: asyncio's
``_UnixReadPipeTransport`` reads at most ``max_size = 256 KiB`` per
``os.read`` from a 64 KiB pipe, ~0.4-0.5 GB/s. A 1 MiB pipe
(``F_SETPIPE_SZ``) gives 1.7-2.1 GB/s, and 1 MiB reads another 10-30%, so
chunks of up to 1 MiB reach ``on_output``. ``os.read(fd, n)`` allocates n
bytes up front; from 128 KiB on glibc mmaps that (~25 us per read, however
little arrives) unless MALLOC_MMAP_THRESHOLD_ is raised as ingest-path.md
recommends; 256 KiB already pays this, so 1 MiB costs nothing extra.
uvloop reads into a fixed 256,000-byte loop buffer (``UV_STREAM_RECV_BUF_SIZE``,
not configurable) and uses socketpairs, not pipes, for subprocess stdio, so
there both knobs are no-ops (0.9-3 GB/s, noisy, either way).

``OutputGate``, ``proc_start_time`` and ``status_from_returncode`` are shared
with ``infra.pty_runner``.
"""
from __future__ import annotations

import asyncio
import errno
import fcntl
import os
from typing import Callable

from session_supervisor.domain.ports import ExitStatus, Launch, OutputCallback, StartFailedError

_STREAMS = ("stdin", "stdout", "stderr")
_PIPE_CAPACITY = 1 << 20
_READ_SIZE = 1 << 20
EOF_GRACE_S = 1.0  # after exit, how long a grandchild may hold our output open


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


class _PipeProtocol(asyncio.SubprocessProtocol):
    def __init__(self, on_output: OutputCallback) -> None:
        self._on_output = on_output
        self._transport: asyncio.SubprocessTransport | None = None
        self.gate = OutputGate(abandon=self._close_outputs)
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.stdin_done = asyncio.Event()  # stdin closed, or nobody left to read it
        self.stdin_error: BaseException | None = None
        self._open_outputs = 2

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def _close_outputs(self) -> None:
        for fd in (1, 2):
            pipe = self._transport.get_pipe_transport(fd) if self._transport else None
            if pipe is not None:
                pipe.close()

    def pipe_data_received(self, fd: int, data: bytes) -> None:  # the hot path
        self._on_output(_STREAMS[fd], data)

    def pipe_connection_lost(self, fd: int, exc: BaseException | None) -> None:
        if fd == 0:
            self.stdin_error = exc
            self.stdin_done.set()
            self.can_write.set()  # wake writers so they see the pipe is gone
            return
        self._open_outputs -= 1
        if self._open_outputs == 0:
            self.gate.mark_eof()

    def process_exited(self) -> None:
        self.gate.mark_exited()
        self.stdin_done.set()
        self.can_write.set()

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()


class PipeHandle:
    """One running process with piped stdio, in its own session and group."""

    def __init__(self, transport: asyncio.SubprocessTransport, protocol: _PipeProtocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self.pid: int = transport.get_pid()
        self.start_time: int = proc_start_time(self.pid)

    def _outputs(self) -> list[asyncio.ReadTransport]:
        pipes = (self._transport.get_pipe_transport(fd) for fd in (1, 2))
        return [p for p in pipes if p is not None and not p.is_closing()]

    def pause_output(self) -> None:
        # Soft, like StreamReader's: both loops hand chunks to the protocol
        # through call_soon, so one chunk already read (<= 1 MiB) may still
        # arrive after this returns. Back-pressure thresholds absorb that.
        self._protocol.gate.set_paused(True)
        for pipe in self._outputs():
            pipe.pause_reading()

    def resume_output(self) -> None:
        self._protocol.gate.set_paused(False)
        for pipe in self._outputs():
            pipe.resume_reading()

    def _open_stdin(self) -> asyncio.WriteTransport:
        stdin = self._transport.get_pipe_transport(0)
        if stdin is None or stdin.is_closing() or self._protocol.stdin_done.is_set():
            raise BrokenPipeError(errno.EPIPE, "stdin is closed")
        if self._transport.get_returncode() is not None:
            raise BrokenPipeError(errno.EPIPE, "process has exited")
        return stdin

    async def write(self, data: bytes) -> None:
        stdin = self._open_stdin()
        stdin.write(data)
        while not self._protocol.can_write.is_set():
            await self._protocol.can_write.wait()
        # The transport swallows write errors and reports them as a lost pipe.
        if self._protocol.stdin_error is not None:
            raise BrokenPipeError(errno.EPIPE, f"stdin lost: {self._protocol.stdin_error}")
        if self._protocol.stdin_done.is_set() and stdin.get_write_buffer_size():
            raise BrokenPipeError(errno.EPIPE, "process exited before reading its input")

    async def close_input(self) -> None:
        """EOF after the queued bytes; returns once flushed or the process is gone.

        Waits as long as the process neither reads nor exits: bound it.
        """
        stdin = self._transport.get_pipe_transport(0)
        if stdin is None or self._protocol.stdin_done.is_set():
            return
        stdin.close()  # flushes queued bytes before closing the fd
        await self._protocol.stdin_done.wait()

    def send_signal(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            # The group is gone; the pid alone is only safe while unreaped.
            if self._transport.get_returncode() is None:
                try:
                    os.kill(self.pid, signum)
                except ProcessLookupError:
                    pass

    def resize(self, rows: int, cols: int) -> None:
        raise OSError("pty not available")

    async def wait_exited(self) -> ExitStatus:
        await self._protocol.gate.wait(need_exit=True)
        returncode = self._transport.get_returncode()
        self._transport.close()  # releases stdin and the pipes; no kill, it has exited
        return status_from_returncode(returncode)


class PipeRunner:
    """Starts processes with stdin/stdout/stderr pipes in a new session."""

    async def start(self, launch: Launch, on_output: OutputCallback) -> PipeHandle:
        if not launch.argv:
            raise StartFailedError("empty argv")
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _PipeProtocol(on_output),
                *launch.argv,
                cwd=launch.cwd or None,
                env=launch.env,
                start_new_session=True,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except (OSError, ValueError, TypeError) as exc:
            # OSError: missing/non-executable argv[0], bad cwd; ValueError:
            # NUL bytes or '=' in env names, which exec cannot express.
            raise StartFailedError(_describe_start_failure(exc, launch)) from exc
        _tune_outputs(transport)
        return PipeHandle(transport, protocol)


def _describe_start_failure(exc: Exception, launch: Launch) -> str:
    # uvloop's errors carry no filename, and a bad cwd looks like a bad argv[0].
    if isinstance(exc, OSError) and exc.filename is None:
        return f"{exc}: argv[0]={launch.argv[0]!r} cwd={launch.cwd!r}"
    return str(exc) or type(exc).__name__


def _tune_outputs(transport: asyncio.SubprocessTransport) -> None:
    for fd in (1, 2):
        pipe = transport.get_pipe_transport(fd)
        if pipe is None or pipe.is_closing():  # a quick child may be done already
            continue
        if hasattr(pipe, "max_size"):  # asyncio's pure-Python transport only
            pipe.max_size = _READ_SIZE
        fileobj = pipe.get_extra_info("pipe") or pipe.get_extra_info("socket")
        try:
            # A bigger pipe lets the child write ahead while the loop is busy
            # (GIL shared with the journal writer); 1 MiB is the default
            # unprivileged maximum (/proc/sys/fs/pipe-max-size).
            fcntl.fcntl(fileobj.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_CAPACITY)
        except (AttributeError, OSError):
            pass  # a socketpair (uvloop), or over the per-user pipe budget

