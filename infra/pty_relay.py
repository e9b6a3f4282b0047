"""Two ``cat`` processes between a PTY master and the event loop's sockets.

A PTY master yields at most ~4 KiB per read, and only as fast as its reader comes back: the
kernel buffers about 64 KiB between the terminal and its reader, so a writer such as
``cat file`` stalls whenever the reader is late. A reader thread in the server is late
whenever it waits for the GIL or a CPU the loop and the journal writer also want, and
every 4 KiB cost it a Python read and a GIL hand-off: under load the ingest was 0.4-0.6x a
plain reader, the server spending 0.8-1.2 CPU-s per 64 MiB. A ``cat`` copying the master
into a socket with 1 MiB of buffer (10 ms at 100 MB/s), read by the loop's own transport
in chunks of up to 256 KB: 1.1-1.4x the plain reader in the same conditions, 0.5-0.66
CPU-s in the server (measured side by side, ``--only pty``). Back-pressure is the
transport's ``pause_reading``: the socket fills, ``cat`` blocks, then the terminal, then
the program.

Both ``cat``s die with the server (``PR_SET_PDEATHSIG``, set by util-linux's ``setpriv``
before it execs ``cat``; their parent is the spawn thread, which lives as long as the
server): a ``cat`` holding the master would otherwise keep the terminal from hanging up
when the server is killed, leaving the program waiting on it forever.

``cat`` needs the master in blocking mode, and O_NONBLOCK belongs to the open file, which
every copy of the master shares: so the server never reads or writes the master itself
(only ``ioctl`` for the window size) and a second ``cat`` copies input from a socket into
it. Both hold a copy of the master: hanging up (``stop``) kills them as well as closing
ours. The output ``cat`` ends by itself once the terminal's last slave fd is closed
(EIO), after copying every byte, so the socket's EOF is the terminal's. Both run outside
the sandbox with the server's rights and touch nothing but their two descriptors.
"""
from __future__ import annotations

import asyncio
import ctypes
import os
import shutil
import signal
import socket
import subprocess
from typing import Callable

from session_supervisor.domain.ports import StartFailedError
from session_supervisor.infra.process_io import InputStream, OutputStream, socketpairs
from session_supervisor.infra.spawn import ExitWatch, reap, spawn

CAT = shutil.which("cat") or shutil.which("cat", path="/usr/bin:/bin")
SETPRIV = shutil.which("setpriv") or shutil.which("setpriv", path="/usr/bin:/bin")
_PR_SET_PDEATHSIG = 1
_BUFFER = 1 << 20


class _Cat:
    """One relay process, reaped as soon as it exits."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.exited = asyncio.Event()
        self._watch = ExitWatch(asyncio.get_running_loop(), proc, self._reap)

    def _reap(self) -> None:
        reap(self.proc)
        self.exited.set()

    def kill(self) -> None:
        if not self.exited.is_set():
            os.kill(self.proc.pid, signal.SIGKILL)  # unreaped, so the pid is still this cat's


class PtyRelay:
    """Output and input of one master through two ``cat`` processes; it owns the master.

    ``stop`` may come while ``start`` is still under way (the output's EOF, a hang-up):
    what ``start`` brings up after that is taken down at once.
    """

    def __init__(self, master: int) -> None:
        self._master: int | None = master
        self._cats: list[_Cat] = []
        self._output: OutputStream | None = None
        self._input: InputStream | None = None

    @property
    def stopped(self) -> bool:
        return self._master is None

    async def start(self, deliver: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        """Raises OSError or StartFailedError when it cannot; then ``stop`` cleans up."""
        if CAT is None:
            raise StartFailedError("the terminal relay needs cat (coreutils) on PATH")
        (out_ours, out_theirs), (in_ours, in_theirs) = socketpairs(2)
        ours = [out_ours, in_ours]
        try:
            out_theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _BUFFER)
            out_ours.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _BUFFER)
            # spawn() closes what it is given; cat's complaint at EIO goes to /dev/null.
            argv, options = _relay_command()
            for stdio in ((self._dup, out_theirs.detach, _devnull), (in_theirs.detach, self._dup, _devnull)):
                self._adopt(await spawn(argv, "/", {}, _open_all(*stdio), **options))
            self._output = await OutputStream.connect(ours.pop(0), deliver, on_eof)
            self._input = await InputStream.connect(ours.pop(0))
            if self.stopped:
                self._take_down()
        finally:
            for sock in (out_theirs, in_theirs, *ours):  # whatever was not handed on
                sock.close()

    def _dup(self) -> int:
        if self._master is None:
            raise BrokenPipeError("terminal closed while the relay started")
        return os.dup(self._master)

    def _adopt(self, proc: subprocess.Popen) -> None:
        cat = _Cat(proc)
        self._cats.append(cat)
        if self.stopped:
            cat.kill()

    def pause(self) -> None:
        if self._output is not None:
            self._output.pause()

    def resume(self) -> None:
        if self._output is not None:
            self._output.resume()

    async def write(self, data: bytes) -> None:
        if self._input is None:
            raise BrokenPipeError("terminal closed")
        await self._input.write(data)

    async def drain_input(self) -> None:
        """EOF to the input ``cat``, then until it has written everything to the terminal
        (unbounded while the program does not read: as a write to the master would be)."""
        if self._input is not None and not self.stopped:
            await self._input.close()
            await self._cats[1].exited.wait()

    def stop(self) -> None:
        """Hang up: our master closed, the cats (each holding a copy) killed, sockets closed."""
        if self._master is not None:
            os.close(self._master)
            self._master = None
        self._take_down()

    async def wait_stopped(self, timeout_s: float = 5.0) -> None:
        """After ``stop``: until the cats are gone and reaped (a SIGKILL takes a moment)."""
        waits = [cat.exited.wait() for cat in self._cats]
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.gather(*waits)
        except TimeoutError:  # stuck in the kernel: their watches reap them later
            pass

    def _take_down(self) -> None:
        for cat in self._cats:
            cat.kill()
        if self._input is not None:
            self._input.abort()
        if self._output is not None:
            self._output.close()


def _relay_command() -> tuple[list[str], dict]:
    if SETPRIV is not None:
        return [SETPRIV, "--pdeathsig", "KILL", "--", CAT], {}
    return [CAT], {"preexec_fn": _die_with_parent}  # a fork, as the rare fallback


def _die_with_parent() -> None:
    """In the (forked) child, before exec: SIGKILL when the spawning thread, the server's, dies."""
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


def _open_all(*openers: Callable[[], int]) -> tuple[int, int, int]:
    fds: list[int] = []
    try:
        for opener in openers:
            fds.append(opener())
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return tuple(fds)  # type: ignore[return-value]


def _devnull() -> int:
    return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
