"""The lifecycle calls on one sandbox's sessions (``runtime.lifecycle``), as the API makes them:
create, update, desired state, a new attempt, expiry and delete.

Each call checks in the contract's order, records through the aggregate, and returns only
after the resulting events are committed (the durability point). The attempt runner does
the starting and stopping; one session's lifecycle calls go one at a time (its
``LiveSession.lock``).
"""
from __future__ import annotations

import asyncio

from .model.commands import DesiredState
from .model.errors import AttemptRunningError, OperationFailedError, SessionExistsError
from .model.ids import session_id_from
from .model.policies import expiry_due
from .model.session import Session
from .model.spec import execution_changed
from .ports import SessionHost


class SessionLifecycle:
    def __init__(self, runtime: SessionHost) -> None:
        self.runtime = runtime  # its sandbox's runtime, seen through the SessionHost port
        self.create_lock = asyncio.Lock()

    async def create_session(self, spec: dict, key: str) -> tuple[Session, bool]:
        """``spec`` normalized (``model.spec.normalize_spec``), ``key`` the bounded idempotency key."""
        self.runtime.pipeline.check_writable(self.runtime.store)
        # The lock covers the key check and the adoption only: starts and commits of
        # concurrent creates overlap (one commit tick serves them all), while a replay of
        # a key still being created waits for that create to finish before answering.
        async with self.create_lock:  # concurrent creates with one key yield one session
            existing_id = self.runtime.store.creation_keys.get(key) if key else None
            if existing_id is not None:
                existing = self.runtime.store.live.get(existing_id)
                if existing is None or existing.deleting:
                    raise SessionExistsError(key, existing_id, "(deleted)")
                if existing.aggregate.spec != spec:
                    raise SessionExistsError(key, existing_id)
                in_flight = existing.creating
            else:
                session_id = session_id_from(self.runtime.new_uuid_hex())
                session = Session.create(session_id, self.runtime.sandbox_id, spec, key, self.runtime.generation,
                                         self.runtime.clock.now_ns())
                live = self.runtime.store.adopt(session, committed=False)
                self.runtime.pipeline.stage(self.runtime.store, session)
                created = live.creating = asyncio.Event()
                self.runtime.expiry.notice()
        if existing_id is not None:
            if in_flight is not None:
                await in_flight.wait()
            return existing.aggregate, False
        try:
            async with live.lock:
                if session.desired_state == "running":
                    # A start failure is recorded on the attempt; create still answers 201.
                    await self.runtime.attempts.start_attempt(session, "created")
                await self.runtime.pipeline.flush(self.runtime.store)
        finally:
            live.creating = None
            created.set()
        return session, True

    async def update_session(self, session_id: str, spec: dict) -> Session:
        live = self.runtime.live(session_id)
        self.runtime.pipeline.check_writable(self.runtime.store)
        async with live.lock:
            session = self.runtime.session(session_id)  # a delete may have finished while we waited
            old_spec = session.spec
            self.runtime.attempts.record(session, session.update_spec, spec, self.runtime.clock.now_ns())
            self.runtime.expiry.notice()
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
        live = self.runtime.live(session_id)
        if state == "running":  # a stop acts even on a full disk, then waits like any write
            self.runtime.pipeline.check_writable(self.runtime.store)
        async with live.lock:
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
        live = self.runtime.live(session_id)
        self.runtime.pipeline.check_writable(self.runtime.store)
        async with live.lock:
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
        live = self.runtime.store.live.get(session_id)
        if live is None:
            return False
        async with live.lock:
            session = live.aggregate
            if live.deleting or self.runtime.store.live.get(session_id) is not live:
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
        live = self.runtime.live(session_id)
        async with live.lock:
            session = self.runtime.session(session_id)
            live.deleting = True
            try:
                live.cancel_restart()
                if session.has_live_attempt:
                    await self.runtime.attempts.stop_attempt(session, "session_deleted")
                await self.runtime.pipeline.flush(self.runtime.store)
            except BaseException:
                live.deleting = False
                raise
            self.runtime.retire_session(session_id)  # its one object popped and closed
        await asyncio.to_thread(self.runtime.store.delete_journal, session_id)
