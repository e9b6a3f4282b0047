"""SandboxRuntime: one running sandbox, from its start to its end.

It owns what exists only while the sandbox runs: its store of live sessions (one ``LiveSession``
each), every background task (``tasks``: attempt watchers, timers, sweeps), its attempt runner,
its contexts, its isolation, and what follows each commit (``after_commit``). Its parts get narrow
ports, never the runtime itself: ``lifecycle`` (create, update, desired state, attempts, delete)
and ``io`` (input, signals, resize) a ``SessionHost``, ``attempts`` an ``AttemptHost``,
``contexts`` a ``ContextHost``, ``expiry`` an ``ExpiryHost``. Session calls come in as typed
commands through one table (``handle``). Its life: ``start``, ``freeze`` / ``thaw`` (the pause
hook), ``seal``, ``kill`` and ``reap`` (every process ended; ``release`` is both) and ``close``
(the store closed). Only the registry ends a runtime (``SandboxRegistry.retire``).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from .attempt_runner import AttemptRunner
from .commits import CommitPipeline
from .sandbox_contexts import SandboxContexts
from .expiry_sweep import ExpirySweep
from .hub import Hub
from .session_journal import SessionJournal
from .live_session import LiveSession
from .model.commands import (
    CreateAttempt,
    CreateSession,
    DeleteSession,
    ResizeTerminal,
    SendSignal,
    SessionCommand,
    SetDesiredState,
    UpdateSession,
    WriteInput,
)
from .model.env import build_env
from .model.errors import SessionNotFoundError
from .model.ids import attempt_id_from
from .model.session import Session, SessionView
from .ports import Checkpoints, Clock, ExitStatus, Launch, ProcessRunner, SandboxIsolation, TerminalSize
from .retention import Retention
from .sandbox_store import SandboxStore, live_entry
from .session_io import SessionIO
from .session_lifecycle import SessionLifecycle
from .task_owner import TaskOwner

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
        self.tasks = TaskOwner(f"sandbox {sandbox_id}")  # every background task, ended with the runtime
        self.attempts = AttemptRunner(self)
        self.contexts = SandboxContexts(self)
        self.lifecycle = SessionLifecycle(self)
        self.io = SessionIO(self)  # typed requests: api/commands.py parses the wire
        self.expiry = ExpirySweep(self)
        self.retention = Retention(store, pipeline, clock, self.tasks)
        self.journal = SessionJournal(store, hub, self.retention, self.session)
        store.after_commit = self.after_commit
        self._killed: tuple[list, list] | None = None  # what ``kill`` ended, for ``reap`` to wait for
        self._reaped = False
        self._handlers: dict[type, Callable] = {
            CreateSession: lambda c: self.lifecycle.create_session(c.spec, c.idempotency_key),
            UpdateSession: lambda c: self.lifecycle.update_session(c.session_id, c.spec),
            SetDesiredState: lambda c: self.lifecycle.set_desired_state(c.session_id, c.state),
            CreateAttempt: lambda c: self.lifecycle.create_attempt(c.session_id, c.replace_current),
            DeleteSession: lambda c: self.lifecycle.delete_session(c.session_id),
            WriteInput: lambda c: self.io.write(c.session_id, c.request),
            SendSignal: lambda c: self.io.send_signal(c.session_id, c.request),
            ResizeTerminal: lambda c: self.io.resize(c.session_id, c.request),
        }

    # ---- session calls: one table ------------------------------------------------------------
    async def handle(self, command: SessionCommand):
        """The one way a session call reaches the runtime (routes, WebSocket frames, scenarios):
        each typed command to the one method that carries it out."""
        return await self._handlers[type(command)](command)

    # ---- after every commit ------------------------------------------------------------------
    def after_commit(self, session: Session, events: list) -> None:
        """A session's events are committed (the only moment anything of them is shown): its
        committed seq advances, live subscribers get them, retention counts them."""
        live = self.store.live.get(session.id)
        if live is None:  # deleted (or its creation rolled back) meanwhile
            return
        live.committed_seq = events[-1].originator_version
        if self.hub.has_subscribers(session.id):
            self.hub.publish(session.id, [live_entry(session.id, event) for event in events])
        self.retention.on_commit(live)

    # ---- the runtime's life: start, freeze, thaw, seal, kill, reap, close -------------------
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
        the isolation released (whatever escaped the process groups ends with the cgroups) and
        every task of the runtime ended."""
        self.kill()
        if self._reaped:
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
        await self.tasks.close(max(0.1, deadline - loop.time()))

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

    # ---- what its parts get (the host ports) ------------------------------------------------
    @property
    def generation(self) -> int:
        return self.store.sandbox.runtime_generation

    @property
    def ended(self) -> bool:
        """``kill`` has run: no process of this runtime may start any more."""
        return self._killed is not None

    def new_attempt_id(self) -> str:
        return attempt_id_from(self.new_uuid_hex())

    def live(self, session_id: str) -> LiveSession:
        """The session's one object; SessionNotFoundError (404) when unknown or being deleted."""
        live = self.store.live.get(session_id)
        if live is None or live.deleting:
            raise SessionNotFoundError()
        return live

    def live_session(self, session_id: str) -> LiveSession | None:
        return self.store.live.get(session_id)

    def live_sessions(self) -> list[LiveSession]:
        return list(self.store.live.values())

    def retire_session(self, session_id: str) -> None:
        """A deleted session leaves the runtime: its one object popped and closed, its streams
        ended, whatever it still owed the writer dropped."""
        live = self.store.forget(session_id)
        if live is None:
            return
        live.close()
        self.hub.close_session(session_id, "deleted")
        self.pipeline.drop(live.aggregate)

    async def expire_session(self, session_id: str) -> bool:
        return await self.lifecycle.expire_session(session_id)

    def launch_for(self, session: Session) -> Launch:
        settings = session.settings
        terminal = self.attempts.terminal_for(session)
        term = settings.terminal.term if terminal is not None else "xterm-256color"
        return self.launch_process(list(settings.command), settings.cwd, dict(settings.env), terminal, term,
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
        return self.live(session_id).aggregate

    def session_ids(self) -> list[str]:
        return list(self.store.live)

    def list_sessions(self) -> list[Session]:
        return self.store.list_sessions()

    def shown(self, session: Session) -> SessionView:
        """What the API shows of ``session``: its state as of its last committed event."""
        view = self.store.view(session)
        if view is None:  # its creation is not committed yet
            raise SessionNotFoundError()
        return view

    def shown_sessions(self) -> list[tuple[Session, SessionView]]:
        """Every session whose creation is committed, with what the API shows of it."""
        return [(s, view) for s in self.list_sessions() if (view := self.store.view(s)) is not None]
