"""Every port of the domain, in one place: what it needs from the outside world (process
runners, a clock, the isolation of a sandbox, its files, its network, the commit writer, the
journal store's maintenance, checkpoints) and the narrow views its own parts get of each other
(an attempt runner's host, an expiry sweep's host, a context's host) instead of a whole service.

Adapters live in ``infra`` (PipeRunner, PtyRunner, SystemClock, BwrapRuntime, ...) and fakes in
``infra.fakes``. A runner knows nothing about sessions, policies or phases: it
starts one argv and reports what the process does.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Awaitable, Callable, Iterable, Protocol

if TYPE_CHECKING:  # annotations only: the ports name domain types without importing their modules
    from .commits import CommitPipeline
    from .contexts import SandboxContexts
    from .expiry import ExpirySweep
    from .model.session import Session
    from .supervisor import SessionSupervisor

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


class SandboxIsolation(Protocol):
    """One sandbox's isolation, bound to its workspace (infra.runtime's ``BoundRuntime``)."""

    name: str

    def launch(self, workspace_dir: str, argv: list[str], cwd: str, env: dict[str, str],
               terminal: TerminalSize | None, attempt_id: str = "") -> Launch: ...
    def translate_exit(self, status: ExitStatus, attempt_id: str = "") -> ExitStatus: ...
    def usage(self) -> dict[str, int]: ...
    def freeze(self, frozen: bool) -> None: ...
    def release(self) -> None: ...


class Isolator(Protocol):
    """Makes a sandbox's isolation (infra.runtime's ``HostRuntime`` / ``BwrapRuntime``)."""

    def isolate(self, sandbox_id: str, workspace_dir: str, config: dict) -> SandboxIsolation: ...


class SandboxFiles(Protocol):
    def create(self, sandbox_id: str) -> None: ...
    def list_ids(self) -> list[str]: ...
    def workspace(self, sandbox_id: str) -> str: ...
    def open_store(self, sandbox_id: str) -> SessionSupervisor: ...
    def remove(self, sandbox_id: str) -> None: ...
    def usage(self, sandbox_id: str) -> dict[str, int]: ...


class Checkpoints(Protocol):
    def seal(self, sandbox_id: str, supervisor: SessionSupervisor) -> None: ...
    def write_manifest(self, sandbox_id: str, manifest: dict) -> None: ...
    def read_manifest(self, sandbox_id: str) -> dict | None: ...
    def discard_manifest(self, sandbox_id: str) -> None: ...


class CommitSink(Protocol):
    """The single writer thread (infra.writer)."""

    def submit(self, tick: list, done: Callable[[list], None]) -> None: ...
    def run_in_writer(self, fn: Callable[[], object],
                      done: Callable[[object, BaseException | None], None]) -> None: ...


class Pausable(Protocol):
    def pause_output(self) -> None: ...
    def resume_output(self) -> None: ...


class JournalStore(Protocol):
    """Store maintenance the library has no API for (``infra.event_store``)."""

    def trim_events(self, originator_id: str, gt: int, lte: int, keep_topics: Iterable[str], limit: int,
                    snapshots_before: int = 0) -> int: ...
    def reclaim_pages(self, keep_pages: int, max_pages: int) -> int: ...


class ContextHost(Protocol):
    """What contexts need from their sandbox's service: the session path's launch and runners."""

    pipe_runner: ProcessRunner
    pty_runner: ProcessRunner
    clock: Clock

    def launch_process(self, argv: list[str], cwd: str, env_overrides: dict[str, str],
                       terminal: TerminalSize | None, term: str = ..., attempt_id: str = "") -> Launch: ...
    def translate_exit(self, status: ExitStatus, attempt_id: str = "") -> ExitStatus: ...
    def new_uuid_hex(self) -> str: ...


class ExpiryHost(Protocol):
    """What the expiry sweep needs from its sandbox's service."""

    clock: Clock

    def list_sessions(self) -> list[Session]: ...
    async def expire_session(self, session_id: str) -> None: ...


class AttemptHost(Protocol):
    """What the attempt runner (``Reconciler``) needs from its sandbox's service: the store it
    records into, the commit pipeline, the runners and the isolation, and the per-session lock."""

    supervisor: SessionSupervisor
    pipeline: CommitPipeline
    pipe_runner: ProcessRunner
    pty_runner: ProcessRunner
    runtime: SandboxIsolation
    clock: Clock
    contexts: SandboxContexts
    expiry: ExpirySweep

    @property
    def generation(self) -> int: ...
    def new_attempt_id(self) -> str: ...
    def launch_for(self, session: Session) -> Launch: ...
    def translate_exit(self, status: ExitStatus, attempt_id: str = "") -> ExitStatus: ...
    def lifecycle_lock(self, session_id: str) -> asyncio.Lock: ...
