"""Ports the domain needs from the outside world: process runners and a clock.

Adapters live in ``infra`` (PipeRunner, PtyRunner, SystemClock) and fakes in
``infra.fakes``. A runner knows nothing about sessions, policies or phases: it
starts one argv and reports what the process does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable, Protocol

# stream is "stdout", "stderr" or "pty"; called on the event loop thread.
OutputCallback = Callable[[str, bytes], None]


@dataclass(frozen=True)
class TerminalSize:
    rows: int
    cols: int


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one OS process (already wrapped by the runtime)."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    terminal: TerminalSize | None = None  # None: pipes; set: a PTY of that size
    # Real pids of processes to consider part of the attempt (e.g. bwrap children)
    # are found through the process group, so nothing else is needed here.
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ExitStatus:
    """How a process ended. ``signal`` is the signal number when it died by one."""

    exit_code: int | None
    signal: int | None = None
    reason: str = ""  # set by the runtime when it knows better, e.g. "oom_killed"


class StartFailedError(Exception):
    """The process could not be started (bad argv, bad cwd, exec failure)."""


class AttemptHandle(Protocol):
    pid: int
    start_time: int  # /proc/<pid>/stat starttime (clock ticks), 0 if unknown

    def pause_output(self) -> None: ...   # back-pressure: stop reading output
    def resume_output(self) -> None: ...

    async def write(self, data: bytes) -> None: ...      # waits for the pipe to drain
    async def close_input(self) -> None: ...             # EOF (pipes) / hang-up (pty)
    def send_signal(self, signum: int) -> None: ...      # to the whole process group
    def resize(self, rows: int, cols: int) -> None: ...  # pty only; raises otherwise
    async def wait_exited(self) -> ExitStatus: ...       # resolves after all output was delivered


class ProcessRunner(Protocol):
    async def start(self, launch: Launch, on_output: OutputCallback) -> AttemptHandle: ...


class Clock(Protocol):
    def now_ns(self) -> int: ...
    def sleep(self, seconds: float) -> Awaitable[None]: ...


class SandboxNetworks(Protocol):
    """One network per running sandbox runtime (infra.netns). ``attach`` returns the namespace
    path its sessions join (None: they share the host's network); ``apply`` changes the
    policy of a running sandbox for new connections."""

    async def start(self) -> None: ...
    async def close(self) -> None: ...
    def netns_path(self, sandbox_id: str) -> str | None: ...
    async def attach(self, sandbox_id: str, policy: dict) -> str | None: ...
    async def apply(self, sandbox_id: str, policy: dict) -> None: ...
    async def detach(self, sandbox_id: str) -> None: ...
