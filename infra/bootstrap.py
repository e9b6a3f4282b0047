"""The composition root: builds every adapter and the domain services around them.

Nothing here runs at import time; ``Container.start`` is called once the event loop
exists (Sanic's before_server_start).
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from session_supervisor.domain.api_keys import ApiKeys
from session_supervisor.domain.commit_routing import route_commits
from session_supervisor.domain.commits import CommitPipeline
from session_supervisor.domain.hub import Hub
from session_supervisor.domain.model.network import effective_policy
from session_supervisor.domain.sandbox_networking import NoNetworks
from session_supervisor.domain.sandbox_manager import SandboxManager

from .checkpoint import Checkpoints
from .event_store import SqliteJournals, make_empty_journal
from .key_store import SqliteKeyStore
from .clock import SystemClock
from .pipe_runner import PipeRunner
from .pty_runner import PtyRunner
from .reaper import reap_leftover
from .metrics_sampler import MetricsSampler
from .netns import NetnsNetworks, netns_available, policy_key
from .nft_rules import FlowLimits
from .isolation_check import protect_from_oom
from .file_calls import FileCalls
from .file_watch import WatchHub
from .disk_reserve import CLAIM_ROOM, DiskReserve
from .launch_namespace import make_launch_namespace
from .memory import MemoryTrimmer
from .mount_scope import release_data_dir, scope_data_dir
from .bubblewrap import LauncherUnavailableError, detect_launcher, sandbox_tmp_dir
from .confined_fs import ConfinedFS
from .sandbox_dirs import SandboxDirectories
from .settings import Settings
from .uids import UidTable, workspace_owners
from .warm_pool import WarmPool
from .warm_stock import WarmStock
from .writer import WriterThread
from .image_catalog import ImageCatalog
from .images import ImageStore, store_root
from .template_store import JsonTemplateStore
from session_supervisor.domain.template_capture import TemplateCapture
from session_supervisor.domain.templates import Templates
from session_supervisor.domain.volumes import Volumes

from .volume_archive import import_tar
from .volume_binding import VolumeBinding
from .volume_mounts import VolumeMounts
from .volume_store import VolumeFiles

log = logging.getLogger(__name__)

# What the daemon passes down to every process (daemon env < sandbox < spec).
BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ")


@dataclass
class Container:
    settings: Settings
    hub: Hub = field(default_factory=Hub)
    clock: SystemClock = field(default_factory=SystemClock)
    writer: WriterThread | None = None
    pipeline: CommitPipeline | None = None
    manager: SandboxManager | None = None
    # Adapters left as None are the real ones; scenarios and tests pass fakes (infra.fakes).
    pipe_runner: object | None = None
    pty_runner: object | None = None
    reap: Callable[[int, int], object] | None = None
    new_uuid_hex: Callable[[], str] | None = None
    # Told about every commit (domain.commit_routing.CommitObserver: api/metrics.py, the webhooks).
    # They only count; the write path never waits on them.
    observers: list = field(default_factory=list)
    dirs: SandboxDirectories | None = None
    datastore: object | None = None  # the node's PostgreSQL pool, with more than one machine
    keys: ApiKeys | None = None  # teams and API keys (api/auth.py asks it who a bearer is)
    metrics: MetricsSampler | None = None  # each running sandbox's cgroups, sampled (GET …/metrics)
    webhooks: object | None = None  # infra.webhooks.Webhooks: config.webhook deliveries (one machine only)
    trimmer: MemoryTrimmer = field(default_factory=MemoryTrimmer)
    file_calls: FileCalls = field(default_factory=FileCalls)  # the file API's own threads
    watches: WatchHub = field(default_factory=WatchHub)        # one inotify instance for every watch
    volumes: Volumes | None = None  # sandbox volumes (domain/volumes.py); None without loop devices
    volume_mounts: VolumeMounts | None = None
    warm_pool: WarmPool | None = None  # parts of sandboxes made ahead (infra/warm_pool.py)
    uids: UidTable | None = None  # the host uids this server's sandboxes hold (as root)

    def __post_init__(self) -> None:
        self.launcher = detect_launcher(self.settings.runtime, work_dir=str(self.settings.data_dir / "runtime"),
                                        pids_max=self.settings.sandbox_pids_max, data_dir=str(self.settings.data_dir))
        if self.launcher.name == "bwrap":
            protect_from_oom()  # a sandbox's OOM must end its own processes, never the server
        self.networks = choose_networks(self.settings)
        shared = self.settings.checkpoint_dir if self.settings.clustered else None
        self.images = ImageStore(store_root(self.settings.data_dir, shared))
        self.templates = Templates(JsonTemplateStore(Path(shared or self.settings.data_dir) / "templates.json"),
                                   ImageCatalog(self.images), self.clock.now_ns)
        self.disks_enabled, self.disk_note = choose_disks(self.settings)
        if hasattr(self.launcher, "image_rootfs"):  # sandboxes of image templates run on the image
            self.launcher.image_rootfs = lambda digest: str(self.images.get(digest).rootfs)
        if hasattr(self.launcher, "netns_for"):
            self.launcher.netns_for = self.networks.netns_path  # sessions join their sandbox's netns

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.writer = WriterThread(loop)
        self.pipeline = CommitPipeline(TimedSink(self.writer, self._on_tick), self.clock.now_ns,
                                       route_commits(self.observers))
        base_env = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
        base_env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin")
        self.disk = DiskReserve(str(self.settings.data_dir), self.settings.disk_reserve)
        warning = self.disk.startup_check(sandboxes_unprivileged=bool(
            self.launcher.hardening is not None and self.launcher.hardening.as_root))
        if warning:
            log.warning("%s", warning)
        if self.launcher.hardening is not None:  # before anything of ours is mounted in the data dir
            self.launcher.hardening.detach = await asyncio.to_thread(scope_data_dir, self.settings.data_dir)
        self.pool = await asyncio.to_thread(open_pool, self.settings, self.disk) if self.disks_enabled else None
        dirs = self.dirs = SandboxDirectories(self.settings.data_dir, self.disk, self.disks_enabled, self.disk_note,
                                              self.pool)
        hardening = self.launcher.hardening
        if hardening is not None and hardening.as_root:
            self.uids = UidTable()  # which uids this server's sandboxes hold: a new one without a scan
            self.uids.seed(await asyncio.to_thread(workspace_owners, dirs.root))
            self.launcher.uids = dirs.uids = self.uids
        journals, checkpoints, ownership = await asyncio.to_thread(self._stores, dirs)
        key_store = await asyncio.to_thread(self._key_store)
        isolator = await asyncio.to_thread(self._volumes)
        self.keys = ApiKeys(key_store, self.clock, lambda: secrets.token_hex(24), lambda: str(uuid.uuid4()))
        self.manager = SandboxManager(
            files=dirs, journals=journals, pipeline=self.pipeline, hub=self.hub, checkpoints=checkpoints,
            pipe_runner=self.pipe_runner or PipeRunner(), pty_runner=self.pty_runner or PtyRunner(),
            isolator=isolator, clock=self.clock,
            new_uuid_hex=self.new_uuid_hex or (lambda: uuid.uuid4().hex), base_env=base_env,
            reap=self.reap or reap_leftover, networks=self.networks, ownership=ownership,
            lease_seconds=self.settings.lease_seconds, templates=self.templates, volumes=self.volumes,
            snapshot_store=await asyncio.to_thread(self._snapshot_store), snapshot_quota=self.settings.snapshot_quota)
        if self.volumes is not None:
            self.volumes.is_running = self.manager.registry.is_running
        await self.manager.start()
        # After the start, which removed what a killed server left (namespaces, its table).
        self.warm_pool = self._warm_pool()
        self.warm_pool.start()
        self.manager.snapshots.start()  # expiry
        self.captures = TemplateCapture(self.manager)  # templates from a sandbox
        await asyncio.to_thread(self.captures.recover)
        self.metrics = MetricsSampler(self.manager, dirs, self.networks, self.settings.metrics_interval)
        self.metrics.start()
        if not self.settings.clustered:
            from .webhooks import Webhooks
            self.webhooks = Webhooks(self)
            self.observers.append(self.webhooks)  # a sandbox record's commit: look at its subscription now
            await self.webhooks.start()
        self.trimmer.start()

    def _warm_pool(self) -> WarmPool:
        """A stock per part a claim needs (directories with their disk, uid and empty journal;
        cgroups; networks), each shaped by the ``default`` template to begin with and then by the
        templates claims name. ``--warm-pool 0`` keeps none: every claim makes its own."""
        size = self.settings.warm_pool
        if size <= 0:
            return WarmPool([])
        plan = self.templates.plan_claim("default", {})
        dirs = self.dirs
        if not self.settings.clustered:  # a database keeps the journals elsewhere
            dirs.prefill_state = make_empty_journal
        hardening = self.launcher.hardening
        if hardening is not None and hardening.as_root and hardening.nsenter:  # its launches' namespace too
            dirs.make_launch_ns = lambda workspace: make_launch_namespace(hardening, workspace)
            self.launcher.launch_ns_for = dirs.take_launch_ns
        dirs.warm = WarmStock("directory", size, dirs.make_warm, dirs.destroy_warm, (dirs.warm_shape(plan.rootfs),))
        stocks = [dirs.warm]
        cgroups = getattr(self.launcher.hardening, "cgroups", None)
        if cgroups is not None:
            cgroups.warm = WarmStock("cgroups", size, cgroups.make_warm, cgroups.destroy_warm, (None,))
            stocks.append(cgroups.warm)
        if isinstance(self.networks, NetnsNetworks):
            policy = policy_key(effective_policy(plan.config, "default"))
            self.networks.warm = WarmStock("network", size, self.networks.make_warm, self.networks.destroy_warm,
                                           (policy,))
            stocks.append(self.networks.warm)
        return WarmPool(stocks)

    def release_memory(self) -> None:
        """After a large free (a context, a sandbox): hand the memory back to the system."""
        self.trimmer.release()

    @property
    def node_id(self) -> str:
        return self.settings.node_id or "local"

    def _stores(self, dirs: SandboxDirectories):
        """Journals, checkpoints and ownership: SQLite files in each sandbox's state dir on one
        machine; PostgreSQL, a shared checkpoint dir and leases for several (blocking)."""
        if not self.settings.clustered:
            return SqliteJournals(dirs.state_dir, dirs.root), Checkpoints(dirs), None
        from .cluster import LeaseOwnership
        from .leases import Leases
        from .pg_journal import PostgresJournals
        from .pg_store import connect
        from .shared_checkpoints import SharedCheckpoints

        self.datastore = connect(self.settings.database_url)
        leases = Leases(self.datastore)
        leases.create_table()
        ownership = LeaseOwnership(leases, self.node_id, self.settings.advertise_url, self.settings.lease_seconds)
        return (PostgresJournals(self.datastore, ownership), SharedCheckpoints(dirs, self.settings.checkpoint_dir),
                ownership)

    def _snapshot_store(self):
        """Rootfs snapshots next to the disks they copy: in the pool (reflinks), else in the data dir."""
        if not self.disks_enabled or self.settings.clustered:
            return None
        from .rootfs_snapshot_store import RootfsSnapshotStore
        return RootfsSnapshotStore(self.pool.snapshots if self.pool is not None else self.settings.data_dir / "snapshots")

    def _key_store(self):
        """The data dir's SQLite file on one machine; PostgreSQL, shared by every node, for several."""
        if self.datastore is None:
            return SqliteKeyStore(self.settings.data_dir)
        from .pg_key_store import PostgresKeyStore

        store = PostgresKeyStore(self.datastore)
        store.create_tables()
        return store

    def _volumes(self):
        """Volumes, where disks can be made (they are disks: loop devices, root); the isolator that
        binds them into sandboxes. In a cluster they live in the shared checkpoint dir."""
        if not self.disks_enabled:
            return self.launcher
        shared = self.settings.checkpoint_dir if self.settings.clustered else None
        files = VolumeFiles(Path(shared or self.settings.data_dir) / "volumes")
        self.volume_mounts = VolumeMounts(files, self.settings.data_dir / "volume-mounts",
                                          node_id=self.node_id if self.settings.clustered else "")
        self.volumes = Volumes(files, self.volume_mounts, self.clock.now_ns, lambda: str(uuid.uuid4()),
                               quota_bytes=self.settings.volume_quota, default_size=self.settings.volume_size,
                               admit_space=lambda: self.disk.admit(CLAIM_ROOM, "a new volume"))
        binding = VolumeBinding(self.launcher, self.volume_mounts)
        binding.clean_up(self.dirs.root)
        return binding

    def volume_fs(self, root: str) -> ConfinedFS:
        """A volume's files as a view of their own (its root is "/"), written as the volume's root."""
        return ConfinedFS.rooted_at(root, None, self.disk)

    def import_archive(self, fs: ConfinedFS, fileobj, base: str) -> dict:
        return import_tar(fs, fileobj, base)

    def spool_dir(self) -> str:
        """Where a request body waits before it is unpacked: the data dir's filesystem, never /tmp."""
        path = self.settings.data_dir / "spool"
        path.mkdir(mode=0o700, exist_ok=True)
        return str(path)

    def sandbox_fs(self, sandbox_id: str) -> ConfinedFS:
        """The file API's view of one sandbox: its /workspace, and its /tmp when that is on disk
        (bwrap binds it; under the host runtime /tmp is the host's, so it is not offered). A volume
        bound at /workspace is reached through its own mount, where files belong to its root."""
        workspace = self.dirs.workspace(sandbox_id)
        volume = self.manager.factory.isolator.workspace_of(sandbox_id) if self.volumes is not None else None
        areas = {"/workspace": volume or workspace}
        tmp = sandbox_tmp_dir(workspace) if self.launcher.name != "host" else None
        if tmp is not None:
            areas["/tmp"] = tmp
        owned = os.stat(volume or workspace)
        owner = (owned.st_uid, owned.st_gid) if owned.st_uid != os.geteuid() else None
        return ConfinedFS(areas, owner, self.disk)

    def _on_tick(self, seconds: float) -> None:
        for observer in self.observers:
            observer.tick_committed(seconds)

    async def stop(self) -> None:
        if self.warm_pool is not None:  # before the networks, cgroups and disks it took from go
            await self.warm_pool.stop()
        if self.metrics is not None:
            await self.metrics.stop()
        if self.webhooks is not None:
            await self.webhooks.stop()
        await self.trimmer.stop()
        await self.watches.close()
        if self.manager is not None:
            await self.manager.snapshots.stop()
            if getattr(self, "captures", None) is not None:
                await self.captures.stop()
            await self.manager.shutdown()
        if self.volume_mounts is not None:
            await asyncio.to_thread(self.volume_mounts.close)
        cgroups = getattr(self.launcher.hardening, "cgroups", None)
        if cgroups is not None:
            await asyncio.to_thread(cgroups.remove_group)
        await asyncio.to_thread(release_data_dir, self.settings.data_dir)
        if self.writer is not None:
            await asyncio.to_thread(self.writer.close)
        if self.keys is not None:
            await asyncio.to_thread(self.keys.store.close)
        if self.datastore is not None:
            await asyncio.to_thread(self.datastore.close)
        self.file_calls.close()


def choose_disks(settings: Settings) -> tuple[bool, str]:
    """A disk of its own per sandbox (``on``), none (``off``), or ``auto``: on when a trial disk
    can be made and mounted here; otherwise sandboxes write to the data dir's filesystem, unbounded,
    and the server says so at start and in every sandbox's status."""
    from .sandbox_disk import probe
    mode = settings.disk_quota
    if mode == "off":
        return False, "disk quotas are off (--disk-quota off)"
    problem = probe(settings.data_dir / "runtime")
    if problem is None:
        return True, ""
    if mode == "on":
        raise LauncherUnavailableError(f"disk quotas requested (--disk-quota on) but unavailable: {problem}")
    note = f"disk quotas unavailable ({problem}): a sandbox's writes are bounded only by the data dir's filesystem"
    log.warning("%s", note)
    return False, note


def open_pool(settings: Settings, reserve: DiskReserve):
    """The disk pool every sandbox disk and snapshot lives in (reflinks), or None: then disks stay
    on the data dir's filesystem and snapshots and forks are full (sparse) copies."""
    from .disk_pool import DiskPool
    if settings.disk_pool_size == 0:
        return None
    pool = DiskPool(settings.data_dir, None if settings.disk_pool_size < 0 else settings.disk_pool_size,
                    settings.disk_pool_preallocate, reserve)
    problem = pool.open()
    if problem is None:
        return pool
    log.warning("disk pool unavailable (%s): rootfs snapshots and forks copy whole disks", problem)
    return None


def choose_networks(settings: Settings):
    """A network namespace per sandbox (``netns``), or the host's network shared (``host``).
    ``auto`` takes netns when it can (root, bwrap, iproute2 and nftables) and warns when not."""
    mode = settings.network
    if mode not in ("auto", "netns", "host"):
        raise ValueError(f"unknown network mode {mode!r} (expected auto, netns or host)")
    if mode == "host":
        log.warning("network 'host': sandboxes share the host's network (policies are not enforced)")
        return NoNetworks()
    if settings.runtime == "host":
        problem = "runtime 'host' runs sessions without a sandbox"
    else:
        problem = netns_available()
    if problem is None:
        return NetnsNetworks(str(settings.data_dir), FlowLimits(settings.sandbox_conntrack_max,
                                                                settings.sandbox_new_flows))
    if mode == "netns":
        raise LauncherUnavailableError(f"network 'netns' requested but unavailable: {problem}")
    if settings.runtime != "host":  # runtime 'host' already warns that nothing is isolated
        log.warning("sandboxes share the host's network (policies are not enforced): %s", problem)
    return NoNetworks()


class TimedSink:
    """The writer, timing each tick from submit to its durable commit."""

    def __init__(self, writer: WriterThread, on_tick: Callable[[float], None]) -> None:
        self._writer = writer
        self._on_tick = on_tick

    def submit(self, tick, done) -> None:
        started = time.perf_counter()

        def timed(outcomes) -> None:  # one AppOutcome per store of the tick
            if not any(outcome.store_error is not None for outcome in outcomes):
                self._on_tick(time.perf_counter() - started)
            done(outcomes)

        self._writer.submit(tick, timed)

    def run_in_writer(self, fn, done) -> None:
        self._writer.run_in_writer(fn, done)
