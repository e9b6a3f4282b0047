"""Sandbox runtimes over time: pause, resume, auto-resume, ttl, and what a server start finds.

A sandbox is either *running* (in ``running``: an open store, sessions in memory, processes)
or *parked* (in ``parked``: only its Sandbox record; its rootfs holds the sealed store and the
checkpoint manifest). Pause moves it from one to the other through the pause hook
(``pause_hook.pause_runtime``). Resume verifies the manifest, reopens the store, rebuilds every
aggregate from its snapshot plus tail, and replaces the runtime (generation + 1, each session's ``runtime_recovery``).
A server start treats a sandbox that was not cleanly paused as a crash: the same replacement.
"""
from __future__ import annotations

import asyncio
import copy
import logging
from typing import TYPE_CHECKING

from .pause_hook import BARRIER_DRAIN_S, PauseCancelled, pause_runtime, verify_manifest
from .runtime_gate import RuntimeGate, Ticket
from .model.errors import (
    DomainError,
    InsufficientStorageError,
    SandboxNotFoundError,
    SandboxResumeFailedError,
    StoreUnavailableError,
    UnavailableError,
)
from .model.sandbox import FailedSandbox
from .ports import SandboxOwnership
from .runtime_factory import RuntimeFactory, UnclaimedStore
from .sandbox_registry import Retirement, SandboxRegistry
from .task_owner import TaskOwner

if TYPE_CHECKING:
    from .sandbox_networking import SandboxNetworking

log = logging.getLogger(__name__)

ADMIT_TRIES = 3
# A lifecycle call (pause, resume, update, refresh, delete) waits at most this long for the one
# before it on the same sandbox, then gets 503: a pause is bounded (well under a second with
# any number of processes), so only a stuck store or a slow checkpoint copy makes one wait.
LOCK_WAIT_S = 30.0
# Room a pause needs for its snapshots and the WAL of a checkpoint, and a claim for a new
# store and its first writes: less than this free, either is refused (507) before it starts.
MIN_FREE_BYTES = 16 * 1024 * 1024


class RuntimeTransitions:
    """The runtime transitions of the registry's sandboxes (``manager.transitions``): admission,
    pause, resume, delete, the start-up decision, config changes and take-overs. Each runs under
    the sandbox's gate (``exclusive``); the registry holds the sandboxes, the factory makes stores
    and runtimes."""

    def __init__(self, registry: SandboxRegistry, factory: RuntimeFactory, network: SandboxNetworking,
                 ownership: SandboxOwnership) -> None:
        self.registry = registry
        self.factory = factory
        self.network = network
        self.ownership = ownership
        self.pipeline = factory.pipeline
        self.clock = factory.clock
        self.checkpoints = factory.checkpoints
        self._transitions = TaskOwner("sandbox transitions")  # each runs to its end, whoever waits

    async def exclusive(self, sandbox_id: str, what: str, body):
        """Run ``body(gate)`` as the sandbox's one lifecycle transition at a time, to its end.

        It runs as a task of its own that the caller awaits through a shield: a client that
        gives up (its request cancelled) leaves the transition to finish instead of cutting it
        off between its commit and its release, which had left a sealed store behind a running
        record. A call that cannot start within LOCK_WAIT_S gets 503 naming what is running."""
        if not self.registry.knows(sandbox_id):
            raise SandboxNotFoundError()  # no gate object is made for an id that does not exist
        task = self._transitions.spawn(self._locked(sandbox_id, what, body), f"{what} {sandbox_id}",
                                       expected=(DomainError,))
        return await asyncio.shield(task)

    async def _locked(self, sandbox_id: str, what: str, body):
        gate = self.registry.gate(sandbox_id)
        try:
            async with asyncio.timeout(LOCK_WAIT_S):
                await gate.lock.acquire()
        except TimeoutError:
            raise UnavailableError(f"sandbox is busy ({gate.busy or 'a lifecycle call'} in progress); "
                                   "try again") from None
        gate.busy = what
        try:
            return await body(gate)
        finally:
            gate.busy = None
            gate.lock.release()

    async def settle(self, timeout_s: float) -> None:
        """Let the transitions in progress finish (a delete's tear-down after its answer too), for
        at most ``timeout_s`` each."""
        await self._transitions.wait(timeout_s)
        await self.registry.settle(timeout_s)

    # ---- session calls ------------------------------------------------------------------------
    async def admit(self, sandbox_id: str, *, mutating: bool, streaming: bool) -> Ticket | None:
        """Let a session call in: a paused sandbox is resumed when it has
        ``auto_resume``, else 503; while a pause runs, mutating calls get 503."""
        registry = self.registry
        for _ in range(ADMIT_TRIES):
            if not registry.knows(sandbox_id):
                raise SandboxNotFoundError()  # no gate object is kept for an id that does not exist
            if sandbox_id in registry.failed:
                registry.runtime_for(sandbox_id)  # 503 with the reason it failed
            gate = registry.gate(sandbox_id)
            if sandbox_id in registry.running:
                if gate.barrier and (gate.sealing or gate.automatic):
                    gate.cancel_requested = gate.automatic  # a ttl pause gives way to access
                    await self.exclusive(sandbox_id, "admission", _nothing)  # the pause ends first
                    continue
                if gate.barrier and mutating:
                    raise UnavailableError("sandbox lifecycle barrier is active")
                return None if streaming else gate.enter(mutating)
            sandbox = registry.parked.get(sandbox_id)
            if sandbox is None:
                raise SandboxNotFoundError()
            if not sandbox.auto_resume:
                raise UnavailableError("sandbox is not running and auto_resume is disabled")
            await self.resume(sandbox_id)
        raise UnavailableError("sandbox is waking up")

    # ---- delete ---------------------------------------------------------------------------------------
    async def delete(self, sandbox_id: str) -> None:
        """The sandbox and everything of it (answered once it is gone from the books; the rest of
        the tear-down follows: ``SandboxRegistry.retire``)."""
        await self.exclusive(sandbox_id, "delete", lambda gate: self._delete(sandbox_id))

    async def _delete(self, sandbox_id: str) -> None:
        self.registry.sandbox(sandbox_id)  # deleted by the call before this one: 404
        await self.registry.retire(sandbox_id, Retirement.DELETED)

    # ---- pause and resume ----------------------------------------------------------------------
    async def pause(self, sandbox_id: str, *, by_user: bool = True, automatic: bool = False,
                    drain_s: float = BARRIER_DRAIN_S):
        """Checkpoint a running sandbox and release its runtime (idempotent when paused).
        ``by_user`` pauses stay paused across a server restart; shutdown ones come back."""
        return await self.exclusive(sandbox_id, "pause", lambda gate: self._pause(
            sandbox_id, gate, by_user=by_user, automatic=automatic, drain_s=drain_s))

    async def _pause(self, sandbox_id: str, gate: RuntimeGate, *, by_user: bool, automatic: bool,
                     drain_s: float):
        if sandbox_id in self.registry.parked:
            return self.registry.parked[sandbox_id]
        runtime = self.registry.runtime_for(sandbox_id)
        if self.checkpoints is None:
            raise UnavailableError("sandbox checkpoint pause is not available")
        self._check_room_to_checkpoint(runtime.store)
        gate.raise_barrier(automatic)
        try:
            paused = await pause_runtime(runtime, gate, self.checkpoints, self.factory.hub, self.clock,
                                         by_user=by_user, drain_s=drain_s)
            await self.registry.retire(sandbox_id, Retirement.PAUSED, record=paused)
            return paused
        except PauseCancelled:
            log.info("sandbox %s: ttl pause cancelled by a runtime call", sandbox_id)
        except DomainError:
            raise
        except Exception as exc:
            log.exception("sandbox %s: pause failed; the runtime keeps running", sandbox_id)
            raise UnavailableError("sandbox pause failed") from exc
        finally:
            gate.lower_barrier()
        return runtime.store.sandbox

    def _check_room_to_checkpoint(self, store) -> None:
        """Refuse a pause up front (507) rather than freeze everything and fail half-way."""
        self.pipeline.check_writable(store)
        free = store.free_bytes()
        if free is not None and free < MIN_FREE_BYTES:
            raise InsufficientStorageError(
                f"not enough free space to checkpoint the sandbox: {free} bytes free, "
                f"{MIN_FREE_BYTES} needed")

    async def resume(self, sandbox_id: str):
        """Bring a paused sandbox back as a new runtime generation (a no-op when running)."""
        return await self.exclusive(sandbox_id, "resume", lambda gate: self._resume(sandbox_id))

    async def _resume(self, sandbox_id: str):
        registry = self.registry
        runtime = registry.running.get(sandbox_id)
        if runtime is not None:
            return runtime.store.sandbox
        if sandbox_id in registry.failed:  # try its store again: the cause may have gone
            try:
                await self.bring_up_or_fail(sandbox_id)
            except Exception as exc:
                raise SandboxResumeFailedError(f"sandbox resume failed: {exc}") from None
            return registry.sandbox(sandbox_id)
        sandbox = registry.parked.get(sandbox_id)
        if sandbox is None:
            raise SandboxNotFoundError()
        if sandbox.hard_expires_ns and self.clock.now_ns() >= sandbox.hard_expires_ns:
            await registry.retire(sandbox_id, Retirement.DELETED)
            raise SandboxNotFoundError()
        await self._take(sandbox_id)
        try:
            await asyncio.to_thread(self.checkpoints.fetch, sandbox_id, False)
            store = await asyncio.to_thread(self._reopen_checked, sandbox_id)
            await self._new_runtime(sandbox_id, store)
        except DomainError:
            raise
        except Exception as exc:  # e.g. an unreadable store: the sandbox stays paused
            log.exception("sandbox %s: resume failed", sandbox_id)
            raise SandboxResumeFailedError("sandbox resume failed") from exc
        return store.sandbox

    def _reopen_checked(self, sandbox_id: str):
        """Read and verify the manifest against the reopened store (sync: run in a thread)."""
        try:
            manifest = self.checkpoints.read_manifest(sandbox_id)
        except ValueError as exc:
            raise SandboxResumeFailedError(f"sandbox resume failed: {exc}") from None
        store = self.factory.open_loaded(sandbox_id)
        if manifest is None:  # the pause committed but its manifest never reached the disk
            log.warning("sandbox %s: no checkpoint manifest; resuming from the store alone", sandbox_id)
            return store
        problems = verify_manifest(manifest, store)
        if problems:
            store.close()
            raise SandboxResumeFailedError("sandbox resume failed: " + "; ".join(problems))
        return store

    async def _new_runtime(self, sandbox_id: str, store) -> None:
        runtime = self.factory.build(sandbox_id, store)
        try:
            await self.network.attach(runtime)  # before any recovered attempt starts
            await self.factory.replace(runtime)
        except BaseException:
            await self.registry.retire(sandbox_id, Retirement.FAILED_START, runtime=runtime)
            raise
        self.registry.activate(runtime)
        if self.checkpoints is not None:  # from now on a restart without a pause is a crash
            await asyncio.to_thread(self.checkpoints.discard_manifest, sandbox_id)

    async def _take(self, sandbox_id: str) -> None:
        """This node's lease on the sandbox, before anything of it runs here (more than one node)."""
        if not await asyncio.to_thread(self.ownership.acquire, sandbox_id):
            self.registry.forget_stale(sandbox_id)
            raise UnavailableError("the sandbox is running on another node; try again")

    async def adopt(self, sandbox_id: str, where) -> str | None:
        """A sandbox nobody runs now (more than one node): parked here when a user paused it, else
        taken over here. Returns the owner's URL when another node was quicker."""
        async with self.registry.gate(sandbox_id).lock:
            if sandbox_id in self.registry.running:
                return None
            store = await asyncio.to_thread(self.factory.open_loaded, sandbox_id)
            sandbox = store.sandbox
            if sandbox.status == "paused" and sandbox.paused_by_user:
                await asyncio.to_thread(store.close)
                self.registry.park(sandbox)
                return None
            if not await asyncio.to_thread(self.ownership.acquire, sandbox_id):
                await asyncio.to_thread(store.close)
                return (await asyncio.to_thread(self.ownership.whereabouts, sandbox_id)).owner_url
            self.registry.forget_stale(sandbox_id)
            log.info("sandbox %s: taken over by this node", sandbox_id)
            try:
                # A crash leaves the newest workspace where it ran; elsewhere the last checkpoint.
                await asyncio.to_thread(self.checkpoints.fetch, sandbox_id, where.last_owner_here)
                await self._bring_up_store(sandbox_id, store)
            except BaseException:
                await asyncio.to_thread(self.ownership.release, sandbox_id, True)
                raise
        return None

    # ---- server start ----------------------------------------------------------------------------
    async def bring_up_or_fail(self, sandbox_id: str) -> None:
        """Bring a sandbox found at start up; one whose store cannot be opened is listed as failed
        (and the error raised), one whose claim never completed is removed."""
        try:
            await self.bring_up(sandbox_id)
            self.registry.recover(sandbox_id)
        except UnclaimedStore:
            log.info("sandbox %s: its claim never completed; removing it", sandbox_id)
            await asyncio.to_thread(self.factory.remove_files, sandbox_id)
        except Exception as exc:
            log.exception("sandbox %s could not be opened; listed as failed", sandbox_id)
            known = await asyncio.to_thread(self.factory.stored_record, sandbox_id)
            self.registry.fail(FailedSandbox(sandbox_id, f"its store could not be opened: {exc}", known))
            raise

    async def bring_up(self, sandbox_id: str) -> None:
        """A sandbox found at server start: parked if a user paused it, else a new runtime."""
        if self.ownership.clustered:  # it was this node's: take its lease back first
            await self._take(sandbox_id)
        store = await asyncio.to_thread(self.factory.open_loaded, sandbox_id)
        await self._bring_up_store(sandbox_id, store)

    async def _bring_up_store(self, sandbox_id: str, store) -> None:
        sandbox = store.sandbox
        if sandbox.status == "paused" and self.checkpoints is not None:
            try:
                manifest = await asyncio.to_thread(self.checkpoints.read_manifest, sandbox_id)
            except ValueError:
                manifest = {}  # unreadable: a resume will say so (sandbox_resume_failed)
            if sandbox.paused_by_user and manifest is not None:
                # A crash between the manifest and the release leaves frozen processes behind.
                await asyncio.to_thread(self.factory.reap_leftovers, store)
                await asyncio.to_thread(self.checkpoints.seal, sandbox_id, store)
                self.registry.park(sandbox)
                await asyncio.to_thread(self.ownership.release, sandbox_id, False)
                return
            if manifest is None:
                log.warning("sandbox %s: its pause never completed; replacing the runtime", sandbox_id)
        await self._new_runtime(sandbox_id, store)

    # ---- the sandbox record ----------------------------------------------------------------------
    async def update(self, sandbox_id: str, changes: dict):
        """Partial merge of the config; a memory change replaces the runtime,
        a network change is applied live (``sandbox_networking.py``)."""
        before = await self.exclusive(sandbox_id, "update", lambda gate: self._reconfigure(sandbox_id, changes))
        if sandbox_id in self.registry.running and "resources" in changes and changes["resources"] != before:
            await self.pause(sandbox_id, by_user=False)
            await self.resume(sandbox_id)
        return self.registry.sandbox(sandbox_id)

    async def _reconfigure(self, sandbox_id: str, changes: dict):
        """The config change itself; returns the resources before it."""
        sandbox = self.registry.sandbox(sandbox_id)
        before = sandbox.config.get("resources")
        if "network" in changes:
            old_network = self.network.policy_of(sandbox)
            await self.network.apply(sandbox_id, changes["network"])
        try:
            await self._record_sandbox(sandbox_id, lambda sb, now: sb.reconfigure(changes, now))
        except BaseException:
            if "network" in changes:
                await self.network.apply(sandbox_id, old_network)
            raise
        return before

    async def refresh(self, sandbox_id: str, duration_s: int):
        return await self.exclusive(sandbox_id, "refresh", lambda gate: self._record_sandbox(
            sandbox_id, lambda sb, now: sb.refresh(duration_s, now)))

    async def _record_sandbox(self, sandbox_id: str, command):
        now = self.clock.now_ns()
        runtime = self.registry.running.get(sandbox_id)
        if runtime is not None:
            if runtime.store.released:  # handed over or sealed: it cannot record this change
                raise UnavailableError("sandbox lifecycle barrier is active")
            # On a draft, shown once committed (a GET meanwhile shows the record as stored).
            draft = copy.deepcopy(runtime.store.sandbox)
            command(draft, now)
            self.pipeline.stage(runtime.store, draft)
            try:
                await self.pipeline.flush(runtime.store)
            except (InsufficientStorageError, StoreUnavailableError):
                runtime.store.sandbox = draft  # held in order: it lands once the store writes again
                raise
            runtime.store.sandbox = draft
            return draft
        sandbox = self.registry.parked.get(sandbox_id)
        if sandbox is None:
            raise SandboxNotFoundError()
        # Paused: only the stored record changes. Open the sealed store, commit, seal it again
        # (with more than one node, under a lease taken for this write alone).
        # The change is made on a draft that replaces the parked record only once committed:
        # a refused commit (a full disk) must leave the record at the version the store holds,
        # or the next change would be stored with a gap and the sandbox could not be loaded.
        await self._take(sandbox_id)
        try:
            store = await asyncio.to_thread(self.factory.open_store, sandbox_id)
            draft = copy.deepcopy(sandbox)
            command(draft, now)
            self.pipeline.stage(store, draft)
            try:
                await self.pipeline.flush(store)
            finally:
                store.released = True
                await self.pipeline.run_in_writer(lambda: store.journal.seal())
        finally:
            await asyncio.to_thread(self.ownership.release, sandbox_id, False)
        self.registry.replace_record(draft, expected=sandbox)
        return draft


async def _nothing(gate: RuntimeGate) -> None:
    """An admission waiting for a committed pause to end takes the lock and gives it back."""
