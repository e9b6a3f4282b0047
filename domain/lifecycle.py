"""The pause hook and the resume checks of a sandbox runtime (architecture §6, contract §4.1, §6.15).

Pause, in this order: a barrier (new mutating session calls and WebSocket upgrades get 503
while it runs; reads and SSE keep working), running attempts frozen (SIGSTOP) and recorded
(``session.paused``), everything pending committed, then the point of no return: streams
end, a snapshot of every aggregate taken from memory is committed with the sandbox's
``paused`` mark, the store is checkpointed and closed, the manifest written, and only then
the runtime released (every process ended and reaped). Before that point a failure or a
runtime call cancelling a ttl pause thaws everything back; after it the pause completes.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import signal
import weakref
from typing import TYPE_CHECKING

from .model.phases import Phase
from .ports import Checkpoints, Clock
from .retention import take_snapshot

if TYPE_CHECKING:
    from .hub import Hub
    from .service import SandboxService

log = logging.getLogger(__name__)

MANIFEST_FORMAT = 1
BARRIER_DRAIN_S = 30.0  # contract §6.15: the barrier waits up to 30 s for in-flight calls
READS_DRAIN_S = 5.0     # reads still running when the store is about to close
SETTLE_S = 5.0          # an attempt whose process is being started when the freeze comes


class PauseCancelled(Exception):
    """An automatic (ttl) pause gave way to a runtime call before it committed (§4.2)."""


class Ticket:
    """One admitted session call; released once, by the response or when the request is freed."""

    __slots__ = ("_gate", "_mutating", "_open", "__weakref__")

    def __init__(self, gate: "RuntimeGate", mutating: bool) -> None:
        self._gate, self._mutating, self._open = gate, mutating, True

    def release(self) -> None:
        if self._open:
            self._open = False
            self._gate.leave(self._mutating)

    def bind(self, lifetime: object) -> None:
        """Release when ``lifetime`` (the request, any weak-referenceable object) is freed:
        a handler cancelled by a client disconnect never sees its response middleware."""
        weakref.finalize(lifetime, self.release)


class RuntimeGate:
    """Per-sandbox lifecycle lock, pause barrier, and count of admitted calls still running."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.barrier = False
        self.sealing = False      # past the point of no return: callers wait for the pause to end
        self.automatic = False    # the barrier belongs to a ttl pause, which access cancels
        self.cancel_requested = False
        self.inflight = {True: 0, False: 0}  # mutating -> admitted calls still running
        self._changed = asyncio.Event()

    def raise_barrier(self, automatic: bool) -> None:
        self.barrier, self.automatic, self.cancel_requested, self.sealing = True, automatic, False, False

    def lower_barrier(self) -> None:
        self.barrier = self.automatic = self.cancel_requested = self.sealing = False

    def enter(self, mutating: bool) -> Ticket:
        self.inflight[mutating] += 1
        return Ticket(self, mutating)

    def leave(self, mutating: bool) -> None:
        self.inflight[mutating] -= 1
        self._changed.set()

    async def drain(self, timeout: float, reads_too: bool) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.inflight[True] or (reads_too and self.inflight[False]):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                return False
        return True


# ---- snapshots and the manifest ---------------------------------------------------------------
def build_manifest(store, sandbox, by_user: bool, at_ns: int) -> dict:
    return {"format": MANIFEST_FORMAT, "sandbox_id": sandbox.id,
            "runtime_generation": sandbox.runtime_generation, "taken_at_ns": at_ns,
            "paused_by_user": by_user, "sandbox_version": sandbox.version,
            "sessions": {sid: s.version for sid, s in store.sessions.items()}}


def verify_manifest(manifest: dict, store) -> list[str]:
    """What is wrong with the reopened store against its manifest ([] when it is whole)."""
    sandbox = store.sandbox
    if manifest.get("format") != MANIFEST_FORMAT:
        return [f"unknown manifest format {manifest.get('format')!r}"]
    if manifest.get("sandbox_id") != sandbox.id:
        return [f"manifest belongs to sandbox {manifest.get('sandbox_id')!r}"]
    problems = []
    if manifest.get("runtime_generation") != sandbox.runtime_generation:
        problems.append(f"generation {sandbox.runtime_generation} != {manifest.get('runtime_generation')}")
    if sandbox.version < manifest.get("sandbox_version", 0):
        problems.append("sandbox record is behind its checkpoint")
    for session_id, version in (manifest.get("sessions") or {}).items():
        session = store.sessions.get(session_id)
        if session is None or session.version < version:  # acknowledged events are missing
            problems.append(f"session {session_id} is behind its checkpoint (version {version})")
    return problems


# ---- the hook ---------------------------------------------------------------------------------
async def pause_runtime(service: SandboxService, gate: RuntimeGate, checkpoints: Checkpoints, hub: Hub,
                        clock: Clock, *,
                        by_user: bool, drain_s: float):
    """Run the pause hook on a running sandbox. Returns the paused Sandbox record once the
    runtime is released; until then the sandbox still shows ``running`` (contract §1.7)."""
    if not await gate.drain(drain_s, reads_too=False):
        log.warning("sandbox %s: pausing with mutating calls still in flight", service.sandbox_id)
    await _settle(service.reconciler)
    if gate.cancel_requested:
        raise PauseCancelled()
    frozen = freeze(service, clock.now_ns())
    try:
        await service.pipeline.flush(service.store)
        if gate.cancel_requested:
            raise PauseCancelled()
    except BaseException:
        await thaw(service, frozen, clock.now_ns())
        raise
    gate.sealing = True
    end_streams(service, hub)  # a WebSocket must not take a request the checkpoint could miss
    try:
        paused, manifest = await _commit_snapshots(service, by_user, clock)
    except BaseException:  # the store refused the checkpoint: keep the runtime, as it was
        for live in service.reconciler.live.values():
            live.abandoned = False
        await thaw(service, frozen, clock.now_ns())
        raise
    await gate.drain(READS_DRAIN_S, reads_too=True)
    service.store.released = True  # the pipeline stages nothing more for this store
    try:  # on the writer thread, after every commit submitted so far
        await service.pipeline.run_in_writer(lambda: _seal(checkpoints, service, manifest))
    except Exception:  # the commit above is what counts; resume verifies what is on disk
        log.exception("sandbox %s: sealing the checkpoint failed", service.sandbox_id)
    await service.release()
    return paused


def freeze(service: SandboxService, at_ns: int) -> list:
    """SIGSTOP every running attempt and record ``session.paused``; no restart may begin."""
    reconciler = service.reconciler
    service.expiry.stop()
    service.retention.stop()  # no store maintenance while the checkpoint is being taken
    for session_id in list(reconciler.timers):
        reconciler.cancel_timer(session_id)
    frozen = []
    for session in service.list_sessions():
        live = reconciler.live.get(session.id)
        if live is None or live.handle is None or live.exited.is_set() \
                or session.phase not in (Phase.STARTING, Phase.RUNNING):
            continue
        live.handle.send_signal(signal.SIGSTOP)
        reconciler.record(session, session.freeze, at_ns)
        frozen.append((session, live))
    service.runtime.freeze(True)  # the sandbox's freezer cgroup, where the runtime has one
    return frozen


async def thaw(service: SandboxService, frozen: list, at_ns: int) -> None:
    """Undo a freeze whose pause did not commit: SIGCONT, ``session.resumed``, restarts re-armed."""
    reconciler = service.reconciler
    service.runtime.freeze(False)
    for session, live in frozen:
        live.handle.send_signal(signal.SIGCONT)
        reconciler.record(session, session.thaw, at_ns)
    for session in service.list_sessions():  # the freeze cancelled their backoff timers
        if session.phase == Phase.BACKOFF and session.desired_state == "running" \
                and session.id not in reconciler.timers:
            await reconciler.start_attempt(session, "restart_policy")
    service.expiry.start()
    service.retention.start()
    try:
        await service.pipeline.flush(service.store)
    except Exception:
        log.exception("sandbox %s: recording the thaw failed", service.sandbox_id)


async def _commit_snapshots(service: SandboxService, by_user: bool, clock: Clock) -> tuple:
    """The point of no return: the paused mark and a snapshot of every aggregate, committed.
    The mark goes on a copy of the Sandbox record, which replaces it once the runtime is gone."""
    store, pipeline, reconciler = service.store, service.pipeline, service.reconciler
    for session_id in list(reconciler.timers):  # an exit racing the freeze may have armed one
        reconciler.cancel_timer(session_id)
    for live in reconciler.live.values():
        live.abandoned = True  # from here on nothing this runtime does is a fact to record
    now = clock.now_ns()
    paused = copy.deepcopy(store.sandbox)
    paused.mark_paused(by_user, now)
    for aggregate in [*store.sessions.values(), paused]:
        pipeline.materialize(aggregate)  # output read before the freeze lands before the snapshot
        pipeline.add_snapshot(store, aggregate, take_snapshot(aggregate))
    pipeline.stage(store, paused)
    await pipeline.flush(store)
    return paused, build_manifest(store, paused, by_user, now)


def _seal(checkpoints: Checkpoints, service: SandboxService, manifest: dict) -> None:
    checkpoints.seal(service.sandbox_id, service.store)
    checkpoints.write_manifest(service.sandbox_id, manifest)


def end_streams(service: SandboxService, hub: Hub) -> None:
    """The runtime is going away: SSE streams end, WebSockets close with 1001."""
    for session in service.list_sessions():
        hub.close_session(session.id, "shutdown")


async def _settle(reconciler) -> None:
    """Wait for attempts whose process is still being started, so none escapes the freeze."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    while any(live.handle is None and not live.exited.is_set() for live in reconciler.live.values()):
        if loop.time() >= deadline:
            log.warning("attempts still starting after %.0f s; pausing anyway", SETTLE_S)
            return
        await asyncio.sleep(0.005)
