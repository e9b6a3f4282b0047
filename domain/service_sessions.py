"""The session behind a ``cmd`` service, kept running for the ingress.

On a request for a ``cmd`` service the ingress asks for its session: created with the service's
idempotency key the first time, its spec replaced when the service changed since, started when it
is not running (stopped, exited, failed). A session in backoff is left to its restart timer. Every
step goes through the sandbox's ``SessionLifecycle`` (the same path as the API's own calls), so the
session is journaled, restarted on failure and recovered after a pause like any other.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .model.commands import CreateSession, DeleteSession, UpdateSession
from .model.phases import Phase
from .model.service_session import KEY_PREFIX, idempotency_key, session_spec
from .model.session import Session

if TYPE_CHECKING:
    from .sandbox_runtime import SandboxRuntime


class ServiceSessions:
    """One per ingress: a lock per (sandbox, service), so concurrent first requests create one
    session between them."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def _lock(self, sandbox_id: str, service_id: str) -> asyncio.Lock:
        return self._locks.setdefault((sandbox_id, service_id), asyncio.Lock())

    def forget_sandbox(self, sandbox_id: str) -> None:
        for key in [k for k in self._locks if k[0] == sandbox_id]:
            del self._locks[key]

    async def ensure(self, runtime: SandboxRuntime, service: dict) -> Session:
        """The service's session, running (or starting, or waiting out its backoff)."""
        spec = session_spec(service)
        key = idempotency_key(service["id"])
        async with self._lock(runtime.sandbox_id, service["id"]):
            session_id = runtime.store.creation_keys.get(key)
            session = runtime.store.sessions.get(session_id) if session_id else None
            if session is None:
                session, _ = await runtime.handle(CreateSession(spec, key))
                return session
            # Changed since (the service, or someone stopped it): the spec is put back, which also
            # starts it; an attempt that ended is started again unless its restart timer will.
            if session.spec != spec or (not session.has_live_attempt and session.phase != Phase.BACKOFF):
                return await runtime.handle(UpdateSession(session.id, spec))
            return session


async def retire_removed(runtime: SandboxRuntime, services: list[dict]) -> None:
    """Delete the sessions of ``cmd`` services that are gone from the list (or no longer ``cmd``):
    a removed service must not keep serving on its port."""
    keep = {idempotency_key(s["id"]) for s in services if (s.get("runtime") or {}).get("type") == "cmd"}
    for key, session_id in list(runtime.store.creation_keys.items()):
        if key.startswith(KEY_PREFIX) and key not in keep and session_id in runtime.store.sessions:
            await runtime.handle(DeleteSession(session_id))
