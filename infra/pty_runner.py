"""PtyRunner: the ProcessRunner for sessions with a terminal.

ptyprocess forks and execs; from then on we own the master fd and the pid and
never call PtyProcess's blocking helpers (read, wait, isalive, close: the
latter sleeps and may SIGKILL). The child is a session leader (setsid), so
its pid is also its process group id.

ptyprocess quirks handled here:

- It runs Python in the forked child. Anything that raises there outside its
  own error reporting (``os.chdir`` for a bad cwd, ``execvpe`` with a bad env)
  would leave a *copy of this daemon* running. So the child does exactly one
  thing, in ``preexec_fn`` (whose errors ptyprocess reports back): chdir and
  execve. The exec ptyprocess would do next is never reached.
- It resolves argv[0] with the daemon's PATH; we resolve it first with the
  launch env's PATH, as the pipe runner (subprocess) does.
- When the exec fails it raises without returning the instance, leaving a
  zombie and an open master fd; ``_TrackedPty`` lets us clean both up.
"""
from __future__ import annotations

import asyncio
import errno
import os
import shutil
import signal
from functools import partial

from ptyprocess import PtyProcess

from session_supervisor.domain.ports import ExitStatus, Launch, OutputCallback, StartFailedError
from session_supervisor.infra.pipe_runner import OutputGate, proc_start_time, status_from_returncode

_DRAIN_LIMIT = 256 * 1024  # per wake-up, so one busy PTY cannot starve the loop
_READ_SIZE = 65536  # the kernel hands out at most ~4 KiB per pty read anyway


def _exec_in_child(cwd: str, executable: str, argv: list[str], env: dict[str, str]) -> None:
    # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal survives exec:
    # `yes | head -1` would then complain about EPIPE instead of dying quietly.
    # subprocess (the pipe runner) restores these too.
    for signum in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)
    os.chdir(cwd)
    os.execve(executable, argv, env)


def _resolve_executable(argv0: str, cwd: str, env: dict[str, str]) -> str:
    if "/" in argv0:
        return os.path.join(cwd, argv0)  # an absolute argv0 wins in join
    found = shutil.which(argv0, path=env.get("PATH", os.defpath))
    if found is None:
        raise StartFailedError(f'exec: "{argv0}": executable file not found in $PATH')
    return os.path.abspath(found)


class _TrackedPty(PtyProcess):
    """Remembers each instance spawn() creates, even when spawn() then raises."""

    created: list[PtyProcess]

    def __init__(self, pid: int, fd: int) -> None:
        super().__init__(pid, fd)
        type(self).created.append(self)


class PtyHandle:
    """One process on a pseudo-terminal; the master fd is closed exactly once."""

    def __init__(self, proc: PtyProcess, on_output: OutputCallback) -> None:
        self._loop = asyncio.get_running_loop()
        self._proc = proc
        self._fd: int = proc.fd
        self._on_output = on_output
        self.pid: int = proc.pid
        self.start_time: int = proc_start_time(self.pid)
        self._master_open = True
        self._reading = False
        self._write_lock = asyncio.Lock()
        self._write_waiter: asyncio.Future[None] | None = None
        self._reaper: asyncio.Future[tuple[int, int]] | None = None
        self._status: ExitStatus | None = None
        self._gate = OutputGate(abandon=self._close_master)
        os.set_blocking(self._fd, False)
        self._pidfd = self._watch_exit()
        self._start_reading()

    # -- output --------------------------------------------------------------

    def _start_reading(self) -> None:
        if self._master_open and not self._reading:
            self._loop.add_reader(self._fd, self._on_readable)
            self._reading = True

    def _stop_reading(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False

    def _on_readable(self) -> None:
        # A PTY master yields at most ~4 KiB per read: drain what is there now and hand it
        # on as one piece, so per-read Python work is paid once per wake-up, not per 4 KiB.
        chunks = []
        size = 0
        eof = False
        while size < _DRAIN_LIMIT:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                break
            except OSError:
                # EIO is how Linux reports that every slave fd is closed; any
                # other read error ends the stream too, there is nothing to retry.
                data = b""
            if not data:
                eof = True
                break
            chunks.append(data)
            size += len(data)
        if chunks:
            self._on_output("pty", chunks[0] if len(chunks) == 1 else b"".join(chunks))
        if eof:
            self._close_master()

    def pause_output(self) -> None:
        self._gate.set_paused(True)
        self._stop_reading()

    def resume_output(self) -> None:
        self._gate.set_paused(False)
        self._start_reading()

    def _close_master(self) -> None:
        """EOF, hang-up, abandoned output or a failed start all end here."""
        if not self._master_open:
            return
        self._stop_reading()
        self._loop.remove_writer(self._fd)
        self._master_open = False
        self._proc.fileobj.close()  # the only close of the fd
        self._proc.closed = True  # keeps PtyProcess.__del__ from sleeping/killing
        if self._write_waiter is not None and not self._write_waiter.done():
            self._write_waiter.set_exception(BrokenPipeError(errno.EPIPE, "terminal closed"))
        self._gate.mark_eof()

    # -- input ---------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        async with self._write_lock:  # keeps concurrent writes from interleaving
            view = memoryview(data)
            while view:
                if not self._master_open:
                    raise BrokenPipeError(errno.EPIPE, "terminal closed")
                try:
                    written = os.write(self._fd, view)
                except BlockingIOError:
                    await self._wait_writable()
                    continue
                except OSError as exc:  # EIO: the slave side is gone
                    raise BrokenPipeError(errno.EPIPE, f"terminal hung up: {exc}") from exc
                view = view[written:]

    async def _wait_writable(self) -> None:
        waiter = self._loop.create_future()
        self._write_waiter = waiter
        self._loop.add_writer(self._fd, lambda: waiter.done() or waiter.set_result(None))
        try:
            await waiter
        finally:
            self._write_waiter = None
            if self._master_open:
                self._loop.remove_writer(self._fd)

    async def close_input(self) -> None:
        # Closing the master hangs the terminal up: the kernel sends SIGHUP to
        # the session. Output still unread at that moment is lost by design.
        async with self._write_lock:
            self._close_master()

    def resize(self, rows: int, cols: int) -> None:
        if not self._master_open:
            raise OSError(errno.EBADF, "terminal is closed")
        self._proc.setwinsize(rows, cols)

    # -- process -------------------------------------------------------------

    def send_signal(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            if self._reaper is None:  # after reaping the pid may be reused
                try:
                    os.kill(self.pid, signum)
                except ProcessLookupError:
                    pass

    def _watch_exit(self) -> int | None:
        """A pidfd tells us the child exited without reaping it (Linux 5.3+).

        It lets wait_exited() stop waiting for EOF when a grandchild holds the
        terminal, and keeps waitpid from parking an executor thread on a child
        that closed its terminal but lives on.
        """
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            return None
        self._loop.add_reader(pidfd, self._on_exited)
        return pidfd

    def _on_exited(self) -> None:
        self._close_pidfd()
        self._gate.mark_exited()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    async def wait_exited(self) -> ExitStatus:
        if self._status is not None:
            return self._status
        # Without a pidfd we cannot see the exit, so EOF alone must do.
        await self._gate.wait(need_exit=self._gate.exited or self._pidfd is not None)
        if self._reaper is None:
            self._close_master()
            # An executor future, not a task: it survives a cancelled caller
            # (stop_gracefully's timeouts), so the status is never lost.
            self._reaper = self._loop.run_in_executor(None, os.waitpid, self.pid, 0)
        _, raw = await asyncio.shield(self._reaper)
        self._close_pidfd()
        self._status = status_from_returncode(os.waitstatus_to_exitcode(raw))
        return self._status


class PtyRunner:
    """Starts processes on a new pseudo-terminal of ``launch.terminal`` size."""

    async def start(self, launch: Launch, on_output: OutputCallback) -> PtyHandle:
        if launch.terminal is None:
            raise ValueError("PtyRunner needs launch.terminal")
        if not launch.argv:
            raise StartFailedError("empty argv")
        rows, cols = launch.terminal.rows, launch.terminal.cols
        if not (0 < rows < 65536 and 0 < cols < 65536):
            raise StartFailedError("rows and cols must be between 1 and 65535")
        cwd = launch.cwd or os.getcwd()
        executable = _resolve_executable(launch.argv[0], cwd, launch.env)
        # A fresh subclass per start keeps its `created` list private to this call.
        tracked = type("_TrackedPtyOnce", (_TrackedPty,), {"created": []})
        try:
            proc = tracked.spawn(
                [executable],
                dimensions=(rows, cols),
                preexec_fn=partial(_exec_in_child, cwd, executable, list(launch.argv), launch.env),
            )
        except Exception as exc:  # everything spawn raises means "did not start"
            for orphan in tracked.created:
                await _discard(orphan)
            raise StartFailedError(str(exc) or type(exc).__name__) from exc
        return PtyHandle(proc, on_output)


async def _discard(proc: PtyProcess) -> None:
    """Close the fd and reap a child whose exec failed (it has already _exit'ed)."""
    proc.fileobj.close()
    proc.closed = True
    await asyncio.get_running_loop().run_in_executor(None, os.waitpid, proc.pid, 0)
