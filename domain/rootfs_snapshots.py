"""Rootfs snapshots of sandboxes: create (of a running or a paused sandbox), list, get, delete, expiry,
restore of a paused sandbox, and the copies claims, forks and templates start from.

A snapshot is a copy of the sandbox's disk, taken under the sandbox's lifecycle lock
(``RuntimeTransitions.exclusive``) so that no pause, resume, update or delete runs meanwhile. Of a
running sandbox: its dirty data is written back while it still runs, then the runtime barrier
goes up (mutating session, context and file calls get 503; reads go on), its processes are
frozen (the freezer cgroup), its filesystem is frozen, the image is copied (a reflink in the disk
pool: a fraction of a millisecond whatever it holds), and everything is thawed. The sandbox keeps
running on the same runtime generation. Of a paused one: the image is copied as it is.

Session state is not in the disk (journals live in ``state/``, outside it), so a snapshot never
carries sessions: a sandbox made from one starts with none. Restoring a sandbox's *own* snapshot
keeps its sessions and their journals (history is never rewritten; the next resume recovers them
as after any pause); restoring another sandbox's removes its sessions, as the contract says.
"""
from __future__ import annotations

import asyncio
import copy
import logging
from typing import TYPE_CHECKING, Callable

from .model.access import Principal
from .model.errors import (
    InsufficientStorageError,
    SandboxConflictError,
    SandboxNotFoundError,
    SnapshotNotFoundError,
    UnavailableError,
)
from .model.rootfs_snapshot import TEMPLATE, USER, RootfsSnapshot, is_snapshot_id, new_snapshot_id
from .pause_hook import build_manifest
from .ports import RootfsSnapshotStore
from .store_faults import store_error
from .task_owner import TaskOwner

if TYPE_CHECKING:
    from .runtime_factory import RuntimeFactory
    from .runtime_gate import RuntimeGate
    from .runtime_transitions import RuntimeTransitions
    from .sandbox_registry import SandboxRegistry

log = logging.getLogger(__name__)

CAPTURE_DRAIN_S = 5.0      # mutating calls already running get this long to finish before the freeze
EXPIRY_SWEEP_S = 30.0
NOT_COPYABLE = "sandbox rootfs source operation requires a running or paused sandbox"
NOT_PAUSED = "sandbox rootfs operation requires a paused sandbox"


class RootfsSnapshots:
    def __init__(self, registry: SandboxRegistry, transitions: RuntimeTransitions, factory: RuntimeFactory,
                 store: RootfsSnapshotStore | None, quota_bytes: int, *, clustered: bool = False,
                 new_id: Callable[[], str] = new_snapshot_id) -> None:
        self.registry = registry
        self.transitions = transitions
        self.factory = factory
        self.files = factory.files
        self.clock = factory.clock
        self.clustered = clustered
        self.store = store           # None: snapshots are unavailable here (503, with the reason)
        self.quota_bytes = quota_bytes
        self.new_id = new_id
        self._reserved: dict[str, int] = {}  # team -> bytes of snapshots being taken right now
        self._tasks = TaskOwner("rootfs snapshots")

    # ---- availability and the quota ---------------------------------------------------------------
    def check_available(self) -> RootfsSnapshotStore:
        reason = self.files.snapshots_unavailable()
        if self.clustered:
            reason = "rootfs snapshots are kept on one machine; this server runs with more than one"
        if reason or self.store is None:
            raise UnavailableError(reason or "rootfs snapshots are not available on this server")
        return self.store

    def team_usage(self, team_id: str) -> int:
        """Bytes the team's snapshots count against its quota (each at its size when taken)."""
        records = self.store.records() if self.store is not None else []
        return sum(r.get("size_bytes", 0) for r in records if r.get("team_id", "") == team_id) \
            + self._reserved.get(team_id, 0)

    def _reserve(self, team_id: str, size: int) -> None:
        used = self.team_usage(team_id)
        if used + size > self.quota_bytes:
            raise InsufficientStorageError(
                f"the team's rootfs snapshots would count {used + size} bytes, over its quota of "
                f"{self.quota_bytes} (each snapshot counts what its disk had allocated when taken; "
                "delete snapshots to free it)")
        self._reserved[team_id] = self._reserved.get(team_id, 0) + size

    def _unreserve(self, team_id: str, size: int) -> None:
        self._reserved[team_id] = self._reserved.get(team_id, 0) - size
        if self._reserved[team_id] <= 0:
            del self._reserved[team_id]

    # ---- the copy ---------------------------------------------------------------------------------
    async def copy_disk(self, sandbox_id: str, target, what: str) -> None:
        """``target`` made a consistent copy of the sandbox's disk, under its lifecycle lock."""
        registry, files = self.registry, self.files
        gate = registry.gate(sandbox_id) if registry.knows(sandbox_id) else None
        if gate is not None and gate.barrier and gate.automatic:
            gate.cancel_requested = True  # a ttl pause in progress gives way, as to any runtime call

        async def body(gate: RuntimeGate) -> None:
            if sandbox_id in registry.running:
                runtime = registry.running[sandbox_id]
                await asyncio.to_thread(files.sync, sandbox_id)  # the bulk, while it still runs
                gate.raise_barrier(False)
                try:
                    await gate.drain(CAPTURE_DRAIN_S, reads_too=False)
                    runtime.isolation.freeze(True)
                    try:
                        await asyncio.to_thread(files.capture, sandbox_id, target)
                    finally:
                        runtime.isolation.freeze(False)
                finally:
                    gate.lower_barrier()
            elif sandbox_id in registry.parked:
                await asyncio.to_thread(files.capture, sandbox_id, target)
            elif sandbox_id in registry.failed:
                raise SandboxConflictError(NOT_COPYABLE)
            else:
                raise SandboxNotFoundError()
        try:
            await self.transitions.exclusive(sandbox_id, what, body)
        except OSError as exc:
            raise store_error(exc) from exc

    # ---- create, list, get, delete -----------------------------------------------------------------
    async def create(self, sandbox_id: str, name: str = "", description: str = "", expires_ns: int = 0,
                     kind: str = USER, snapshot_id: str = "") -> RootfsSnapshot:
        store = self.check_available()
        sandbox = self.registry.sandbox(sandbox_id)  # 404; another team's never reaches here (api/access.py)
        if sandbox.status == "failed":
            raise SandboxConflictError(NOT_COPYABLE)
        await asyncio.to_thread(self.files.admit_copy, "a rootfs snapshot")
        size = await asyncio.to_thread(self.files.disk_allocated, sandbox_id)
        self._reserve(sandbox.team_id, size)
        snapshot_id = snapshot_id or self.new_id()
        try:
            target = await asyncio.to_thread(store.begin, snapshot_id)
            try:
                await self.copy_disk(sandbox_id, target, "snapshot")
                snapshot = RootfsSnapshot(snapshot_id, sandbox_id, sandbox.team_id, self.clock.now_ns(),
                                          name, description, expires_ns, kind, size, sandbox.template,
                                          dict(sandbox.config.get("rootfs") or {}))
                await asyncio.to_thread(store.publish, snapshot_id, snapshot.to_dict())
            except BaseException:
                await asyncio.to_thread(store.abandon, snapshot_id)
                raise
        finally:
            self._unreserve(sandbox.team_id, size)
        log.info("sandbox %s: rootfs snapshot %s taken (%d bytes allocated)", sandbox_id, snapshot_id, size)
        return snapshot

    def list(self, sandbox_id: str) -> list[RootfsSnapshot]:
        """That sandbox's snapshots (not the hidden ones templates are made of), oldest first."""
        self.registry.sandbox(sandbox_id)
        now = self.clock.now_ns()
        found = [RootfsSnapshot.from_dict(r) for r in (self.store.records() if self.store else [])
                 if r.get("sandbox_id") == sandbox_id and r.get("kind", USER) == USER]
        return sorted((s for s in found if not s.expired(now)), key=lambda s: (s.created_ns, s.id))

    def get(self, snapshot_id: str, viewer: Principal | None, kind: str = USER) -> RootfsSnapshot:
        """404 for an unknown, expired or another team's snapshot alike."""
        record = self.store.record(snapshot_id) if self.store is not None and is_snapshot_id(snapshot_id) else None
        if record is None or record.get("kind", USER) != kind:
            raise SnapshotNotFoundError()
        snapshot = RootfsSnapshot.from_dict(record)
        if snapshot.expired(self.clock.now_ns()) or (viewer is not None and not viewer.sees(snapshot.team_id)):
            raise SnapshotNotFoundError()
        return snapshot

    async def delete(self, snapshot_id: str, viewer: Principal | None, kind: str = USER) -> None:
        self.get(snapshot_id, viewer, kind)
        if not await asyncio.to_thread(self.store.delete, snapshot_id):
            raise SnapshotNotFoundError()  # deleted by the call before this one

    def image_of(self, snapshot_id: str, viewer: Principal | None, kind: str = USER):
        """What a claim, a fork or a restore copies: the snapshot's image (404 as for ``get``)."""
        self.check_available()
        return self.get(snapshot_id, viewer, kind), self.store.image(snapshot_id)

    def claim_source(self, rootfs: dict, snapshot_id: str, owner: Principal | None):
        """The image a claim's disk copies (None: an empty disk): ``snapshot_id`` (the caller's
        team's, 404 otherwise), else the hidden snapshot of a template made from a sandbox. The
        claim's ``rootfs`` config records it, with the size of that disk."""
        hidden = rootfs.get("template_snapshot_id", "")
        if not snapshot_id and not hidden:
            return None
        snapshot, image = self.image_of(snapshot_id, owner) if snapshot_id else self.image_of(hidden, None, TEMPLATE)
        rootfs["snapshot_id"] = snapshot.id
        rootfs["disk_bytes"] = (snapshot.rootfs or {}).get("disk_bytes") or rootfs.get("disk_bytes")
        self.files.admit_copy("a sandbox from a rootfs snapshot")
        return image

    # ---- restore ----------------------------------------------------------------------------------
    async def restore(self, sandbox_id: str, snapshot_id: str, viewer: Principal | None) -> None:
        """A paused sandbox's disk becomes a copy of the snapshot; it stays paused (409 otherwise)."""
        self.check_available()
        self.registry.sandbox(sandbox_id)
        snapshot, image = self.image_of(snapshot_id, viewer)
        foreign = snapshot.sandbox_id != sandbox_id

        async def body(gate: RuntimeGate) -> None:
            if sandbox_id not in self.registry.parked:
                if self.registry.knows(sandbox_id):
                    raise SandboxConflictError(NOT_PAUSED)
                raise SandboxNotFoundError()
            await asyncio.to_thread(self.files.admit_copy, "a restored disk")
            try:
                await asyncio.to_thread(self.files.replace_disk, sandbox_id, image, foreign)
            except FileNotFoundError:
                raise SnapshotNotFoundError() from None  # deleted meanwhile
            except OSError as exc:
                raise store_error(exc) from exc
            await self._record_restore(sandbox_id, snapshot, foreign)
        await self.transitions.exclusive(sandbox_id, "restore", body)

    async def _record_restore(self, sandbox_id: str, snapshot: RootfsSnapshot, foreign: bool) -> None:
        """The restore in the sandbox's journal; another sandbox's snapshot also removes every session
        (their streams deleted), and the checkpoint manifest is rewritten to match."""
        factory, pipeline, checkpoints = self.factory, self.factory.pipeline, self.factory.checkpoints
        parked = self.registry.parked[sandbox_id]
        store = await asyncio.to_thread(factory.open_loaded, sandbox_id)
        try:
            removed = list(store.sessions) if foreign else []
            # On a draft that replaces the parked record once committed (as a config change does).
            draft = store.sandbox = copy.deepcopy(parked)
            draft.record_restore(snapshot.id, snapshot.sandbox_id, len(removed), self.clock.now_ns())
            for session_id in removed:
                store.forget(session_id)
            pipeline.stage(store, draft)
            await pipeline.flush(store)
            manifest = await asyncio.to_thread(checkpoints.read_manifest, sandbox_id) or {}
        except BaseException:
            await asyncio.to_thread(store.close)
            raise
        self.registry.replace_record(draft, expected=parked)

        def rewrite() -> None:
            for session_id in removed:
                store.delete_journal(session_id)
            checkpoints.seal(sandbox_id, store)
            checkpoints.write_manifest(sandbox_id, build_manifest(
                store, draft, manifest.get("paused_by_user", True), self.clock.now_ns()))
        store.released = True
        await pipeline.run_in_writer(rewrite)

    # ---- expiry -----------------------------------------------------------------------------------
    def start(self) -> None:
        if self.store is not None and not len(self._tasks):
            self._tasks.every(EXPIRY_SWEEP_S, self.sweep_expired, "the snapshot expiry sweep", self.clock.sleep,
                              now=True)

    async def stop(self) -> None:
        await self._tasks.close()

    async def sweep_expired(self) -> int:
        now = self.clock.now_ns()
        expired = [r["id"] for r in self.store.records() if RootfsSnapshot.from_dict(r).expired(now)]
        for snapshot_id in expired:
            await asyncio.to_thread(self.store.delete, snapshot_id)
        return len(expired)


__all__ = ["RootfsSnapshots", "TEMPLATE", "USER"]
