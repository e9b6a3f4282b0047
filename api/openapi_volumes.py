"""OpenAPI entries for sandbox volumes (the TypeScript and Go SDKs' ``sandboxvolumes`` and volume
``files``): volumes, their snapshots, fork, restore and the volume file API (``docs/volumes.md``)."""
from __future__ import annotations

from .openapi_schemas import BOOL, NO_NUL, STR, TIME, array, enum, nullable, obj, ref

VOL = "/api/v1/sandboxvolumes"
ONE = VOL + "/{volume_id}"
FILES = ONE + "/files"
_MODE = enum("RWO", "ROX", "RWX")
_UINT = {"type": "integer", "minimum": 0}

SCHEMAS = {
    "SandboxVolume": obj({
        "id": STR, "team_id": STR, "user_id": STR, "backend": enum("s0fs"), "access_mode": _MODE,
        "source_volume_id": STR, "default_posix_uid": _UINT, "default_posix_gid": _UINT,
        "size_bytes": _UINT, "metered_storage_bytes": _UINT, "storage_observed_at": nullable(TIME),
        "mounted_by": {**array(STR), "description": "an extension: the sandboxes that bind it now"},
        "created_at": TIME, "updated_at": TIME},
        ("id", "team_id", "user_id", "backend", "created_at", "updated_at")),
    "SandboxVolumeList": array(ref("SandboxVolume")),
    "CreateSandboxVolumeRequest": obj({
        "access_mode": _MODE, "snapshot_id": STR, "backend": enum("s0fs"),
        "default_posix_uid": _UINT, "default_posix_gid": _UINT,
        "size": {"description": "an extension: the disk's size, a quantity (2Gi) or bytes; default the "
                                "server's --volume-size", "oneOf": [STR, _UINT]}}),
    "ForkVolumeRequest": obj({"access_mode": _MODE, "default_posix_uid": _UINT, "default_posix_gid": _UINT}),
    "VolumeSnapshot": obj({"id": STR, "volume_id": STR, "name": STR, "description": STR, "size_bytes": _UINT,
                           "created_at": TIME, "expires_at": nullable(TIME)},
                          ("id", "volume_id", "name", "size_bytes", "created_at")),
    "VolumeSnapshotList": array(ref("VolumeSnapshot")),
    "CreateVolumeSnapshotRequest": obj({"name": {**NO_NUL, "minLength": 1}, "description": STR}, ("name",)),
    "VolumeRestored": obj({"status": {"const": "restored"}}, ("status",)),
    "VolumeArchiveImport": obj({"files": _UINT, "directories": _UINT, "symlinks": _UINT, "bytes": _UINT},
                               ("files", "directories", "symlinks", "bytes")),
    "ClaimMount": obj({"sandboxvolume_id": STR, "mount_point": {**NO_NUL, "minLength": 1}},
                      ("sandboxvolume_id", "mount_point")),
    "MountStatus": obj({"sandboxvolume_id": STR, "mount_point": STR,
                        "state": enum("pending", "mounting", "mounted", "failed"), "mounted_at": TIME,
                        "mounted_duration_sec": {"type": "number"}, "error_code": STR, "error_message": STR},
                       ("sandboxvolume_id", "mount_point", "state")),
}


def volume_paths(operation, query, upgrade) -> dict:
    v = {"tag": "volumes"}
    errors = (400, 401, 403, 404, 503)
    path = [{**query("path", {**NO_NUL, "minLength": 1}, "a path in the volume (relative: from its root)"),
             "required": True}]
    snapshot = ONE + "/snapshots/{snapshot_id}"
    return {
        VOL: {"post": operation("create_volume", "A volume: a disk of its own that outlives its sandboxes",
                                {201: ref("SandboxVolume")}, (*errors, 429, 507), "CreateSandboxVolumeRequest",
                                False, **v),
              "get": operation("list_volumes", "The team's volumes (data is an array)",
                               {200: ref("SandboxVolumeList")}, (401, 403, 503), **v)},
        ONE: {"get": operation("get_volume", "Get a volume", {200: ref("SandboxVolume")}, errors, **v),
              "delete": operation("delete_volume", "Delete a volume and its snapshots (an unknown id: 200)",
                                  {200: ref("Deleted")}, (*errors, 409), params=[query("force", BOOL)], **v)},
        ONE + "/fork": {"post": operation("fork_volume", "A new volume with a copy of this one's files",
                                          {201: ref("SandboxVolume")}, (*errors, 429, 507), "ForkVolumeRequest",
                                          False, **v)},
        ONE + "/snapshots": {
            "post": operation("create_volume_snapshot", "A copy of the volume's files now",
                              {201: ref("VolumeSnapshot")}, (*errors, 429, 507), "CreateVolumeSnapshotRequest", **v),
            "get": operation("list_volume_snapshots", "The volume's snapshots (data is an array)",
                             {200: ref("VolumeSnapshotList")}, errors, **v)},
        snapshot: {"get": operation("get_volume_snapshot", "Get a snapshot", {200: ref("VolumeSnapshot")}, errors, **v),
                   "delete": operation("delete_volume_snapshot", "Delete a snapshot (an unknown one: 200)",
                                       {200: ref("Deleted")}, errors, **v)},
        snapshot + "/restore": {"post": operation(
            "restore_volume_snapshot", "The volume's files become the snapshot's (not while a running sandbox "
            "mounts it)", {200: ref("VolumeRestored")}, (*errors, 409, 507), **v)},
        FILES: {
            "get": operation("read_volume_file", "Read a file (octet-stream; JSON base64 with Accept: "
                             "application/json)", {200: {"description": "the bytes", "content": {
                                 "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                                 "application/json": {"schema": ref("FileContent")}}}}, (*errors, 409, 413),
                             params=path, **v),
            "post": operation("write_volume_file", "Write a file atomically (body: the bytes), or mkdir=true",
                              {200: ref("Written"), 201: ref("Created")}, (*errors, 409, 507),
                              params=[*path, query("mkdir", BOOL), query("recursive", BOOL)], **v),
            "delete": operation("delete_volume_file", "Delete a file, a link or a directory tree",
                                {200: ref("Deleted")}, errors, params=path, **v)},
        FILES + "/stat": {"get": operation("stat_volume_file", "Stat a path (links are not followed)",
                                           {200: ref("FileInfo")}, errors, params=path, **v)},
        FILES + "/list": {"get": operation("list_volume_files", "List a directory", {200: ref("FileList")},
                                           (*errors, 409), params=path, **v)},
        FILES + "/move": {"post": operation("move_volume_file", "Rename within the volume", {200: ref("Moved")},
                                            (*errors, 409), "MoveFileRequest", **v)},
        FILES + "/archive": {"put": operation("import_volume_archive", "Unpack a tar body under path",
                                              {200: ref("VolumeArchiveImport")}, (*errors, 409, 413, 507),
                                              params=path, **v)},
        FILES + "/watch": {"get": {**operation("watch_volume_files", "WebSocket: a directory's changes",
                                               {101: upgrade}, (401, 403, 404, 426, 503), **v),
                                   "x-websocket": {"client": "{action: subscribe, path, recursive} | "
                                                             "{action: unsubscribe, watch_id}",
                                                   "server": "{type: subscribed|unsubscribed|event|error, "
                                                             "watch_id, event, path, error}"}}},
    }
