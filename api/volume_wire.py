"""Volumes on the wire: the request bodies of ``/api/v1/sandboxvolumes`` and the SDKs' shapes.

``SandboxVolume`` carries what the TypeScript and Go SDKs require (``id``, ``team_id``,
``user_id``, ``backend``, ``created_at``, ``updated_at``) and the optional fields this server
knows; ``size_bytes`` and ``mounted_by`` are extensions (the disk's size; the SDKs drop or skip unknown keys).
Volume ``Snapshot``: ``id``, ``volume_id``, ``name``, ``size_bytes``, ``created_at`` required.
"""
from __future__ import annotations

from session_supervisor.domain.model.timefmt import rfc3339
from session_supervisor.domain.model.volumes import (
    BACKENDS,
    Volume,
    VolumeRequestError,
    VolumeSnapshot,
    check_snapshot_request,
    parse_access_mode,
    parse_posix_ids,
)

from .template_wire import quantity

MIN_SIZE, MAX_SIZE = 16 * 2**20, 2**40


def _object(body) -> dict:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise VolumeRequestError("invalid request body: expected a JSON object")
    return body


def parse_create(body) -> dict:
    """``{access_mode? = RWO, snapshot_id?, backend? = s0fs, default_posix_uid?, default_posix_gid?,
    size?}`` (``size``: a quantity such as ``2Gi``, or bytes; an extension, default the server's)."""
    body = _object(body)
    backend = body.get("backend")
    if backend not in (None, "", *BACKENDS):
        raise VolumeRequestError(f"backend {backend!r} is not supported here (only s0fs)")
    if body.get("s3") not in (None, {}):
        raise VolumeRequestError("s3 volumes are not supported here")
    snapshot_id = body.get("snapshot_id")
    if snapshot_id is not None and not isinstance(snapshot_id, str):
        raise VolumeRequestError("snapshot_id must be a string")
    return {"access_mode": parse_access_mode(body.get("access_mode")),
            "posix": parse_posix_ids(body.get("default_posix_uid"), body.get("default_posix_gid")),
            "size_bytes": parse_size(body.get("size")), "snapshot_id": snapshot_id}


def parse_size(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return quantity(value, "size", MIN_SIZE, MAX_SIZE, 4096)[1]  # 400 bad_request otherwise


def parse_fork(body) -> dict:
    body = _object(body)
    mode = body.get("access_mode")
    posix = None
    if body.get("default_posix_uid") is not None or body.get("default_posix_gid") is not None:
        posix = parse_posix_ids(body.get("default_posix_uid"), body.get("default_posix_gid"))
    return {"access_mode": parse_access_mode(mode) if mode is not None else None, "posix": posix}


def parse_snapshot(body) -> tuple[str, str]:
    body = _object(body)
    return check_snapshot_request(body.get("name"), body.get("description"))


def render_volume(volume: Volume, allocated: int, observed_ns: int) -> dict:
    out = {"id": volume.id, "team_id": volume.team_id or "local", "user_id": volume.user_id or "platform",
           "backend": "s0fs", "access_mode": volume.access_mode,
           "default_posix_uid": volume.default_posix_uid, "default_posix_gid": volume.default_posix_gid,
           "size_bytes": volume.size_bytes, "metered_storage_bytes": allocated,
           "storage_observed_at": rfc3339(observed_ns),
           "mounted_by": [b.sandbox_id for b in volume.bindings],  # an extension (sessionctl volume list)
           "created_at": rfc3339(volume.created_ns), "updated_at": rfc3339(volume.updated_ns)}
    if volume.source_volume_id:
        out["source_volume_id"] = volume.source_volume_id
    return out


def render_snapshot(snapshot: VolumeSnapshot) -> dict:
    out = {"id": snapshot.id, "volume_id": snapshot.volume_id, "name": snapshot.name,
           "size_bytes": snapshot.size_bytes, "created_at": rfc3339(snapshot.created_ns)}
    if snapshot.description:
        out["description"] = snapshot.description
    return out
