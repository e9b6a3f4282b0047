"""Templates made from a sandbox: its disk captured as a hidden rootfs snapshot, which every claim of
the template copies (a reflink in the disk pool), over the source's image.

The call answers at once with the template ``creating`` / ``capturing``; the capture runs as a task
(the same consistent copy as a snapshot: a running source is frozen for the copy only and keeps
running), then the template is ``ready``, or ``failed`` with a reason. The spec is the source's
template's, with ``pool`` reset and the caller's overrides; its disk size is the source's.

Idempotency: the request's key and a digest of its body are kept with the template, so a retry
with the same key and body gets the same template and one with another body 409.

A server killed mid-capture leaves a template ``creating`` whose snapshot either was published (it
is made ``ready`` at the next start) or was not (``failed``: the start-up sweep already removed
the half-made copy). Nothing is left counted against the team's quota either way.
"""
from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
from typing import TYPE_CHECKING

from .model.access import Principal
from .model.errors import SandboxConflictError, SandboxNotFoundError, TemplateExistsError
from .model.rootfs_snapshot import TEMPLATE
from .model.timefmt import rfc3339

from .task_owner import TaskOwner

if TYPE_CHECKING:
    from .sandbox_manager import SandboxManager
    from .templates import Template

log = logging.getLogger(__name__)

OVERRIDABLE = ("description", "displayName", "tags", "pool")


class TemplateCapture:
    def __init__(self, manager: SandboxManager) -> None:
        self.manager = manager
        self.templates = manager.templates
        self.snapshots = manager.snapshots
        self._tasks = TaskOwner("template captures")

    async def create(self, template_id: str, sandbox_id: str, overrides: dict, team: str,
                     viewer: Principal | None, key: str = "") -> Template:
        digest = hashlib.sha256(json.dumps([template_id, sandbox_id, overrides], sort_keys=True).encode()).hexdigest()
        existing = self._same_request(template_id, team, key, digest)
        if existing is not None:
            return existing
        self.snapshots.check_available()  # 503 with the reason before anything is made
        try:
            source = self.manager.registry.sandbox(sandbox_id)
        except SandboxNotFoundError:
            raise SandboxNotFoundError("source sandbox not found") from None
        if viewer is not None and not viewer.sees(source.team_id):
            raise SandboxNotFoundError("source sandbox not found")
        if source.status == "failed":
            raise SandboxConflictError("sandbox rootfs source operation requires a running or paused sandbox")
        spec = self._spec(source, overrides, team)
        now = self.manager.clock.now_ns()
        snapshot_id = self.snapshots.new_id()
        creation = {"state": "creating", "stage": "capturing", "startedAt": rfc3339(now)}
        template = await asyncio.to_thread(self.templates.create_captured, template_id, spec, team, creation,
                                           snapshot_id, {"sandbox_id": sandbox_id, "key": key, "digest": digest})
        self._tasks.spawn(self._capture(template_id, team, sandbox_id, snapshot_id, creation),
                          f"capture of template {template_id}")
        return template

    def _same_request(self, template_id: str, team: str, key: str, digest: str) -> Template | None:
        """A retry of the same call (same key, same body): the template it made; another body: 409."""
        if not key:
            return None
        current = self.templates.own(template_id, team)
        if current is None or current.source.get("key") != key:
            return None
        if current.source.get("digest") != digest:
            raise TemplateExistsError("Idempotency-Key was used with another request body")
        return current

    def _spec(self, source, overrides: dict, team: str) -> dict:
        try:
            base = self.templates.get(source.template, team)
            spec = copy.deepcopy(base.spec)
        except Exception:  # the source's template was deleted since its claim: its config says enough
            spec = {"mainContainer": {"image": "", "resources": {"memory": "2Gi"}, "env": []}}
        rootfs = source.config.get("rootfs") or {}
        main = spec.setdefault("mainContainer", {})
        main["image"] = rootfs.get("reference") or main.get("image") or ""
        resources = main.setdefault("resources", {})
        if rootfs.get("disk_bytes"):  # a copy of the source's disk is that size
            resources["ephemeralStorage"] = f"{int(rootfs['disk_bytes']) >> 20}Mi"
        for key in ("pod", "clusterId"):
            spec.pop(key, None)
        for key in ("securityContext", "imagePullPolicy"):
            main.pop(key, None)
        if "pool" in spec:
            spec["pool"] = {"minIdle": 0, "maxIdle": 0}
        spec.update({k: v for k, v in overrides.items() if k in OVERRIDABLE})
        return spec

    async def _capture(self, template_id: str, team: str, sandbox_id: str, snapshot_id: str, creation: dict) -> None:
        try:
            snapshot = await self.snapshots.create(sandbox_id, kind=TEMPLATE, snapshot_id=snapshot_id)
        except Exception as exc:
            message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            log.warning("template %s: capturing sandbox %s failed: %s", template_id, sandbox_id, message)
            await asyncio.to_thread(self.templates.set_creation, template_id, team, snapshot_id, {
                **creation, "state": "failed", "reason": "CaptureFailed", "message": message,
                "completedAt": rfc3339(self.manager.clock.now_ns())})
            return
        captured = {**creation, "capturedAt": rfc3339(snapshot.created_ns)}
        await asyncio.to_thread(self.templates.set_creation, template_id, team, snapshot_id,
                                {**captured, "stage": "publishing"})
        ready = {**captured, "state": "ready", "stage": "publishing",
                 "completedAt": rfc3339(self.manager.clock.now_ns())}
        if not await asyncio.to_thread(self.templates.set_creation, template_id, team, snapshot_id, ready):
            await self.snapshots.delete(snapshot_id, None, TEMPLATE)  # deleted while it was captured

    async def delete_template(self, template_id: str, team: str) -> None:
        """The template, and the hidden snapshot its claims copied (they keep their own disks)."""
        snapshot_id = await asyncio.to_thread(self.templates.delete, template_id, team)
        if snapshot_id and self.snapshots.store is not None and self.snapshots.store.record(snapshot_id):
            await asyncio.to_thread(self.snapshots.store.delete, snapshot_id)

    def recover(self) -> int:
        """Start-up: templates a killed server left ``creating`` made ``ready`` (their snapshot was
        published) or ``failed`` (it was not; the snapshot store's sweep removed the rest)."""
        fixed = 0
        store = self.snapshots.store
        captured = self.templates.captured()
        held = {template.snapshot_id for _, template in captured}
        for record in store.records() if store is not None else []:
            if record.get("kind") == TEMPLATE and record["id"] not in held:  # its template was deleted meanwhile
                store.delete(record["id"])
                fixed += 1
        for team, template in captured:
            creation = template.creation or {}
            if creation.get("state") != "creating":
                continue
            now = rfc3339(self.manager.clock.now_ns())
            if store is not None and store.record(template.snapshot_id) is not None:
                new = {**creation, "state": "ready", "stage": "publishing", "completedAt": now}
            else:
                new = {**creation, "state": "failed", "reason": "CaptureInterrupted", "completedAt": now,
                       "message": "the server stopped while the sandbox was being captured; delete and recreate"}
            self.templates.set_creation(template.template_id, team, template.snapshot_id, new)
            fixed += 1
        return fixed

    async def stop(self) -> None:
        await self._tasks.close(timeout_s=10)
