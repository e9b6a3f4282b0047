"""Fork: a new sandbox from a running or paused one, with a copy of its disk (a reflink in the disk
pool), its own id, and, once it runs, its own network namespace, cgroups, host uid and disk quota.

The source's disk is copied as for a snapshot (``RootfsSnapshots.copy_disk``: under its lifecycle
lock, frozen for the copy only, so it keeps running on the same generation). The child is made
**paused**, at runtime generation 0 and without a runtime, as the contract says: its first resume
(explicit, or a session call with ``auto_resume``) starts it at generation 1. It gets the source's
template and config (env, memory, network, services, webhook, ``auto_resume``) and, unless the fork
says otherwise, the source's absolute deadlines. Sessions are not copied: the child has none.

Crash safety, in the order things are made: the copied image under a temporary name (removed by
the start-up sweep), the child's directory and journal, its checkpoint manifest, then its record
(the commit). A server killed before the commit leaves a store with no record, which the next
start removes with its directory and disk; after it, the child is whole and paused.
"""
from __future__ import annotations

import asyncio
import copy

from .model.errors import SandboxConflictError
from .model.ids import sandbox_id_from
from .model.sandbox import Sandbox
from .pause_hook import build_manifest
from .rootfs_snapshots import NOT_COPYABLE, RootfsSnapshots


async def fork(snapshots: RootfsSnapshots, source_id: str, ttl: int | None = None,
               hard_ttl: int | None = None) -> Sandbox:
    """The paused child (``ttl``/``hard_ttl``: None inherits the source's deadlines, 0 clears)."""
    snapshots.check_available()
    registry, files = snapshots.registry, snapshots.files
    if registry.sandbox(source_id).status == "failed":
        raise SandboxConflictError(NOT_COPYABLE)
    await asyncio.to_thread(files.admit)  # the server's own reserve, as for a claim
    await asyncio.to_thread(files.admit_copy, "a fork")
    child_id = sandbox_id_from(snapshots.factory.new_uuid_hex())
    staging = files.staging(child_id)
    try:
        await snapshots.copy_disk(source_id, staging, "fork")
        child = await _make_child(snapshots, child_id, registry.sandbox(source_id), staging, ttl, hard_ttl)
    finally:
        await asyncio.to_thread(files.discard, staging)  # adopted by the child, or not needed
    registry.park(child)
    return child


async def _make_child(snapshots: RootfsSnapshots, child_id: str, source: Sandbox, image, ttl: int | None,
                      hard_ttl: int | None) -> Sandbox:
    factory = snapshots.factory
    pipeline, checkpoints = factory.pipeline, factory.checkpoints
    now = factory.clock.now_ns()
    config = copy.deepcopy(source.config)
    # A volume is not part of the disk and is never copied: the child binds none (an RWO volume
    # stays the source's alone; its files are where the source's /workspace was, not in the copy).
    config.pop("mounts", None)
    expires, hard = source.expires_ns, source.hard_expires_ns
    if ttl is not None:
        config["ttl"], expires = ttl, (now + ttl * 1_000_000_000 if ttl else 0)
    if hard_ttl is not None:
        config["hard_ttl"], hard = hard_ttl, (now + hard_ttl * 1_000_000_000 if hard_ttl else 0)
    rootfs = config["rootfs"] = {**(config.get("rootfs") or {}), "forked_from": source.id}
    try:
        await asyncio.to_thread(factory.files.create, child_id, rootfs, image, True)
        store = await asyncio.to_thread(factory.open_store, child_id)
    except Exception:
        await asyncio.to_thread(factory.remove_files, child_id)
        raise
    try:
        child = Sandbox.fork(child_id, source, config, now, expires, hard)
        # The manifest first: a start that finds the record finds the child complete and paused.
        await asyncio.to_thread(checkpoints.write_manifest, child_id, build_manifest(store, child, True, now))
        store.sandbox = child
        pipeline.stage(store, child)
        await pipeline.flush(store)
    except BaseException:
        await asyncio.to_thread(store.close)
        await asyncio.to_thread(factory.remove_files, child_id)
        raise
    store.released = True
    await pipeline.run_in_writer(lambda: checkpoints.seal(child_id, store))
    return child
