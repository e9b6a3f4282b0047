"""SandboxService: the session operations of one sandbox, as the API calls them.

Each method checks in the contract's order, records through the aggregate, and
returns only after the resulting events are committed (the durability point).
"""
from __future__ import annotations

import asyncio
from typing import Callable

from .commits import CommitPipeline
from .contexts import SandboxContexts
from .expiry import ExpirySweep
from .hub import Hub
from .journal_views import SessionJournal
from .session_io import SessionIO
from .model import requests as rq
from .model.errors import (
    AttemptRunningError,
    OperationFailedError,
    SessionExistsError,
    SessionNotFoundError,
)
from .model.env import build_env
from .model.ids import attempt_id_from, session_id_from
from .model.policies import expiry_due
from .model.session import Session
from .model.spec import execution_changed, normalize_spec
from .ports import Clock, ExitStatus, Launch, ProcessRunner, SandboxIsolation, TerminalSize
from .reconciler import Reconciler
from .retention import Retention
from .sandbox_store import SandboxStore


class SandboxService:
    def __init__(self, *, sandbox_id: str, store: SandboxStore, pipeline: CommitPipeline,
                 hub: Hub, pipe_runner: ProcessRunner, pty_runner: ProcessRunner,
                 runtime: SandboxIsolation, workspace: str, clock: Clock,
                 new_uuid_hex: Callable[[], str], sandbox_env: dict[str, str], base_env: dict[str, str]):
        self.sandbox_id = sandbox_id
        self.store = store
        self.pipeline = pipeline
        self.hub = hub
        self.pipe_runner = pipe_runner
        self.pty_runner = pty_runner
        self.runtime = runtime
        self.netns: str | None = None  # the network namespace its sessions join (networks.py)
        self.workspace = workspace
        self.clock = clock
        self.new_uuid_hex = new_uuid_hex
        self.sandbox_env = sandbox_env
        self.base_env = base_env
        self.reconciler = Reconciler(self)
        self.contexts = SandboxContexts(self)  # ended with the runtime: reconciler.kill_everything
        self.expiry = ExpirySweep(self)  # started by the manager once the runtime is active
        self.retention = Retention(store, pipeline, clock)  # started by the manager too
        store.on_commit = self.retention.on_commit
        self.journal = SessionJournal(store, hub, self.retention, self.session)
        self.io = SessionIO(self)  # input, signals, resize (typed: api/commands.py parses the wire)
        self.create_lock = asyncio.Lock()
        self.creating: dict[str, asyncio.Event] = {}  # session id -> set once its create is done
        self.deleting: set[str] = set()
        self._lifecycle_locks: dict[str, asyncio.Lock] = {}

    def lifecycle_lock(self, session_id: str) -> asyncio.Lock:
        """Lifecycle calls on one session (and its restart timer and expiry) go one at a time,
        so a stop and a start can never interleave into two live attempts. Other sessions,
        reads and inputs never wait for it."""
        lock = self._lifecycle_locks.get(session_id)
        if lock is None:
            lock = self._lifecycle_locks[session_id] = asyncio.Lock()
        return lock

    # ---- the runtime's end: the one tear-down (pause, delete, shutdown, a lost runtime) ------
    async def release(self) -> None:
        """End the runtime: no expiry or retention sweep, every process killed and reaped with
        its exit not recorded, contexts closed, the isolation (cgroups) released."""
        self.expiry.stop()
        self.retention.stop()
        await self.reconciler.kill_everything()

    async def close(self) -> None:
        """Close the store. Nothing more is staged for it; it is closed on the writer thread,
        after any store work queued there (closing a connection another thread uses can crash)."""
        self.store.released = True
        self.pipeline.faults.forget(self.store)
        await self.pipeline.run_in_writer(self.store.close)

    # ---- context for the reconciler -------------------------------------------------------
    @property
    def generation(self) -> int:
        return self.store.sandbox.runtime_generation

    def new_attempt_id(self) -> str:
        return attempt_id_from(self.new_uuid_hex())

    def launch_for(self, session: Session) -> Launch:
        spec = session.spec
        terminal = self.reconciler.terminal_for(session)
        term = spec["io"]["terminal"]["term"] if terminal is not None else "xterm-256color"
        return self.launch_process(spec["command"], spec.get("cwd", ""), spec.get("env", {}), terminal, term,
                                   attempt_id=session.attempt_id)

    def launch_process(self, argv: list[str], cwd: str, env_overrides: dict[str, str],
                       terminal: TerminalSize | None, term: str = "xterm-256color", attempt_id: str = "") -> Launch:
        """The one way a process of this sandbox (a session attempt or a context) is launched."""
        env = build_env(self.base_env, self.sandbox_env, env_overrides, term if terminal is not None else None)
        return self.runtime.launch(self.workspace, argv, cwd, env, terminal, attempt_id=attempt_id)

    def translate_exit(self, status: ExitStatus, attempt_id: str = "") -> ExitStatus:
        return self.runtime.translate_exit(status, attempt_id)

    # ---- queries ---------------------------------------------------------------------------
    def session(self, session_id: str) -> Session:
        session = self.store.sessions.get(session_id)
        if session is None or session_id in self.deleting:
            raise SessionNotFoundError()
        return session

    def list_sessions(self) -> list[Session]:
        return sorted(self.store.sessions.values(), key=lambda s: (s.created_ns, s.id))

    # ---- lifecycle commands -----------------------------------------------------------------
    async def create_session(self, raw_spec, idempotency_key: str) -> tuple[Session, bool]:
        spec = normalize_spec(raw_spec)
        key = rq.bounded_key(idempotency_key, "Idempotency-Key")
        self.pipeline.check_writable(self.store)
        # The lock covers the key check and the adoption only: starts and commits of
        # concurrent creates overlap (one commit tick serves them all), while a replay of
        # a key still being created waits for that create to finish before answering.
        async with self.create_lock:  # concurrent creates with one key yield one session
            existing_id = self.store.creation_keys.get(key) if key else None
            if existing_id is not None:
                existing = self.store.sessions.get(existing_id)
                if existing is None or existing_id in self.deleting:
                    raise SessionExistsError(key, existing_id, "(deleted)")
                if existing.spec != spec:
                    raise SessionExistsError(key, existing_id)
                in_flight = self.creating.get(existing_id)
            else:
                session_id = session_id_from(self.new_uuid_hex())
                session = Session.create(session_id, self.sandbox_id, spec, key, self.generation,
                                         self.clock.now_ns())
                self.store.adopt(session)
                self.store.committed_seq[session_id] = 0
                self.pipeline.stage(self.store, session)
                self.creating[session_id] = asyncio.Event()
        if existing_id is not None:
            if in_flight is not None:
                await in_flight.wait()
            return existing, False
        try:
            async with self.lifecycle_lock(session_id):
                if session.desired_state == "running":
                    # A start failure is recorded on the attempt; create still answers 201.
                    await self.reconciler.start_attempt(session, "created")
                await self.pipeline.flush(self.store)
        finally:
            self.creating.pop(session_id).set()
        return session, True

    async def update_session(self, session_id: str, raw_spec) -> Session:
        spec = normalize_spec(raw_spec)  # validation before lookup (contract §1.4)
        self.session(session_id)
        self.pipeline.check_writable(self.store)
        async with self.lifecycle_lock(session_id):
            session = self.session(session_id)  # a delete may have finished while we waited
            old_spec = session.spec
            self.reconciler.record(session, session.update_spec, spec, self.clock.now_ns())
            failure = None
            if spec["lifecycle"]["desired_state"] == "stopped":
                self.reconciler.cancel_timer(session.id)
                if session.has_live_attempt:
                    await self.reconciler.stop_attempt(session, "desired_state_stopped")
            elif execution_changed(old_spec, spec) and session.has_live_attempt:
                await self.reconciler.stop_attempt(session, "spec_replaced")
                failure = await self.reconciler.start_attempt(session, "spec_updated")
            elif not session.has_live_attempt:
                failure = await self.reconciler.start_attempt(session, "desired_state_running")
            await self._committed(failure)
        return session

    async def _committed(self, start_failure: Exception | None) -> None:
        """The durability point of a lifecycle call; a failed start is then a 500 (contract §1.4-§1.7)."""
        await self.pipeline.flush(self.store)
        if start_failure is not None:
            raise OperationFailedError(str(start_failure))

    async def set_desired_state(self, session_id: str, body: dict) -> Session:
        state = rq.parse_desired_state(body)  # before lookup (contract §1.6)
        self.session(session_id)
        if state == "running":  # a stop acts even on a full disk, then waits like any write
            self.pipeline.check_writable(self.store)
        async with self.lifecycle_lock(session_id):
            session = self.session(session_id)
            self.reconciler.record(session, session.set_desired_state, state, self.clock.now_ns())
            failure = None
            if state == "stopped":
                self.reconciler.cancel_timer(session.id)
                if session.has_live_attempt:
                    await self.reconciler.stop_attempt(session, "desired_state_stopped")
            elif not session.has_live_attempt:
                failure = await self.reconciler.start_attempt(session, "desired_state_running")
            await self._committed(failure)
        return session

    async def create_attempt(self, session_id: str, body: dict) -> Session:
        self.session(session_id)
        replace = rq.parse_replace_current(body)
        self.pipeline.check_writable(self.store)
        async with self.lifecycle_lock(session_id):
            session = self.session(session_id)
            if session.has_live_attempt:
                if not replace:
                    raise AttemptRunningError()
                await self.reconciler.stop_attempt(session, "attempt_replaced")
            failure = await self.reconciler.start_attempt(session, "attempt_created", requested=True)
            await self._committed(failure)
        return session

    async def expire_session(self, session_id: str) -> bool:
        """Contract §6.14: one session.expired, desired state stopped, then the stop (session_expired)."""
        async with self.lifecycle_lock(session_id):
            session = self.store.sessions.get(session_id)
            if session is None or session_id in self.deleting:
                return False
            now = self.clock.now_ns()
            # Re-decided under the lock: input or a spec change may have come in meanwhile.
            if not expiry_due(session.spec["lifecycle"], session.created_ns, session.last_activity_ns, now) \
                    or not self.reconciler.record(session, session.expire, now):
                return False
            self.reconciler.cancel_timer(session_id)
            if session.has_live_attempt:
                await self.reconciler.stop_attempt(session, "session_expired")
            await self.pipeline.flush(self.store)
        return True

    async def delete_session(self, session_id: str) -> None:
        self.session(session_id)
        async with self.lifecycle_lock(session_id):
            session = self.session(session_id)
            self.deleting.add(session_id)
            try:
                self.reconciler.cancel_timer(session_id)
                if session.has_live_attempt:
                    await self.reconciler.stop_attempt(session, "session_deleted")
                await self.pipeline.flush(self.store)
            except BaseException:
                self.deleting.discard(session_id)
                raise
            self.hub.close_session(session_id, "deleted")
            self.pipeline.drop(session)
            self.store.forget(session)
            self.retention.forget(session_id)
            self.deleting.discard(session_id)
        self._lifecycle_locks.pop(session_id, None)
        await asyncio.to_thread(self.store.delete_journal, session_id)
