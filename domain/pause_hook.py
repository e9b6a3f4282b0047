"""The pause hook and the resume checks of a sandbox runtime.

Pause, in this order: a barrier (new mutating session calls and WebSocket upgrades get 503
while it runs; reads and SSE keep working), running attempts frozen (SIGSTOP) and recorded
(``session.paused``), everything pending committed, then the point of no return: streams
end, a snapshot of every aggregate taken from memory is committed with the sandbox's
``paused`` mark, the store is checkpointed and closed, the manifest written, and only then
the runtime released (every process ended and reaped). Before that point a failure or a
runtime call cancelling a ttl pause thaws everything back; after it the pause completes.
"""
from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING

from .ports import Checkpoints, Clock
from .retention import take_snapshot
from .runtime_gate import RuntimeGate

if TYPE_CHECKING:
    from .hub import Hub
    from .sandbox_runtime import SandboxRuntime

log = logging.getLogger(__name__)

MANIFEST_FORMAT = 1
BARRIER_DRAIN_S = 30.0  # the barrier waits up to 30 s for in-flight calls
READS_DRAIN_S = 5.0     # reads still running when the store is about to close


class PauseCancelled(Exception):
    """An automatic (ttl) pause gave way to a runtime call before it committed (access cancels a ttl pause)."""


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
async def pause_runtime(runtime: SandboxRuntime, gate: RuntimeGate, checkpoints: Checkpoints, hub: Hub,
                        clock: Clock, *,
                        by_user: bool, drain_s: float):
    """Run the pause hook on a running sandbox. Returns the paused Sandbox record once the
    runtime is released; until then the sandbox still shows ``running`` (a pause's answer may come before it is paused)."""
    if not await gate.drain(drain_s, reads_too=False):
        log.warning("sandbox %s: pausing with mutating calls still in flight", runtime.sandbox_id)
    await runtime.attempts.settle()
    if gate.cancel_requested:
        raise PauseCancelled()
    frozen = runtime.freeze(clock.now_ns())
    try:
        await runtime.pipeline.flush(runtime.store)
        if gate.cancel_requested:
            raise PauseCancelled()
    except BaseException:
        await runtime.thaw(frozen, clock.now_ns())
        raise
    gate.sealing = True
    end_streams(runtime, hub)  # a WebSocket must not take a request the checkpoint could miss
    try:
        paused, manifest = await _commit_snapshots(runtime, by_user, clock)
    except BaseException:  # the store refused the checkpoint: keep the runtime, as it was
        runtime.attempts.abandon_all(False)
        await runtime.thaw(frozen, clock.now_ns())
        raise
    await gate.drain(READS_DRAIN_S, reads_too=True)
    try:
        await runtime.seal(checkpoints, manifest)
    except Exception:  # the commit above is what counts; resume verifies what is on disk
        log.exception("sandbox %s: sealing the checkpoint failed", runtime.sandbox_id)
    try:
        await runtime.release()
    except Exception:  # past the point of no return the pause is done; the next start sweeps
        log.exception("sandbox %s: releasing the paused runtime failed", runtime.sandbox_id)
    return paused


async def _commit_snapshots(runtime: SandboxRuntime, by_user: bool, clock: Clock) -> tuple:
    """The point of no return: the paused mark and a snapshot of every aggregate, committed.
    The mark goes on a copy of the Sandbox record, which replaces it once the runtime is gone."""
    store, pipeline = runtime.store, runtime.pipeline
    runtime.attempts.abandon_all(True)  # from here on nothing this runtime does is a fact to record
    now = clock.now_ns()
    paused = copy.deepcopy(store.sandbox)
    paused.mark_paused(by_user, now)
    for aggregate in [*store.sessions.values(), paused]:
        pipeline.materialize(aggregate)  # output read before the freeze lands before the snapshot
        pipeline.add_snapshot(store, aggregate, take_snapshot(aggregate))
    pipeline.stage(store, paused)
    await pipeline.flush(store)
    return paused, build_manifest(store, paused, by_user, now)


def end_streams(runtime: SandboxRuntime, hub: Hub) -> None:
    """The runtime is going away: SSE streams end, WebSockets close with 1001."""
    for session in runtime.list_sessions():
        hub.close_session(session.id, "shutdown")
