"""PipeRunner: the ProcessRunner for sessions without a terminal.

The child is started by ``infra.spawn`` (vfork and exec on the spawn thread, never a fork
of the server) with a socketpair for stdin (the loop's write transport, as uvloop's
``subprocess_exec`` gave it before) and a 1 MiB pipe for each of stdout and stderr, read by
the loop without a transport (``infra.process_io.PipeOutput``: one ``os.read`` per journal
chunk, no copy between the kernel and the ``bytes`` the journal stores). A pipe is what a
shell or supervisord gives a program, and a write into one costs the child less than into a
socket (no buffer allocation per write): ``head -c 1G /dev/zero`` into a socketpair had cost
0.42 CPU-s.

``OutputGate``, ``proc_start_time`` and ``status_from_returncode`` live in
``infra.process_io`` and are re-exported here.
"""
from __future__ import annotations

import asyncio
import errno
import os
import signal
import socket
import subprocess

from session_supervisor.domain.ports import ExitStatus, Launch, OutputCallback, StartFailedError
from session_supervisor.infra.process_io import (InputStream, OutputGate, PipeOutput, output_pipe, proc_start_time,
                                                 socketpairs, status_from_returncode)
from session_supervisor.infra.spawn import ExitWatch, reap, spawn
from session_supervisor.infra.start_check import HeldOutput, StartReport, report_env, settle


class PipeHandle:
    """One running process (stdin a socketpair, stdout and stderr pipes), in its own session
    and group."""

    def __init__(self, proc: subprocess.Popen, on_output: OutputCallback) -> None:
        self._loop = asyncio.get_running_loop()
        self._proc = proc
        self._on_output = on_output
        self.pid: int = proc.pid
        self.start_time: int = proc_start_time(self.pid)
        self.gate = OutputGate(abandon=self._close_outputs)
        self._stdin: InputStream | None = None
        self._outputs: list[PipeOutput] = []
        self._open_outputs = 2
        self._status: ExitStatus | None = None
        self._exit = ExitWatch(self._loop, proc, self._on_exited)

    async def connect(self, stdin: list[socket.socket], outputs: list[int]) -> None:
        """Hand our ends (the stdin socket, the stdout and stderr read fds) to the loop; each
        is owned from then on (and taken off its list), what is left when this raises is the
        caller's to close."""
        self._stdin = await InputStream.connect(stdin.pop(0))
        if self._exit.exited:
            self._stdin.finish()
        for name in ("stdout", "stderr"):
            deliver = lambda data, name=name: self._on_output(name, data)  # noqa: E731
            self._outputs.append(PipeOutput(outputs[0], deliver, self._output_closed))
            outputs.pop(0)

    def _output_closed(self) -> None:
        self._open_outputs -= 1
        if self._open_outputs == 0:
            self.gate.mark_eof()

    def _on_exited(self) -> None:
        self.gate.mark_exited()
        if self._stdin is not None:
            self._stdin.finish()

    def _close_outputs(self) -> None:
        for stream in self._outputs:
            stream.close()

    def pause_output(self) -> None:
        self.gate.set_paused(True)
        for stream in self._outputs:
            stream.pause()

    def resume_output(self) -> None:
        self.gate.set_paused(False)
        for stream in self._outputs:
            stream.resume()

    async def write(self, data: bytes) -> None:
        if self._exit.exited:
            raise BrokenPipeError(errno.EPIPE, "process has exited")
        if self._stdin is None:
            raise BrokenPipeError(errno.EPIPE, "stdin is closed")
        await self._stdin.write(data)

    async def close_input(self) -> None:
        """EOF after the queued bytes; returns once flushed or the process is gone.

        Waits as long as the process neither reads nor exits: bound it.
        """
        if self._stdin is not None:
            await self._stdin.close()

    def send_signal(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            # The group is gone; the pid alone is only safe while unreaped.
            if self._status is None:
                try:
                    os.kill(self.pid, signum)
                except ProcessLookupError:
                    pass

    def resize(self, rows: int, cols: int) -> None:
        raise OSError("pty not available")

    async def wait_exited(self) -> ExitStatus:
        if self._status is None:
            await self.gate.wait(need_exit=True)
        if self._status is None:
            if self._stdin is not None:
                self._stdin.abort()  # it has exited: nobody reads what is still queued
            self._close_outputs()
            self._status = status_from_returncode(reap(self._proc))
        return self._status

    def discard(self) -> None:
        """The start failed half-way: kill the group, close our ends, reap once it is gone."""
        self.send_signal(signal.SIGKILL)
        if self._stdin is not None:
            self._stdin.abort()
        self._close_outputs()
        self._exit.close()
        ExitWatch(self._loop, self._proc, lambda: reap(self._proc))


class PipeRunner:
    """Starts processes in a new session, stdin a socketpair, stdout and stderr pipes."""

    async def start(self, launch: Launch, on_output: OutputCallback) -> PipeHandle:
        try:
            return await self._start(launch, on_output)
        except StartFailedError:
            if launch.on_start_failed is not None:
                launch.on_start_failed()
            raise

    async def _start(self, launch: Launch, on_output: OutputCallback) -> PipeHandle:
        if not launch.argv:
            raise StartFailedError("empty argv")
        report = StartReport() if launch.start_report else None
        held = HeldOutput(on_output)
        (stdin_ours, stdin_theirs), = socketpairs(1)
        ours, theirs = [stdin_ours], [stdin_theirs.detach()]
        outputs: list[int] = []
        try:
            for _ in ("stdout", "stderr"):
                read_end, write_end = output_pipe()
                outputs.append(read_end)
                theirs.append(write_end)
        except BaseException:
            _close_all(ours, outputs, theirs)
            if report is not None:
                report.close()
            raise
        try:
            # spawn() closes the child's ends, whatever happens.
            proc = await spawn(launch.argv, launch.cwd, report_env(launch.env, report), tuple(theirs),
                               pass_fds=(report.child_fd,) if report else ())
        except BaseException:
            _close_all(ours, outputs, [])
            if report is not None:
                report.close()
            raise
        if report is not None:
            report.child_started()
        handle = PipeHandle(proc, held)
        try:
            await handle.connect(ours, outputs)
        except BaseException:  # cancelled while connecting: nothing may outlive us
            handle.discard()
            _close_all(ours, outputs, [])  # the ones not handed over
            if report is not None:
                report.close()
            raise
        await settle(report, held, handle)  # the sandbox's word on its command and cwd
        return handle


def _close_all(socks: list[socket.socket], *fd_lists: list[int]) -> None:
    for sock in socks:
        sock.close()
    for fds in fd_lists:
        for fd in fds:
            os.close(fd)
