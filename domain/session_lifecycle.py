"""The lifecycle calls on one sandbox's sessions (``runtime.lifecycle``), as the API makes them:
create, update, desired state, a new attempt, expiry and delete.

Each call checks in the contract's order, records through the aggregate, and returns only
after the resulting events are committed (the durability point). The attempt runner does
the starting and stopping; one session's lifecycle calls go one at a time
(``runtime.lifecycle_lock``).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .model.commands import DesiredState
from .model.errors import AttemptRunningError, OperationFailedError, SessionExistsError
from .model.ids import session_id_from
from .model.policies import expiry_due
from .model.session import Session
from .model.spec import execution_changed

if TYPE_CHECKING:
    from .sandbox_runtime import SandboxRuntime


class SessionLifecycle:
    def __init__(self, runtime: SandboxRuntime) -> None:
        self.runtime = runtime
        self.clock = runtime.clock  # the ExpiryHost port: the sweep decides on this clock
        self.create_lock = asyncio.Lock()
        self.creating: dict[str, asyncio.Event] = {}  # session id -> set once its create is done

    def list_sessions(self) -> list[Session]:
        return self.runtime.list_sessions()

    async def create_session(self, spec: dict, key: str) -> tuple[Session, bool]:
        """``spec`` normalized (``model.spec.normalize_spec``), ``key`` the bounded idempotency key."""
        self.runtime.pipeline.check_writable(self.runtime.store)
        # The lock covers the key check and the adoption only: starts and commits of
        # concurrent creates overlap (one commit tick serves them all), while a replay of
        # a key still being created waits for that create to finish before answering.
        async with self.create_lock:  # concurrent creates with one key yield one session
            existing_id = self.runtime.store.creation_keys.get(key) if key else None
            if existing_id is not None:
                existing = self.runtime.store.sessions.get(existing_id)
                if existing is None or existing_id in self.runtime.deleting:
                    raise SessionExistsError(key, existing_id, "(deleted)")
                if existing.spec != spec:
                    raise SessionExistsError(key, existing_id)
                in_flight = self.creating.get(existing_id)
            else:
                session_id = session_id_from(self.runtime.new_uuid_hex())
                session = Session.create(session_id, self.runtime.sandbox_id, spec, key, self.runtime.generation,
                                         self.runtime.clock.now_ns())
                self.runtime.store.adopt(session, committed=False)
                self.runtime.pipeline.stage(self.runtime.store, session)
                self.creating[session_id] = asyncio.Event()
        if existing_id is not None:
            if in_flight is not None:
                await in_flight.wait()
            return existing, False
        try:
            async with self.runtime.lifecycle_lock(session_id):
                if session.desired_state == "running":
                    # A start failure is recorded on the attempt; create still answers 201.
                    await self.runtime.attempts.start_attempt(session, "created")
                await self.runtime.pipeline.flush(self.runtime.store)
        finally:
            self.creating.pop(session_id).set()
        return session, True

    async def update_session(self, session_id: str, spec: dict) -> Session:
        self.runtime.session(session_id)
        self.runtime.pipeline.check_writable(self.runtime.store)
        async with self.runtime.lifecycle_lock(session_id):
            session = self.runtime.session(session_id)  # a delete may have finished while we waited
            old_spec = session.spec
            self.runtime.attempts.record(session, session.update_spec, spec, self.runtime.clock.now_ns())
            failure = None
            if spec["lifecycle"]["desired_state"] == "stopped":
                self.runtime.attempts.cancel_timer(session.id)
                if session.has_live_attempt:
                    await self.runtime.attempts.stop_attempt(session, "desired_state_stopped")
            elif execution_changed(old_spec, spec) and session.has_live_attempt:
                await self.runtime.attempts.stop_attempt(session, "spec_replaced")
                failure = await self.runtime.attempts.start_attempt(session, "spec_updated")
            elif not session.has_live_attempt:
                failure = await self.runtime.attempts.start_attempt(session, "desired_state_running")
            await self._committed(failure)
        return session

    async def _committed(self, start_failure: Exception | None) -> None:
        """The durability point of a lifecycle call; a failed start is then a 500 (after its start_failed is committed)."""
        await self.runtime.pipeline.flush(self.runtime.store)
        if start_failure is not None:
            raise OperationFailedError(str(start_failure))

    async def set_desired_state(self, session_id: str, state: DesiredState) -> Session:
        self.runtime.session(session_id)
        if state == "running":  # a stop acts even on a full disk, then waits like any write
            self.runtime.pipeline.check_writable(self.runtime.store)
        async with self.runtime.lifecycle_lock(session_id):
            session = self.runtime.session(session_id)
            self.runtime.attempts.record(session, session.set_desired_state, state, self.runtime.clock.now_ns())
            failure = None
            if state == "stopped":
                self.runtime.attempts.cancel_timer(session.id)
                if session.has_live_attempt:
                    await self.runtime.attempts.stop_attempt(session, "desired_state_stopped")
            elif not session.has_live_attempt:
                failure = await self.runtime.attempts.start_attempt(session, "desired_state_running")
            await self._committed(failure)
        return session

    async def create_attempt(self, session_id: str, replace: bool) -> Session:
        self.runtime.session(session_id)
        self.runtime.pipeline.check_writable(self.runtime.store)
        async with self.runtime.lifecycle_lock(session_id):
            session = self.runtime.session(session_id)
            if session.has_live_attempt:
                if not replace:
                    raise AttemptRunningError()
                await self.runtime.attempts.stop_attempt(session, "attempt_replaced")
            failure = await self.runtime.attempts.start_attempt(session, "attempt_created", requested=True)
            await self._committed(failure)
        return session

    async def expire_session(self, session_id: str) -> bool:
        """Expiry: one session.expired, desired state stopped, then the stop (session_expired)."""
        async with self.runtime.lifecycle_lock(session_id):
            session = self.runtime.store.sessions.get(session_id)
            if session is None or session_id in self.runtime.deleting:
                return False
            now = self.runtime.clock.now_ns()
            # Re-decided under the lock: input or a spec change may have come in meanwhile.
            if not expiry_due(session.spec["lifecycle"], session.created_ns, session.last_activity_ns, now) \
                    or not self.runtime.attempts.record(session, session.expire, now):
                return False
            self.runtime.attempts.cancel_timer(session_id)
            if session.has_live_attempt:
                await self.runtime.attempts.stop_attempt(session, "session_expired")
            await self.runtime.pipeline.flush(self.runtime.store)
        return True

    async def delete_session(self, session_id: str) -> None:
        self.runtime.session(session_id)
        async with self.runtime.lifecycle_lock(session_id):
            session = self.runtime.session(session_id)
            self.runtime.deleting.add(session_id)
            try:
                self.runtime.attempts.cancel_timer(session_id)
                if session.has_live_attempt:
                    await self.runtime.attempts.stop_attempt(session, "session_deleted")
                await self.runtime.pipeline.flush(self.runtime.store)
            except BaseException:
                self.runtime.deleting.discard(session_id)
                raise
            self.runtime.hub.close_session(session_id, "deleted")
            self.runtime.pipeline.drop(session)
            self.runtime.store.forget(session)
            self.runtime.retention.forget(session_id)
            self.runtime.journal.read_ahead.drop(session_id)
            self.runtime.deleting.discard(session_id)
        self.runtime._lifecycle_locks.pop(session_id, None)
        await asyncio.to_thread(self.runtime.store.delete_journal, session_id)
