"""Fakes for the domain's ports, shipped next to the real adapters (as httpx ships MockTransport).

``FakeClock`` is a Clock whose time moves only when told to (``advance``); sleepers wake
in deadline order at their own instant. ``ScriptedRunner`` is a ProcessRunner whose
processes do nothing until a test or scenario makes them: emit output, exit with a
code, die by a signal. Signals behave as they would for a plain process (TERM/INT/HUP/...
kill unless ignored, KILL always kills, STOP holds other signals until CONT).
"""
from __future__ import annotations

import asyncio
import errno
import heapq
import itertools
import signal as signals
from typing import Awaitable, Callable

from session_supervisor.domain.ports import ExitStatus, Launch, OutputCallback, StartFailedError

# 2026-01-01T00:00:00Z: a round, recognisable origin for fake timestamps.
FAKE_EPOCH_NS = 1_767_225_600_000_000_000

# Signals whose default disposition ends a process (the ones a client can send).
_FATAL_BY_DEFAULT = frozenset({signals.SIGTERM, signals.SIGINT, signals.SIGHUP, signals.SIGQUIT,
                               signals.SIGUSR1, signals.SIGUSR2, signals.SIGALRM, signals.SIGPIPE})


async def _yield_to_loop(rounds: int = 10) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


class FakeClock:
    """The Clock port with manual time. ``advance`` wakes each due sleeper at its deadline."""

    def __init__(self, start_ns: int = FAKE_EPOCH_NS) -> None:
        self.start_ns = start_ns
        self._now = start_ns
        self._sleepers: list[tuple[int, int, asyncio.Future]] = []  # (deadline, order, future)
        self._order = itertools.count()

    def now_ns(self) -> int:
        return self._now

    @property
    def elapsed_s(self) -> float:
        return (self._now - self.start_ns) / 1e9

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + round(seconds * 1e9), next(self._order), future))
        await future  # a cancelled sleeper's future is cancelled too and skipped by advance

    def pending(self) -> list[int]:
        """Deadlines (ns) of the sleepers still waiting, earliest first."""
        return sorted(d for d, _, f in self._sleepers if not f.done())

    async def advance(self, seconds: float,
                      settle: Callable[[], Awaitable[None]] | None = None) -> None:
        """Move time forward by ``seconds``, waking sleepers in deadline order.

        After each wake-up ``settle`` runs (default: a few loop turns), so whatever the
        woken tasks do, including starting new sleeps that fall due within this advance,
        happens at that instant.
        """
        settle = settle or _yield_to_loop
        target = self._now + round(seconds * 1e9)
        while self._sleepers and self._sleepers[0][0] <= target:
            self._now = max(self._now, self._sleepers[0][0])
            while self._sleepers and self._sleepers[0][0] <= self._now:
                _deadline, _order, future = heapq.heappop(self._sleepers)
                if not future.done():
                    future.set_result(None)
            await settle()
        self._now = target
        await settle()


class ScriptedProcess:
    """An AttemptHandle that does what it is told. ``pid`` is fake: it is never signalled."""

    def __init__(self, launch: Launch, on_output: OutputCallback, pid: int) -> None:
        self.launch = launch
        self.pid = pid
        self.start_time = 0  # unknown, so the reaper never touches a real process with this pid
        self.stdin = bytearray()
        self.stdin_closed = False
        self.signals: list[int] = []
        self.ignored: set[int] = set()
        self.frozen = False
        self.terminal = launch.terminal
        self._held: list[int] = []  # signals sent while frozen, delivered on SIGCONT
        self._on_output = on_output
        self._status: asyncio.Future[ExitStatus] = asyncio.get_running_loop().create_future()

    @property
    def argv(self) -> list[str]:
        return self.launch.argv

    @property
    def alive(self) -> bool:
        return not self._status.done()

    # ---- what a script makes the process do ----------------------------------------------
    def emit(self, data: bytes, stream: str = "stdout") -> None:
        if not self.alive:
            raise RuntimeError(f"process {self.pid} has exited")
        stream = "pty" if self.terminal is not None else stream
        self._on_output(stream, data)

    def exit(self, code: int = 0) -> None:
        self._finish(ExitStatus(exit_code=code))

    def die(self, signum: int) -> None:
        self._finish(ExitStatus(exit_code=-1, signal=signum))

    def ignore(self, *signums: int) -> None:
        self.ignored.update(signums)

    def _finish(self, status: ExitStatus) -> None:
        if self.alive:
            self._status.set_result(status)

    # ---- AttemptHandle --------------------------------------------------------------------
    def pause_output(self) -> None:
        """A scripted process writes only when told to: there is no pipe to stop reading."""

    def resume_output(self) -> None:
        """See ``pause_output``."""

    async def write(self, data: bytes) -> None:
        if not self.alive or self.stdin_closed:
            raise BrokenPipeError(errno.EPIPE, "stdin is closed")
        self.stdin += data

    async def close_input(self) -> None:
        self.stdin_closed = True

    def discard(self) -> None:
        self.send_signal(signals.SIGKILL)

    def send_signal(self, signum: int) -> None:
        if not self.alive:
            return
        self.signals.append(signum)
        if signum == signals.SIGKILL:
            if signum not in self.ignored:  # ignoring KILL plays a process stuck in the kernel
                self.die(signum)
        elif signum == signals.SIGSTOP:
            self.frozen = True
        elif signum == signals.SIGCONT:
            self.frozen = False
            held, self._held = self._held, []
            for pending in held:
                self._deliver(pending)
        elif self.frozen:
            self._held.append(signum)
        else:
            self._deliver(signum)

    def _deliver(self, signum: int) -> None:
        if signum in _FATAL_BY_DEFAULT and signum not in self.ignored:
            self.die(signum)

    def resize(self, rows: int, cols: int) -> None:
        if self.terminal is None:
            raise OSError("pty not available")
        self.terminal = type(self.terminal)(rows, cols)

    async def wait_exited(self) -> ExitStatus:
        return await asyncio.shield(self._status)


class ScriptedRunner:
    """A ProcessRunner for both io modes. Every started process is kept in ``processes``."""

    def __init__(self, first_pid: int = 40_001) -> None:
        self.processes: list[ScriptedProcess] = []
        self._pids = itertools.count(first_pid)
        self._failures: list[str] = []

    def fail_next(self, count: int = 1, message: str = "fork/exec: no such file or directory") -> None:
        """Make the next ``count`` starts fail, as a bad argv or cwd would."""
        self._failures.extend([message] * count)

    async def start(self, launch: Launch, on_output: OutputCallback) -> ScriptedProcess:
        await asyncio.sleep(0)  # a real start yields to the loop as well
        if self._failures:
            raise StartFailedError(self._failures.pop(0))
        process = ScriptedProcess(launch, on_output, next(self._pids))
        self.processes.append(process)
        return process

    def by_pid(self, pid: int) -> ScriptedProcess:
        for process in self.processes:
            if process.pid == pid:
                return process
        raise LookupError(f"no scripted process with pid {pid}")

    @property
    def alive(self) -> list[ScriptedProcess]:
        return [p for p in self.processes if p.alive]
