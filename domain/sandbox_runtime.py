"""SandboxRuntime: one running sandbox, from its start to its release.

It owns what exists only while the sandbox runs: its store of live aggregates, its attempt
runner (processes, input queues, timers), its expiry and retention sweeps, its contexts, its
isolation, and the per-session lifecycle locks. Its parts: ``lifecycle`` (create, update,
desired state, attempts, delete), ``io`` (input, signals, resize), ``journal`` (reads and
subscriptions). Its life: ``start``, ``freeze`` / ``thaw`` (the pause hook), ``seal``,
``release`` (every process ended) and ``close`` (the store closed).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from .commits import CommitPipeline
from .contexts import SandboxContexts
from .expiry import ExpirySweep
from .hub import Hub
from .journal_views import SessionJournal
from .session_io import SessionIO
from .session_lifecycle import SessionLifecycle
from .model.errors import SessionNotFoundError
from .model.env import build_env
from .model.ids import attempt_id_from
from .model.session import Session, SessionView
from .ports import Checkpoints, Clock, ExitStatus, Launch, ProcessRunner, SandboxIsolation, TerminalSize
from .attempt_runner import AttemptRunner
from .retention import Retention
from .sandbox_store import SandboxStore

log = logging.getLogger(__name__)
RELEASE_WAIT_S = 3.0  # every process of a released runtime together, never per process


class SandboxRuntime:
    def __init__(self, *, sandbox_id: str, store: SandboxStore, pipeline: CommitPipeline,
                 hub: Hub, pipe_runner: ProcessRunner, pty_runner: ProcessRunner,
                 isolation: SandboxIsolation, workspace: str, clock: Clock,
                 new_uuid_hex: Callable[[], str], sandbox_env: dict[str, str], base_env: dict[str, str],
                 fence: Callable[[str], None] | None = None):
        self.sandbox_id = sandbox_id
        self.store = store
        self.pipeline = pipeline
        self.hub = hub
        self.pipe_runner = pipe_runner
        self.pty_runner = pty_runner
        self.isolation = isolation  # its host uid, cgroups and limits (infra.bubblewrap)
        self.workspace = workspace
        self.clock = clock
        self.new_uuid_hex = new_uuid_hex
        self.sandbox_env = sandbox_env
        self.base_env = base_env
        self.fence = fence  # more than one node: raises unless this node's lease is fresh (placement)
        self.attempts = AttemptRunner(self)
        self.contexts = SandboxContexts(self)  # ended with the runtime: release
        self.lifecycle = SessionLifecycle(self)  # create, update, desired state, attempts, delete
        self.expiry = ExpirySweep(self.lifecycle)  # started with the runtime (start)
        self.retention = Retention(store, pipeline, clock)  # started by the manager too
        store.on_commit = self.retention.on_commit
        self.journal = SessionJournal(store, hub, self.retention, self.session)
        self.io = SessionIO(self)  # input, signals, resize (typed: api/commands.py parses the wire)
        self.deleting: set[str] = set()
        self._lifecycle_locks: dict[str, asyncio.Lock] = {}
        self._killed: tuple[list, list] | None = None  # what ``kill`` ended, for ``reap`` to wait for
        self._reaped = False

    def lifecycle_lock(self, session_id: str) -> asyncio.Lock:
        """Lifecycle calls on one session (and its restart timer and expiry) go one at a time,
        so a stop and a start can never interleave into two live attempts. Other sessions,
        reads and inputs never wait for it."""
        lock = self._lifecycle_locks.get(session_id)
        if lock is None:
            lock = self._lifecycle_locks[session_id] = asyncio.Lock()
        return lock

    # ---- the runtime's life: start, freeze, thaw, seal, release, close -----------------------
    def start(self) -> None:
        """The runtime is active: its expiry and retention sweeps run."""
        self.expiry.start()
        self.retention.start()

    def freeze(self, at_ns: int) -> list:
        """The pause hook's freeze: no sweep and no restart begins, every running attempt is
        stopped (SIGSTOP, ``session.paused``), and the sandbox's freezer cgroup is frozen."""
        self.expiry.stop()
        self.retention.stop()  # no store maintenance while the checkpoint is being taken
        frozen = self.attempts.freeze_all(at_ns)
        self.isolation.freeze(True)
        return frozen

    async def thaw(self, frozen: list, at_ns: int) -> None:
        """Undo a freeze whose pause did not commit."""
        self.isolation.freeze(False)
        await self.attempts.thaw_all(frozen, at_ns)
        self.start()
        try:
            await self.pipeline.flush(self.store)
        except Exception:
            log.exception("sandbox %s: recording the thaw failed", self.sandbox_id)

    async def seal(self, checkpoints: Checkpoints, manifest: dict) -> None:
        """The checkpoint: nothing more is staged for the store; on the writer thread, after
        every commit submitted so far, the store is sealed and the manifest written."""
        self.store.released = True

        def seal_and_write() -> None:
            checkpoints.seal(self.sandbox_id, self.store)
            checkpoints.write_manifest(self.sandbox_id, manifest)
        await self.pipeline.run_in_writer(seal_and_write)

    def kill(self) -> None:
        """The first half of the one tear-down (pause, delete, shutdown, a lost runtime): no sweep,
        no timer, every attempt and context abandoned (exits not recorded) and SIGKILLed, and then
        everything left in the sandbox's cgroups (freeze, SIGKILL, thaw), so a frozen sandbox or a
        process that left its group ends at once. Nothing here waits (``reap`` does)."""
        if self._killed is not None:
            return
        self.expiry.stop()
        self.retention.stop()
        lives = self.attempts.end_all()
        contexts = self.contexts.end_all()
        self.isolation.kill_all()
        self._killed = (lives, contexts)

    async def reap(self) -> None:
        """The second half: one wait for every killed process together, bounded in total, then
        the isolation released (whatever escaped the process groups ends with the cgroups)."""
        self.kill()
        if self._killed is None or self._reaped:
            return
        self._reaped = True
        lives, contexts = self._killed
        ended = [live.exited.wait() for live in lives] + [c.exited.wait() for c in contexts]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RELEASE_WAIT_S
        if ended:
            done, pending = await asyncio.wait([asyncio.ensure_future(e) for e in ended],
                                               timeout=RELEASE_WAIT_S)
            for waiter in pending:
                waiter.cancel()
            if pending:
                log.warning("sandbox %s: %d process(es) not reaped %.0f s after SIGKILL; the "
                            "cgroup release goes on", self.sandbox_id, len(pending), RELEASE_WAIT_S)
        await self.contexts.finish(contexts, max(0.0, deadline - loop.time()))
        await asyncio.to_thread(self.isolation.release)

    async def release(self) -> None:
        """Every process ended and reaped, the isolation released (``kill``, then ``reap``)."""
        self.kill()
        await self.reap()

    def stage_snapshots(self) -> int:
        """A snapshot of every session changed since its last one, into the next commit."""
        return self.retention.stage_snapshots()

    async def close(self) -> None:
        """Close the store. Nothing more is staged for it; it is closed on the writer thread,
        after any store work queued there (closing a connection another thread uses can crash)."""
        self.store.released = True
        self.pipeline.faults.forget(self.store)
        await self.pipeline.run_in_writer(self.store.close)

    # ---- context for the attempts -------------------------------------------------------
    @property
    def generation(self) -> int:
        return self.store.sandbox.runtime_generation

    def new_attempt_id(self) -> str:
        return attempt_id_from(self.new_uuid_hex())

    def launch_for(self, session: Session) -> Launch:
        spec = session.spec
        terminal = self.attempts.terminal_for(session)
        term = spec["io"]["terminal"]["term"] if terminal is not None else "xterm-256color"
        return self.launch_process(spec["command"], spec.get("cwd", ""), spec.get("env", {}), terminal, term,
                                   attempt_id=session.attempt_id)

    def launch_process(self, argv: list[str], cwd: str, env_overrides: dict[str, str],
                       terminal: TerminalSize | None, term: str = "xterm-256color", attempt_id: str = "") -> Launch:
        """The one way a process of this sandbox (a session attempt or a context) is launched."""
        self.check_fence()
        env = build_env(self.base_env, self.sandbox_env, env_overrides, term if terminal is not None else None)
        return self.isolation.launch(self.workspace, argv, cwd, env, terminal, attempt_id=attempt_id)

    def check_fence(self) -> None:
        """No process starts unless this node may run the sandbox (UnavailableError)."""
        if self.fence is not None:
            self.fence(self.sandbox_id)

    def translate_exit(self, status: ExitStatus, attempt_id: str = "") -> ExitStatus:
        return self.isolation.translate_exit(status, attempt_id)

    # ---- queries ---------------------------------------------------------------------------
    def session(self, session_id: str) -> Session:
        session = self.store.sessions.get(session_id)
        if session is None or session_id in self.deleting:
            raise SessionNotFoundError()
        return session

    def session_ids(self) -> list[str]:
        return list(self.store.sessions)

    def list_sessions(self) -> list[Session]:
        return sorted(self.store.sessions.values(), key=lambda s: (s.created_ns, s.id))

    def shown(self, session: Session) -> SessionView:
        """What the API shows of ``session``: its state as of its last committed event."""
        view = self.store.view(session)
        if view is None:  # its creation is not committed yet
            raise SessionNotFoundError()
        return view

    def shown_sessions(self) -> list[tuple[Session, SessionView]]:
        """Every session whose creation is committed, with what the API shows of it."""
        return [(s, view) for s in self.list_sessions() if (view := self.store.view(s)) is not None]
