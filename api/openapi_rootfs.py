"""OpenAPI entries for rootfs snapshots, restore and fork (the SDKs' ``apispec/api/sandbox_rootfs``)."""
from __future__ import annotations

from .openapi_schemas import BOOL, INT32, INT64, STR, TIME, array, enum, obj, ref

SB = "/api/v1/sandboxes/{sandbox_id}"

SCHEMAS = {
    "SandboxRootFSSnapshot": obj({"id": STR, "sandbox_id": STR, "created_at": TIME, "name": STR, "description": STR,
                                  "expires_at": TIME, "size_bytes": INT64}, ("id", "sandbox_id", "created_at")),
    "SandboxRootFSSnapshotList": obj({"snapshots": array(ref("SandboxRootFSSnapshot")),
                                      "count": {"type": "integer"}}, ("snapshots", "count")),
    "CreateSandboxRootFSSnapshotRequest": obj({"name": STR, "description": STR, "expires_at": TIME}),
    "SnapshotDeleted": obj({"deleted": BOOL}, ("deleted",)),
    "RestoreSandboxRootFSRequest": obj({"snapshot_id": STR}, ("snapshot_id",)),
    "RestoreSandboxRootFSResponse": obj({"sandbox_id": STR, "snapshot_id": STR, "status": enum("paused")},
                                        ("sandbox_id", "snapshot_id", "status")),
    "RebaseSandboxRootFSRequest": obj({"target_base_artifact_digest": STR, "rollback_ttl": INT32},
                                      ("target_base_artifact_digest",)),
    "ForkSandboxRequest": obj({"memory": BOOL, "config": obj({"ttl": INT32, "hard_ttl": INT32})}),
    "ForkSandboxResponse": obj({"source_sandbox_id": STR, "sandbox": ref("Sandbox")}, ("source_sandbox_id", "sandbox")),
}


def rootfs_paths(operation) -> dict:
    t = {"tag": "rootfs"}  # a tag of their own: the stateful run's sandboxes pass stays within its budget
    one = "/api/v1/sandbox-rootfs-snapshots/{snapshot_id}"
    return {
        SB + "/snapshots": {
            "post": operation("create_sandbox_rootfs_snapshot", "Snapshot a running or paused sandbox's rootfs",
                              {201: ref("SandboxRootFSSnapshot")}, (400, 401, 404, 409, 503, 507),
                              "CreateSandboxRootFSSnapshotRequest", body_required=False, **t),
            "get": operation("list_sandbox_rootfs_snapshots", "The sandbox's rootfs snapshots",
                             {200: ref("SandboxRootFSSnapshotList")}, (401, 404), **t)},
        one: {"get": operation("get_sandbox_rootfs_snapshot", "One rootfs snapshot",
                               {200: ref("SandboxRootFSSnapshot")}, (401, 404), **t),
              "delete": operation("delete_sandbox_rootfs_snapshot", "Delete a rootfs snapshot",
                                  {200: ref("SnapshotDeleted")}, (401, 404), **t)},
        SB + "/rootfs/restore": {"post": operation(
            "restore_sandbox_rootfs", "A paused sandbox's rootfs becomes a copy of a snapshot",
            {200: ref("RestoreSandboxRootFSResponse")}, (400, 401, 404, 409, 503, 507),
            "RestoreSandboxRootFSRequest", **t)},
        SB + "/rootfs/rebase": {"put": operation(
            "rebase_sandbox_rootfs", "Not supported (503)", {200: {"type": "object"}}, (400, 401, 404, 503),
            "RebaseSandboxRootFSRequest", **t)},
        SB + "/fork": {"post": operation(
            "fork_sandbox", "A paused copy of a running or paused sandbox", {201: ref("ForkSandboxResponse")},
            (400, 401, 404, 409, 503, 507), "ForkSandboxRequest", body_required=False, **t)},
    }
