"""SandboxManager: a node's sandboxes, composed: the registry that holds them, the factory that
makes their stores and runtimes, the transitions over them, placement, deadlines and rootfs
snapshots; and the calls that span those parts: start-up, claim, the listing, shutdown.

Starting over state that was not cleanly paused is a runtime replacement (a crash
counts): the generation goes up, leftovers of the old generation are reaped, and
every session follows its ``runtime_recovery`` policy (``RuntimeTransitions.bring_up``).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from .commits import CommitPipeline
from .deadlines import Deadlines
from .hub import Hub
from .model.access import Principal
from .model.errors import InsufficientStorageError, SnapshotNotFoundError, UnavailableError
from .model.ids import sandbox_id_from
from .model.sandbox import Sandbox
from .sandbox_networking import NoNetworks, SandboxNetworking
from .placement import Placement, SoleOwner, lease_fence
from .ports import (
    Checkpoints,
    Clock,
    Isolator,
    JournalStores,
    ProcessRunner,
    RootfsSnapshotStore,
    SandboxFiles,
    SandboxNetworks,
    SandboxOwnership,
    VolumeBindings,
)
from .rootfs_snapshots import RootfsSnapshots
from .runtime_factory import RuntimeFactory
from .runtime_transitions import MIN_FREE_BYTES, RuntimeTransitions
from .sandbox_registry import Retirement, SandboxRegistry
from .sandbox_store import SandboxStore
from .store_faults import store_error
from .templates import NoImages, NoTeamTemplates, Templates
from .volumes import NoVolumes

log = logging.getLogger(__name__)


class SandboxManager:
    def __init__(self, *, files: SandboxFiles, journals: JournalStores, pipeline: CommitPipeline, hub: Hub, pipe_runner: ProcessRunner,
                 pty_runner: ProcessRunner, isolator: Isolator, clock: Clock, new_uuid_hex: Callable[[], str], base_env: dict[str, str],
                 reap: Callable[[int, int], object], checkpoints: Checkpoints | None = None,
                 networks: SandboxNetworks | None = None, ownership: SandboxOwnership | None = None,
                 lease_seconds: float = 15.0, templates: Templates | None = None,
                 volumes: VolumeBindings | None = None,
                 snapshot_store: RootfsSnapshotStore | None = None, snapshot_quota: int = 64 << 30):
        self.files = files
        # What a claim names (domain/templates.py): the builtins, and team templates over images.
        self.templates = templates or Templates(NoTeamTemplates(), NoImages(), clock.now_ns)
        self.volumes = volumes or NoVolumes()  # volumes bound at claim (domain/volumes.py)
        self.pipeline = pipeline
        self.clock = clock
        self.new_uuid_hex = new_uuid_hex
        self.networks = networks or NoNetworks()  # domain.ports.SandboxNetworks
        self.ownership = ownership or SoleOwner()  # one node, or several (infra.cluster)
        self.factory = RuntimeFactory(
            files=files, journals=journals, checkpoints=checkpoints, pipeline=pipeline, hub=hub,
            pipe_runner=pipe_runner, pty_runner=pty_runner, isolator=isolator, clock=clock,
            new_uuid_hex=new_uuid_hex, base_env=base_env, reap=reap,
            fence=lease_fence(self.ownership) if self.ownership.clustered else None)
        self.network = SandboxNetworking(self.networks, lambda sandbox_id: self.registry.is_running(sandbox_id))
        self.registry = SandboxRegistry(hub=hub, pipeline=pipeline, network=self.network, ownership=self.ownership,
                                        forget_journal=self.factory.forget_journal,
                                        remove_files=self.factory.remove_files, unbind_volumes=self.volumes.unbind)
        self.transitions = RuntimeTransitions(self.registry, self.factory, self.network, self.ownership)
        self.placement = Placement(self.registry, self.transitions, self.ownership, lease_seconds)
        self.deadlines = Deadlines(self.registry, self.transitions, clock)
        # Rootfs snapshots, restores and the disks claims and forks copy (domain/rootfs_snapshots.py).
        self.snapshots = RootfsSnapshots(self.registry, self.transitions, self.factory, snapshot_store,
                                         snapshot_quota, clustered=self.ownership.clustered)

    # ---- startup --------------------------------------------------------------------------
    async def start(self) -> None:
        await self.networks.start()  # removes what a crashed server left behind
        journals = self.factory.journals
        if self.ownership.clustered:  # only what this node ran before: the rest is other nodes'
            ids = await asyncio.to_thread(self.ownership.held_before)
        else:
            ids = journals.list_ids()
        await self._remove_unclaimed(set(ids))
        for sandbox_id in ids:
            try:
                await self.transitions.bring_up_or_fail(sandbox_id)
            except Exception:
                pass  # listed as failed, with its reason (logged)
        # A claim a killed server never completed may have bound volumes: they are free again.
        await self.volumes.reconcile(set(await asyncio.to_thread(journals.list_ids)))
        self.deadlines.start()
        self.placement.start()

    async def _remove_unclaimed(self, known: set[str]) -> None:
        """A server killed during a claim leaves a sandbox directory that no journal knows (or
        one whose store never got its sandbox record, see ``bring_up_or_fail``): that claim
        was never acknowledged, so its directory goes. A delete answered before a kill leaves
        the same: its journal was removed before the answer."""
        if self.ownership.clustered:
            known = known | set(await asyncio.to_thread(self.factory.journals.list_ids))
        strays = [sid for sid in await asyncio.to_thread(self.files.list_ids) if sid not in known]
        for sandbox_id in strays:
            await asyncio.to_thread(self.factory.remove_files, sandbox_id)
        if strays:
            log.info("removed %d sandbox director%s of claims a killed server never completed",
                     len(strays), "y" if len(strays) == 1 else "ies")

    # ---- sandbox operations ---------------------------------------------------------------
    async def claim(self, template: str, config: dict, owner: Principal | None = None,
                    disk_bytes: int | None = None, image: str = "", mounts: list[dict] | None = None,
                    snapshot_id: str = "") -> Sandbox:
        """A new sandbox of ``owner``'s team (None or the platform key without a team: no team),
        with ``mounts`` (volumes of that team) bound to it from now until it is deleted;
        ``snapshot_id``: its disk starts as a copy of that rootfs snapshot (of ``owner``'s team)."""
        team_id = owner.team_id if owner is not None else ""
        plan = await asyncio.to_thread(self.templates.plan_claim, template, config, disk_bytes, image, team_id)
        config = plan.config
        source = self.snapshots.claim_source(config["rootfs"], snapshot_id, owner)  # None: an empty disk
        sandbox_id = sandbox_id_from(self.new_uuid_hex())
        bound = await self.volumes.bind(sandbox_id, team_id, mounts or [])  # 404/409 before anything is made
        if bound:
            config = {**config, "mounts": bound}
        try:
            return await self._claim(sandbox_id, template, config, plan, team_id, source)
        except BaseException:
            await self.volumes.unbind(sandbox_id)
            raise

    async def _claim(self, sandbox_id: str, template: str, config: dict, plan, team_id: str, source) -> Sandbox:
        factory = self.factory
        if plan.note:
            log.warning("sandbox %s: %s", sandbox_id, plan.note)
        store = await asyncio.to_thread(self._new_store, sandbox_id, config["rootfs"], source)
        store.sandbox = Sandbox.claim(sandbox_id, template, config, self.clock.now_ns(), team_id)
        try:
            runtime = factory.build(sandbox_id, store)
        except BaseException:  # its isolation could not be made: nothing of it stays
            await asyncio.to_thread(store.close)
            await asyncio.to_thread(factory.remove_files, sandbox_id)
            await asyncio.to_thread(self.ownership.forget, sandbox_id)
            raise
        try:
            await self.network.attach(runtime)
            self.registry.activate(runtime)
            self.pipeline.stage(store, store.sandbox)
            await self.pipeline.flush(store)
        except BaseException:  # not acknowledged: it must not appear later either
            await self.registry.retire(sandbox_id, Retirement.FAILED_CLAIM, runtime=runtime)
            raise
        return store.sandbox

    def _new_store(self, sandbox_id: str, rootfs: dict, source) -> SandboxStore:
        """What a claim makes that blocks, in one worker thread (each hand-off to a thread and back
        costs the claim a wake-up of the loop): the room checked, the directory and disk made, the
        store opened, the lease taken. A failure leaves nothing of it."""
        factory = self.factory
        self.files.admit()  # 507 before the server's own disk reserve is used
        try:
            self.files.create(sandbox_id, rootfs, source)
            store = factory.open_store(sandbox_id)
        except Exception as exc:  # a full disk cannot even hold a new store: 507
            factory.remove_files(sandbox_id)
            if isinstance(exc, FileNotFoundError) and source is not None:
                raise SnapshotNotFoundError() from exc  # the snapshot was deleted meanwhile
            raise store_error(exc) from exc
        free = store.free_bytes()
        problem = None
        if free is not None and free < MIN_FREE_BYTES:  # it would hold the sandbox, not run it
            problem = InsufficientStorageError(
                f"not enough free space for a new sandbox: {free} bytes free, {MIN_FREE_BYTES} needed")
        elif not self.ownership.acquire(sandbox_id):  # a new id: never taken
            problem = UnavailableError("the new sandbox's lease could not be taken")
        if problem is not None:
            store.close()
            factory.remove_files(sandbox_id)
            raise problem
        return store

    async def usage(self, sandbox_id: str) -> dict[str, int]:
        """Workspace disk use, and while running the cgroups' memory and process counts."""
        self.registry.sandbox(sandbox_id)
        usage = await asyncio.to_thread(self.files.usage, sandbox_id)
        runtime = self.registry.running.get(sandbox_id)
        if runtime is not None:
            usage.update(runtime.isolation.usage())
        return usage

    async def list_all(self, visible_to: Principal | None = None) -> list[Sandbox]:
        """Every sandbox (``visible_to``: of that caller's team): those known here, and with more
        than one node every other one, as its journal records it (a sandbox another node runs
        is as current as its last commit)."""
        local = self.registry.list()
        if self.ownership.clustered:
            known = {sandbox.id for sandbox in local}
            journals = self.factory.journals

            def stored() -> list[Sandbox]:
                others = (journals.record(sid) for sid in journals.list_ids() if sid not in known)
                return [record for record in others if record is not None]
            local = sorted(local + await asyncio.to_thread(stored), key=lambda sb: (-sb.created_ns, sb.id))
        if visible_to is None:
            return local
        return [sandbox for sandbox in local if visible_to.sees(sandbox.team_id)]

    def page(self, visible_to: Principal, offset: int, limit: int) -> tuple[list[Sandbox], int] | None:
        """A page of the sandboxes the caller sees, newest first, and how many there are, at the
        cost of the page; None with more than one node (then every journal counts: ``list_all``)."""
        if self.ownership.clustered:
            return None
        return self.registry.page(None if visible_to.all_teams else visible_to.team_id, offset, limit)

    async def shutdown(self) -> None:
        await self.placement.stop()
        await self.deadlines.checkpoint_all()  # what is left could not be checkpointed: end it as before
        await self.registry.close()  # deletes answered before the stop finish their tear-down
        self.factory.hub.close_all("shutdown")
        await asyncio.gather(*(self.registry.retire(sandbox_id, Retirement.SHUTDOWN)
                               for sandbox_id in list(self.registry.running)))
        await self.network.settle()  # the removals of paused sandboxes' networks end first
        await self.networks.close()
        await asyncio.to_thread(self.files.close)  # the sandboxes' own disks
