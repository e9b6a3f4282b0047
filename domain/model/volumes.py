"""Sandbox volumes: a team's disk that outlives its sandboxes, and the rules of binding one.

A volume is bound at claim (``mounts: [{sandboxvolume_id, mount_point}]``) and stays bound to
that sandbox until the sandbox is deleted, paused or not. Access modes, as the reference names
them: ``RWO`` (one sandbox at a time, read-write), ``ROX`` (any number of sandboxes, read-only),
``RWX`` (refused at claim, as the reference does: a volume is one filesystem that only one node
may write). Pure: records, validation and the quota arithmetic; storage is ``ports.VolumeStore``.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from .errors import (VolumeConflictError, VolumeNotFoundError, VolumeQuotaError,  # noqa: F401  (raised here too)
                     VolumeRequestError, VolumeSnapshotNotFoundError)

ACCESS_MODES = ("RWO", "ROX", "RWX")
BACKENDS = ("s0fs",)  # s3 volumes are the reference's cloud backend: refused here
WORKSPACE = "/workspace"
MAX_MOUNTS = 16
MAX_NAME = 255
MAX_DESCRIPTION = 4096
# Paths a volume may not cover: the kernel's views, the runtime's own staging, and /tmp, which the
# sandbox has already; the host's system directories are bound read-only for sandboxes without an
# image, so a mount point below them cannot even be made.
RESERVED = ("/proc", "/dev", "/sys", "/run", "/tmp", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
            "/libx32", "/etc", "/opt", "/boot")


@dataclass
class Binding:
    sandbox_id: str
    mount_point: str
    read_only: bool
    bound_ns: int


@dataclass
class Volume:
    id: str
    team_id: str
    user_id: str
    access_mode: str
    size_bytes: int
    created_ns: int
    updated_ns: int
    source_volume_id: str = ""
    default_posix_uid: int = 0
    default_posix_gid: int = 0
    bindings: list[Binding] = field(default_factory=list)

    def bound_to(self, sandbox_id: str) -> list[Binding]:
        return [b for b in self.bindings if b.sandbox_id == sandbox_id]


@dataclass
class VolumeSnapshot:
    id: str
    volume_id: str
    team_id: str
    name: str
    description: str
    size_bytes: int   # what its copy of the disk takes (allocated blocks): what it costs the quota
    volume_size_bytes: int  # the size of the disk it copied (a restore or a new volume gets it)
    created_ns: int


def parse_access_mode(value) -> str:
    if value is None or value == "":
        return "RWO"
    if not isinstance(value, str) or value.upper() not in ACCESS_MODES:
        raise VolumeRequestError("invalid access_mode")
    return value.upper()


def parse_posix_ids(uid, gid) -> tuple[int, int]:
    """Both or neither (the reference's rule), non-negative integers; 0 when neither."""
    if (uid is None) != (gid is None):
        raise VolumeRequestError("default_posix_uid and default_posix_gid must be set together")
    if uid is None:
        return 0, 0
    for value in (uid, gid):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
            raise VolumeRequestError("default_posix_uid and default_posix_gid must be non-negative integers")
    return uid, gid


def check_mount_point(value, index: int = 0) -> str:
    """Absolute, clean, not ``/``, no ``..``, not a reserved system path."""
    where = f"mounts[{index}].mount_point"
    if not isinstance(value, str) or not value:
        raise VolumeRequestError(f"{where} is required")
    if "\0" in value or len(value.encode()) > 4096:
        raise VolumeRequestError(f"{where} is invalid")
    if not value.startswith("/"):
        raise VolumeRequestError(f"{where} {value!r} must be absolute")
    if ".." in value.split("/"):
        raise VolumeRequestError(f"{where} {value!r} must not contain '..'")
    if posixpath.normpath(value) != value or value.startswith("//"):
        raise VolumeRequestError(f"{where} {value!r} must be a clean path ({posixpath.normpath(value)!r})")
    if value == "/":
        raise VolumeRequestError(f"{where} must not be /")
    for reserved in RESERVED:
        if value == reserved or value.startswith(reserved + "/"):
            raise VolumeRequestError(f"{where} {value!r} is a system path ({reserved})")
    return value


def parse_mounts(value) -> list[dict]:
    """The claim's ``mounts``: ``[{sandboxvolume_id, mount_point}]``, one volume per path and per claim."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise VolumeRequestError("mounts must be an array")
    if len(value) > MAX_MOUNTS:
        raise VolumeRequestError(f"at most {MAX_MOUNTS} mounts")
    out: list[dict] = []
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise VolumeRequestError(f"mounts[{index}] must be an object")
        volume_id = item.get("sandboxvolume_id")
        if not isinstance(volume_id, str) or not volume_id.strip():
            raise VolumeRequestError(f"mounts[{index}].sandboxvolume_id is required")
        point = check_mount_point(item.get("mount_point"), index)
        if any(m["mount_point"] == point for m in out):
            raise VolumeRequestError(f"mounts[{index}].mount_point {point!r} is mounted twice")
        if any(m["sandboxvolume_id"] == volume_id.strip() for m in out):
            raise VolumeRequestError(f"mounts[{index}]: sandboxvolume {volume_id.strip()} is mounted twice")
        out.append({"sandboxvolume_id": volume_id.strip(), "mount_point": point})
    return sorted(out, key=lambda m: (m["mount_point"].count("/"), m["mount_point"]))  # parents first


def check_snapshot_request(name, description) -> tuple[str, str]:
    if not isinstance(name, str) or not name.strip():
        raise VolumeRequestError("name is required")
    if len(name) > MAX_NAME:
        raise VolumeRequestError(f"name is longer than {MAX_NAME} characters")
    if description is not None and not isinstance(description, str):
        raise VolumeRequestError("description must be a string")
    if description and len(description) > MAX_DESCRIPTION:
        raise VolumeRequestError(f"description is longer than {MAX_DESCRIPTION} characters")
    return name.strip(), description or ""


def team_usage(volumes: list[Volume], snapshots: list[VolumeSnapshot]) -> int:
    """What a team's volumes cost its quota: each volume its whole size (it may fill it at any
    time), each snapshot the blocks its copy takes."""
    return sum(v.size_bytes for v in volumes) + sum(s.size_bytes for s in snapshots)
