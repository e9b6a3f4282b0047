"""PtyRunner: the ProcessRunner for sessions with a terminal.

The server opens the pseudo-terminal; the child is started by ``infra.spawn`` (vfork and
exec, never a fork of the server: ptyprocess forked it, 2.5-6 ms on the loop) with the
terminal as its stdio, through util-linux's ``setsid --ctty``: a new session whose
controlling terminal it is, so job control, ^C and SIGWINCH work. ``setsid`` must not be
started as a group leader (it would fork and exit), so the spawn keeps the server's
session and ``setsid`` makes the new one; its pid is the command's pid, session and
process group. Without ``setsid`` on PATH a ``preexec_fn`` does the same in the child,
which costs a fork again.

``setsid`` looks the command up with the launch env's PATH, as the pipe runner does; we
check first that it is there and executable, so a bad argv[0] fails the start instead
of printing an error on the terminal.

The terminal's output and input go through ``infra.pty_relay`` (two ``cat`` processes and
the loop's socket transports); the server keeps the master only to set the window size and
to hang up by closing it.
"""
from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import shutil
import signal
import struct
import subprocess
import termios

from session_supervisor.domain.ports import ExitStatus, Launch, OutputCallback, StartFailedError
from session_supervisor.infra.process_io import OutputGate, proc_start_time, status_from_returncode
from session_supervisor.infra.pty_relay import PtyRelay
from session_supervisor.infra.spawn import ExitWatch, reap, spawn
from session_supervisor.infra.start_check import HeldOutput, StartReport, report_env, settle

_SETSID = shutil.which("setsid") or shutil.which("setsid", path="/usr/bin:/bin")


def _resolve_executable(argv0: str, cwd: str, env: dict[str, str]) -> str:
    if "/" in argv0:
        path = os.path.join(cwd, argv0)  # an absolute argv0 wins in join
        if not os.path.exists(path):
            raise StartFailedError(f"exec: {argv0!r}: no such file or directory")
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise StartFailedError(f"exec: {argv0!r}: Permission denied")
        return path
    found = shutil.which(argv0, path=env.get("PATH", os.defpath))
    if found is None:
        raise StartFailedError(f'exec: "{argv0}": executable file not found in $PATH')
    return os.path.abspath(found)


def _take_terminal() -> None:
    """The fallback without setsid: runs in the (forked) child, after its setsid()."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def set_window_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class PtyHandle:
    """One process on a pseudo-terminal; the master is closed (hung up) exactly once."""

    def __init__(self, proc: subprocess.Popen, master: int, on_output: OutputCallback) -> None:
        self._loop = asyncio.get_running_loop()
        self._proc = proc
        self._fd = master
        self._on_output = on_output
        self.pid: int = proc.pid
        self.start_time: int = proc_start_time(self.pid)
        self._master_open = True
        self._relay = PtyRelay(master)  # owns the master from here on
        self._status: ExitStatus | None = None
        self._gate = OutputGate(abandon=self._close_master)
        self._exit = ExitWatch(self._loop, proc, self._gate.mark_exited)

    async def start_relay(self) -> None:
        """If this raises, the caller discards the handle."""
        await self._relay.start(self._deliver, self._on_eof)

    # -- output --------------------------------------------------------------

    def _deliver(self, data: bytes) -> None:
        if self._master_open:  # after a hang-up, nothing more is handed on
            self._on_output("pty", data)

    def _on_eof(self) -> None:
        self._close_master()

    def pause_output(self) -> None:
        self._gate.set_paused(True)
        self._relay.pause()

    def resume_output(self) -> None:
        self._gate.set_paused(False)
        self._relay.resume()

    def _close_master(self) -> None:
        """EOF, hang-up, abandoned output or a failed start all end here."""
        if not self._master_open:
            return
        self._master_open = False
        self._relay.stop()  # closes the master, kills the relay's cats holding copies
        self._gate.mark_eof()

    # -- input ---------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        if not self._master_open:
            raise BrokenPipeError(errno.EPIPE, "terminal closed")
        try:
            await self._relay.write(data)
        except BrokenPipeError as exc:  # the relay's cat died: EIO, the slave side is gone
            raise BrokenPipeError(errno.EPIPE, f"terminal hung up: {exc}") from exc

    async def close_input(self) -> None:
        # Closing the master hangs the terminal up: the kernel sends SIGHUP to the session.
        # Input written before reaches the terminal first; output still unread at that
        # moment is lost by design.
        if self._master_open:
            await self._relay.drain_input()
        self._close_master()

    def resize(self, rows: int, cols: int) -> None:
        if not self._master_open:
            raise OSError(errno.EBADF, "terminal is closed")
        set_window_size(self._fd, rows, cols)

    # -- process -------------------------------------------------------------

    def send_signal(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            if self._status is None:  # after reaping the pid may be reused
                try:
                    os.kill(self.pid, signum)
                except ProcessLookupError:
                    pass

    async def wait_exited(self) -> ExitStatus:
        if self._status is None:
            # The exit too, not EOF alone: a grandchild may hold the terminal open.
            await self._gate.wait(need_exit=True)
        if self._status is None:
            self._close_master()
            self._status = status_from_returncode(reap(self._proc))
        await self._relay.wait_stopped()  # nothing of this attempt outlives it
        return self._status

    def discard(self) -> None:
        """The start failed half-way: kill the group, hang up, reap once it is gone."""
        self.send_signal(signal.SIGKILL)
        self._close_master()
        self._exit.close()
        ExitWatch(self._loop, self._proc, lambda: reap(self._proc))


class PtyRunner:
    """Starts processes on a new pseudo-terminal of ``launch.terminal`` size."""

    async def start(self, launch: Launch, on_output: OutputCallback) -> PtyHandle:
        try:
            return await self._start(launch, on_output)
        except StartFailedError:
            if launch.on_start_failed is not None:
                launch.on_start_failed()
            raise

    async def _start(self, launch: Launch, on_output: OutputCallback) -> PtyHandle:
        if launch.terminal is None:
            raise ValueError("PtyRunner needs launch.terminal")
        if not launch.argv:
            raise StartFailedError("empty argv")
        rows, cols = launch.terminal.rows, launch.terminal.cols
        if not (0 < rows < 65536 and 0 < cols < 65536):
            raise StartFailedError("rows and cols must be between 1 and 65535")
        cwd = launch.cwd or os.getcwd()
        _resolve_executable(launch.argv[0], cwd, launch.env)
        try:
            master, slave = os.openpty()  # both close-on-exec, and blocking (see pty_relay)
        except OSError as exc:
            raise StartFailedError(f"no pseudo-terminal: {exc}") from exc
        try:
            set_window_size(master, rows, cols)
            if _SETSID is not None:
                argv, options = [_SETSID, "--ctty", "--", *launch.argv], {"new_session": False}
            else:
                argv, options = list(launch.argv), {"preexec_fn": _take_terminal}
        except BaseException:
            os.close(slave)
            os.close(master)
            raise
        report = StartReport() if launch.start_report else None
        held = HeldOutput(on_output)
        try:
            proc = await spawn(argv, cwd, report_env(launch.env, report), (slave, slave, slave),  # closes slave
                               pass_fds=(report.child_fd,) if report else (), **options)
        except BaseException:
            os.close(master)
            if report is not None:
                report.close()
            raise
        if report is not None:
            report.child_started()
        handle = PtyHandle(proc, master, held)
        try:
            await handle.start_relay()
        except BaseException as exc:
            handle.discard()
            if report is not None:
                report.close()
            if isinstance(exc, OSError):
                raise StartFailedError(f"terminal relay: {exc}") from exc
            raise
        await settle(report, held, handle)  # the sandbox's word on its command and cwd
        return handle
