"""The Python SDK (``sandbox0==0.10.4``, strict about statuses and required fields) takes, lists,
gets, restores, forks, claims from and deletes rootfs snapshots, and makes a template from a
sandbox with ``wait``; a memory fork is refused (400) rather than done as a filesystem one."""
from __future__ import annotations

import pytest
from sandbox0 import Client, CreateTemplateFromSandboxOptions
from sandbox0.apispec.models import (CreateSandboxRootFSSnapshotRequest, ForkSandboxRequest,
                                     RestoreSandboxRootFSRequest, TemplateFromSandboxCreateRequest)

from tests.helpers import TOKEN
from tests.snapshots.conftest import needs_disks

pytestmark = needs_disks


def text(sandbox, path: str) -> str:
    return bytes(sandbox.read_file(path)).decode()


def test_the_python_sdk_calls_every_rootfs_route(snap_server):
    client = Client(token=TOKEN, base_url=snap_server.url)
    made = []
    try:
        sb = client.sandboxes.claim("default")
        made.append(sb.id)
        sb.write_file("/workspace/notes.txt", b"v1")
        snap = client.sandboxes.create_rootfs_snapshot(sb.id, CreateSandboxRootFSSnapshotRequest(name="py"))
        assert snap.sandbox_id == sb.id and snap.name == "py"
        assert [s.id for s in client.sandboxes.list_rootfs_snapshots(sb.id)] == [snap.id]
        assert client.sandboxes.get_rootfs_snapshot(snap.id).id == snap.id
        sb.write_file("/workspace/notes.txt", b"v2")
        forked = client.sandboxes.fork(sb.id, ForkSandboxRequest(memory=False))
        made.append(forked.sandbox.id)
        assert forked.source_sandbox_id == sb.id and forked.sandbox.runtime_generation == 0
        with pytest.raises(Exception) as refused:
            client.sandboxes.fork(sb.id, ForkSandboxRequest(memory=True), idempotency_key="k")
        assert getattr(refused.value, "status", getattr(refused.value, "status_code", None)) == 400, refused.value
        client.sandboxes.pause(sb.id)
        restored = client.sandboxes.restore_rootfs(sb.id, RestoreSandboxRootFSRequest(snapshot_id=snap.id))
        assert restored.snapshot_id == snap.id
        client.sandboxes.resume(sb.id)
        assert text(client.sandboxes.sandbox(sb.id), "/workspace/notes.txt") == "v1"
        assert text(client.sandboxes.sandbox(forked.sandbox.id), "/workspace/notes.txt") == "v2"
        other = client.sandboxes.claim("default", snapshot_id=snap.id)
        made.append(other.id)
        assert text(other, "/workspace/notes.txt") == "v1"
        template = client.create_template_from_sandbox(
            TemplateFromSandboxCreateRequest(template_id="py-from-sandbox", sandbox_id=forked.sandbox.id),
            CreateTemplateFromSandboxOptions(wait=True, timeout_sec=60))
        assert template.template_id == "py-from-sandbox"
        third = client.sandboxes.claim("py-from-sandbox")
        made.append(third.id)
        assert text(third, "/workspace/notes.txt") == "v2"
        client.sandboxes.delete_rootfs_snapshot(snap.id)
        client.delete_template("py-from-sandbox")
    finally:
        for each in made:
            try:
                client.sandboxes.delete(each)
            except Exception:
                pass
