"""SandboxManager: the registry of sandboxes, each with its own store and runtime.

Starting over state that was not cleanly paused is a runtime replacement (a crash
counts): the generation goes up, leftovers of the old generation are reaped, and
every session follows its ``runtime_recovery`` policy. Pause, resume,
auto-resume, ttl and the start-up decision live in ``runtime_transitions.RuntimeTransitions`` (``manager.transitions``).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from .commits import CommitPipeline
from .hub import Hub
from .model.access import Principal
from .model.errors import InsufficientStorageError, SandboxNotFoundError, SnapshotNotFoundError, UnavailableError
from .model.ids import sandbox_id_from
from .model.sandbox import FailedSandbox, Sandbox
from .deadlines import Deadlines
from .networks import NoNetworks, SandboxNetworking
from .placement import Placement, SoleOwner
from .ports import (
    Checkpoints,
    Clock,
    Isolator,
    JournalStores,
    ProcessRunner,
    SandboxFiles,
    SandboxNetworks,
    SandboxOwnership,
    RootfsSnapshotStore,
    VolumeBindings,
)
from .rootfs_snapshots import RootfsSnapshots
from .runtime_transitions import MIN_FREE_BYTES, RuntimeTransitions
from .sandbox_runtime import SandboxRuntime
from .store_faults import store_error
from .sandbox_store import SandboxStore
from .templates import BUILTIN_ENV, NoImages, NoTeamTemplates, Templates
from .volumes import NoVolumes

log = logging.getLogger(__name__)

TEMPLATES: dict[str, dict[str, str]] = BUILTIN_ENV  # the env of sandboxes claimed before templates had images


class UnclaimedStore(RuntimeError):
    """A store with no sandbox record: a server died between creating it and the claim's commit."""


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
        self.journals = journals
        self.volumes = volumes or NoVolumes()  # volumes bound at claim (domain/volumes.py)
        self.pipeline = pipeline
        self.hub = hub
        self.pipe_runner = pipe_runner
        self.pty_runner = pty_runner
        self.isolator = isolator
        self.clock = clock
        self.new_uuid_hex = new_uuid_hex
        self.base_env = base_env
        self.reap = reap  # kills what an old generation left behind (pid + start time)
        self.running: dict[str, SandboxRuntime] = {}  # running: an open store and a runtime
        self.parked: dict[str, Sandbox] = {}  # paused: only the record; the rootfs holds the rest
        self.failed: dict[str, FailedSandbox] = {}  # its store could not be opened: listed, deletable
        self.checkpoints = checkpoints  # None: pause is unavailable (503)
        self.networks = networks or NoNetworks()  # domain.ports.SandboxNetworks
        self.network = SandboxNetworking(self.networks, lambda sandbox_id: sandbox_id in self.running)
        self._lock = asyncio.Lock()
        # One node (SoleOwner) or several (infra.cluster): which node runs which sandbox.
        self.placement = Placement(self, ownership or SoleOwner(), lease_seconds)
        self.ownership = self.placement.ownership
        self.transitions = RuntimeTransitions(self)
        # Its calls, under the manager's name (the routes, the gate and the scenarios use them).
        r = self.transitions
        self.gate, self.admit, self.pause, self.resume, self.bring_up = r.gate, r.admit, r.pause, r.resume, r.bring_up
        self.update, self.refresh = r.update, r.refresh
        self.deadlines = Deadlines(self)
        d = self.deadlines
        self.sweep, self.checkpoint_all = d.sweep, d.checkpoint_all
        self.start_sweeping, self.stop_sweeping = d.start_sweeping, d.stop_sweeping
        self.locate = self.placement.locate
        # Rootfs snapshots, restores and the disks claims and forks copy (domain/rootfs_snapshots.py).
        self.snapshots = RootfsSnapshots(self, snapshot_store, snapshot_quota)

    def _build_runtime(self, sandbox_id: str, store: SandboxStore) -> SandboxRuntime:
        sandbox = store.sandbox
        rootfs = sandbox.config.get("rootfs")  # what the template gave it at claim (domain/templates.py)
        env = dict(rootfs["env"] if rootfs else TEMPLATES.get(sandbox.template, {}))
        env.update(sandbox.config.get("env_vars") or {})
        self.files.prepare(sandbox_id, rootfs)  # its disk mounted, when it has one
        workspace = self.files.workspace(sandbox_id)
        isolation = self.isolator.isolate(sandbox_id, workspace, sandbox.config)
        fence = self.placement.fence if self.placement.clustered else None
        runtime = SandboxRuntime(sandbox_id=sandbox_id, store=store, pipeline=self.pipeline,
                                 hub=self.hub, pipe_runner=self.pipe_runner, pty_runner=self.pty_runner,
                                 isolation=isolation, workspace=workspace,
                                 clock=self.clock, new_uuid_hex=self.new_uuid_hex, sandbox_env=env,
                                 base_env=self.base_env, fence=fence)
        runtime.start()  # its sweeps end with release()
        return runtime

    def open_store(self, sandbox_id: str) -> SandboxStore:
        """The sandbox's journal, opened (created when new), with nothing loaded yet (sync)."""
        return SandboxStore(self.journals.open(sandbox_id))

    def _remove_files(self, sandbox_id: str) -> None:
        self.journals.remove(sandbox_id)
        if self.checkpoints is not None:
            self.checkpoints.remove(sandbox_id)
        self.files.remove(sandbox_id)

    # ---- startup --------------------------------------------------------------------------
    async def start(self) -> None:
        await self.networks.start()  # removes what a crashed server left behind
        if self.placement.clustered:  # only what this node ran before: the rest is other nodes'
            ids = await asyncio.to_thread(self.ownership.held_before)
        else:
            ids = self.journals.list_ids()
        await self._remove_unclaimed(set(ids))
        for sandbox_id in ids:
            try:
                await self._bring_up_or_fail(sandbox_id)
            except Exception:
                pass  # listed as failed, with its reason (logged)
        # A claim a killed server never completed may have bound volumes: they are free again.
        await self.volumes.reconcile(set(await asyncio.to_thread(self.journals.list_ids)))
        self.start_sweeping()
        self.placement.start()

    async def _remove_unclaimed(self, known: set[str]) -> None:
        """A server killed during a claim leaves a sandbox directory that no journal knows (or
        one whose store never got its sandbox record, see ``_bring_up_or_fail``): that claim
        was never acknowledged, so its directory goes."""
        if self.placement.clustered:
            known = known | set(await asyncio.to_thread(self.journals.list_ids))
        strays = [sid for sid in await asyncio.to_thread(self.files.list_ids) if sid not in known]
        for sandbox_id in strays:
            await asyncio.to_thread(self._remove_files, sandbox_id)
        if strays:
            log.info("removed %d sandbox director%s of claims a killed server never completed",
                     len(strays), "y" if len(strays) == 1 else "ies")

    async def _bring_up_or_fail(self, sandbox_id: str) -> None:
        """Bring a sandbox found at start up; one that cannot be opened is listed as failed."""
        try:
            await self.bring_up(sandbox_id)
            self.failed.pop(sandbox_id, None)
        except UnclaimedStore:
            log.info("sandbox %s: its claim never completed; removing it", sandbox_id)
            await asyncio.to_thread(self._remove_files, sandbox_id)
        except Exception as exc:
            log.exception("sandbox %s could not be opened; listed as failed", sandbox_id)
            known = await asyncio.to_thread(self._stored_record, sandbox_id)
            self.failed[sandbox_id] = FailedSandbox(sandbox_id, f"its store could not be opened: {exc}", known)
            raise

    def _stored_record(self, sandbox_id: str) -> Sandbox | None:
        try:
            return self.journals.record(sandbox_id)
        except Exception:  # the record itself is what cannot be read
            return None

    def _open(self, sandbox_id: str) -> SandboxStore:
        store = self.open_store(sandbox_id)
        store.load(sandbox_id)
        if store.sandbox is None:
            store.close()
            raise UnclaimedStore(f"store of {sandbox_id} has no sandbox record")
        return store

    async def replace_runtime(self, runtime: SandboxRuntime) -> None:
        """A new runtime generation over existing state: reap, then recover each session."""
        store = runtime.store
        sandbox = store.sandbox
        now = self.clock.now_ns()
        generation = sandbox.start_new_runtime(now)
        self.pipeline.stage(store, sandbox)
        for session in runtime.list_sessions():
            attempt = session.attempt
            if attempt and "finished_ns" not in attempt and attempt.get("pid"):
                self.reap(attempt["pid"], attempt.get("start_time", 0))
            action = session.recover(generation, now)
            self.pipeline.stage(store, session)
            if action == "restart":
                await runtime.attempts.start_attempt(session, "runtime_recovered")
        await self.pipeline.flush(store)

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
        await asyncio.to_thread(self.files.admit)  # 507 before the server's own disk reserve is used
        if plan.note:
            log.warning("sandbox %s: %s", sandbox_id, plan.note)
        try:
            await asyncio.to_thread(self.files.create, sandbox_id, config["rootfs"], source)
            store = await asyncio.to_thread(self.open_store, sandbox_id)
        except Exception as exc:  # a full disk cannot even hold a new store: 507
            await asyncio.to_thread(self._remove_files, sandbox_id)
            if isinstance(exc, FileNotFoundError) and source is not None:
                raise SnapshotNotFoundError() from exc  # the snapshot was deleted meanwhile
            raise store_error(exc) from exc
        free = await asyncio.to_thread(store.free_bytes)
        if free is not None and free < MIN_FREE_BYTES:  # it would hold the sandbox, not run it
            await asyncio.to_thread(store.close)
            await asyncio.to_thread(self._remove_files, sandbox_id)
            raise InsufficientStorageError(
                f"not enough free space for a new sandbox: {free} bytes free, {MIN_FREE_BYTES} needed")
        if not await asyncio.to_thread(self.ownership.acquire, sandbox_id):  # a new id: never taken
            raise UnavailableError("the new sandbox's lease could not be taken")
        store.sandbox = Sandbox.claim(sandbox_id, template, config, self.clock.now_ns(), team_id)
        runtime = self._build_runtime(sandbox_id, store)
        try:
            await self.network.attach(runtime)
        except Exception:
            await runtime.release()
            await runtime.close()
            await asyncio.to_thread(self._remove_files, sandbox_id)
            await asyncio.to_thread(self.ownership.forget, sandbox_id)
            raise
        self.running[sandbox_id] = runtime
        self.pipeline.stage(store, store.sandbox)
        try:
            await self.pipeline.flush(store)
        except Exception:  # not acknowledged: it must not appear later either
            await self._remove(sandbox_id)
            raise
        return store.sandbox

    def knows(self, sandbox_id: str) -> bool:
        return sandbox_id in self.running or sandbox_id in self.parked or sandbox_id in self.failed

    def network_policy(self, sandbox_id: str) -> dict:
        return SandboxNetworking.policy_of(self.sandbox(sandbox_id))

    def sandbox(self, sandbox_id: str) -> Sandbox:
        runtime = self.running.get(sandbox_id)
        if runtime is not None:
            return runtime.store.sandbox
        parked = self.parked.get(sandbox_id) or self.failed.get(sandbox_id)
        if parked is None:
            raise SandboxNotFoundError()
        return parked

    async def usage(self, sandbox_id: str) -> dict[str, int]:
        """Workspace disk use, and while running the cgroups' memory and process counts."""
        self.sandbox(sandbox_id)
        usage = await asyncio.to_thread(self.files.usage, sandbox_id)
        runtime = self.running.get(sandbox_id)
        if runtime is not None:
            usage.update(runtime.isolation.usage())
        return usage

    def runtime_for(self, sandbox_id: str) -> SandboxRuntime:
        runtime = self.running.get(sandbox_id)
        if runtime is None:
            if sandbox_id in self.parked:  # session calls are admitted (resumed) first: api/gate.py
                raise UnavailableError("sandbox is not running")
            if sandbox_id in self.failed:
                raise UnavailableError(f"sandbox has failed: {self.failed[sandbox_id].failure_reason}")
            raise SandboxNotFoundError()
        return runtime

    def list(self) -> list[Sandbox]:
        sandboxes = [runtime.store.sandbox for runtime in self.running.values()]
        sandboxes.extend(self.parked.values())
        sandboxes.extend(self.failed.values())
        return sorted(sandboxes, key=lambda sb: (-sb.created_ns, sb.id))

    async def list_all(self, visible_to: Principal | None = None) -> list[Sandbox]:
        """Every sandbox (``visible_to``: of that caller's team): those known here, and with more
        than one node every other one, as its journal records it (a sandbox another node runs
        is as current as its last commit)."""
        local = self.list()
        if self.placement.clustered:
            known = {sandbox.id for sandbox in local}

            def stored() -> list[Sandbox]:
                others = (self.journals.record(sid) for sid in self.journals.list_ids() if sid not in known)
                return [record for record in others if record is not None]
            local = sorted(local + await asyncio.to_thread(stored), key=lambda sb: (-sb.created_ns, sb.id))
        if visible_to is None:
            return local
        return [sandbox for sandbox in local if visible_to.sees(sandbox.team_id)]

    async def delete(self, sandbox_id: str) -> None:
        self.sandbox(sandbox_id)  # 404 before a gate object exists for an unknown id
        await self.transitions.exclusive(sandbox_id, "delete", lambda gate: self._delete(sandbox_id))

    async def _delete(self, sandbox_id: str) -> None:
        self.sandbox(sandbox_id)  # deleted by the call before this one: 404
        await self._remove(sandbox_id)
        self.transitions.gates.pop(sandbox_id, None)

    async def _remove(self, sandbox_id: str) -> None:
        """Every process ended, then the sandbox's directory with its store (also hard_ttl)."""
        if self.parked.pop(sandbox_id, None) is None and self.failed.pop(sandbox_id, None) is None:
            runtime = self.runtime_for(sandbox_id)
            del self.running[sandbox_id]
            for session in runtime.list_sessions():
                self.hub.close_session(session.id, "deleted")
            await runtime.release()
            try:
                await self.pipeline.flush(runtime.store)
            except Exception as exc:  # a full disk must not keep a sandbox alive: it goes anyway
                log.warning("sandbox %s: deleting without its last events: %s", sandbox_id, exc)
            await runtime.close()
            await self.network.detach(sandbox_id)
        await asyncio.to_thread(self._remove_files, sandbox_id)
        await self.volumes.unbind(sandbox_id)  # after its files: nothing of it uses them any more
        await asyncio.to_thread(self.ownership.forget, sandbox_id)

    async def shutdown(self) -> None:
        await self.placement.stop()
        await self.checkpoint_all()  # what is left could not be checkpointed: end it as before
        self.hub.close_all("shutdown")
        for runtime in self.running.values():
            await runtime.release()
            runtime.retention.stage_snapshots()  # the next start replays no tail
        try:
            await self.pipeline.flush()
        except Exception:
            log.exception("final commit failed")
        for runtime in self.running.values():
            await runtime.close()
        await self.networks.close()
        await asyncio.to_thread(self.files.close)  # the sandboxes' own disks
