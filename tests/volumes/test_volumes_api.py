"""Volumes over HTTP, in the shapes the TypeScript and Go SDKs parse: create, list, get, delete (with
``force``), bound at claim, a second RWO binding refused, bad input answered with one clear error."""
from __future__ import annotations

from datetime import datetime

from tests.helpers import err, ok

from .conftest import U, V, claim_with, needs_root, new_volume

pytestmark = needs_root

# The Go SDK (sdk-go@e05d7af) cannot be vendored: its required fields, from the contract.
GO_VOLUME = ("id", "team_id", "user_id", "backend", "created_at", "updated_at")
GO_SNAPSHOT = ("id", "volume_id", "name", "size_bytes", "created_at")
GO_MOUNT_STATUS = ("sandboxvolume_id", "mount_point", "state")


def go_parses(data: dict, required: tuple) -> None:
    missing = [key for key in required if data.get(key) is None]
    assert not missing, f"the Go SDK requires {missing}: {data}"
    for key in ("created_at", "updated_at"):
        if key in data:
            assert datetime.fromisoformat(data[key].replace("Z", "+00:00")).tzinfo is not None


def test_a_volume_is_created_listed_got_and_deleted_in_the_shapes_the_sdks_parse(vhttp):
    created = ok(vhttp.post(V, json={"access_mode": "RWO"}), 201)  # what TS and Go send
    go_parses(created, GO_VOLUME)
    assert created["access_mode"] == "RWO" and created["backend"] == "s0fs"
    assert created["size_bytes"] == 64 * 2**20 and created["metered_storage_bytes"] > 0
    listed = ok(vhttp.get(V), 200)
    assert isinstance(listed, list) and created["id"] in [v["id"] for v in listed]  # an array in data
    for volume in listed:
        go_parses(volume, GO_VOLUME)
    assert ok(vhttp.get(f"{V}/{created['id']}"), 200)["id"] == created["id"]
    assert ok(vhttp.delete(f"{V}/{created['id']}"), 200) == {"deleted": True}
    err(vhttp.get(f"{V}/{created['id']}"), 404, "not_found")
    assert ok(vhttp.delete(f"{V}/{created['id']}"), 200) == {"deleted": True}  # idempotent, as the reference


def test_bad_input_gets_one_clear_error_in_the_envelope(vhttp):
    assert "access_mode" in err(vhttp.post(V, json={"access_mode": "RWZ"}), 400, "bad_request")["message"]
    assert "snapshot_id" in err(vhttp.post(V, json={"snapshot_id": "  "}), 400, "bad_request")["message"]
    err(vhttp.post(V, json={"snapshot_id": "00000000-0000-4000-8000-000000000000"}), 404, "not_found")
    err(vhttp.post(V, json={"default_posix_uid": 5}), 400, "bad_request")  # uid without gid
    err(vhttp.post(V, json={"size": "1Ki"}), 400, "bad_request")
    err(vhttp.post(V, json=[1]), 400, "bad_request")
    unknown = "6f1c2b8e-1111-4222-8333-444455556666"
    for call in (vhttp.get(f"{V}/{unknown}"), vhttp.post(f"{V}/{unknown}/fork", json={}),
                 vhttp.get(f"{V}/{unknown}/snapshots"), vhttp.post(f"{V}/{unknown}/snapshots", json={"name": "x"}),
                 vhttp.get(f"{V}/{unknown}/files/list", params={"path": "/"}), vhttp.get(f"{V}/../etc")):
        assert call.status_code == 404, call.text
    volume = new_volume(vhttp)
    try:
        assert "name" in err(vhttp.post(f"{V}/{volume}/snapshots", json={}), 400, "bad_request")["message"]
        err(vhttp.get(f"{V}/{volume}/snapshots/{unknown}"), 404, "not_found")
        err(vhttp.post(f"{V}/{volume}/snapshots/{unknown}/restore"), 404, "not_found")
        for mounts, words in (([{"sandboxvolume_id": volume, "mount_point": "workspace"}], "absolute"),
                              ([{"sandboxvolume_id": volume, "mount_point": "/a/../b"}], ".."),
                              ([{"sandboxvolume_id": volume, "mount_point": "/"}], "must not be /"),
                              ([{"sandboxvolume_id": volume, "mount_point": "/proc/x"}], "system path"),
                              ([{"sandboxvolume_id": volume, "mount_point": "/workspace/"}], "clean"),
                              ([{"mount_point": "/workspace"}], "sandboxvolume_id is required"),
                              ({"sandboxvolume_id": volume}, "array"),
                              ([{"sandboxvolume_id": volume, "mount_point": "/workspace"}] * 2, "twice")):
            refused = err(vhttp.post(U, json={"template": "default", "mounts": mounts}), 400, "bad_request")
            assert words in refused["message"], (mounts, refused)
        missing = err(vhttp.post(U, json={"template": "default", "mounts": [
            {"sandboxvolume_id": unknown, "mount_point": "/workspace"}]}), 404, "not_found")
        assert unknown in missing["message"]
        assert ok(vhttp.get(U), 200)["count"] == 0  # none of those claims left a sandbox behind
    finally:
        vhttp.delete(f"{V}/{volume}")


def test_a_second_rwo_binding_is_refused_and_a_bound_volume_is_deleted_only_with_force(vhttp):
    volume = new_volume(vhttp)
    first = claim_with(vhttp, volume)
    mounted = first["bootstrap_mounts"]
    assert [m["sandboxvolume_id"] for m in mounted] == [volume] and mounted[0]["state"] == "mounted"
    for status in mounted:
        go_parses(status, GO_MOUNT_STATUS)
    got = ok(vhttp.get(f"{U}/{first['sandbox_id']}"), 200)
    assert got["mounts"] == [{"sandboxvolume_id": volume, "mount_point": "/workspace"}]
    try:
        second = err(vhttp.post(U, json={"template": "default", "mounts": [
            {"sandboxvolume_id": volume, "mount_point": "/workspace"}]}), 409, "conflict")
        assert first["sandbox_id"] in second["message"] and "RWO" in second["message"]
        assert second["details"]["active_mounts"] == 1
        busy = err(vhttp.delete(f"{V}/{volume}"), 409, "conflict")
        assert busy["message"] == "volume has active mounts"
        (mount,) = busy["details"]["mounts"]
        assert (mount["sandbox_id"], mount["mount_point"]) == (first["sandbox_id"], "/workspace")
        assert mount["mounted_at"] >= got["created_at"][:19], (mount, got)  # since its claim
        assert "force=true" in busy["details"]["hint"]
    finally:
        ok(vhttp.delete(f"{U}/{first['sandbox_id']}"), 202)
    again = claim_with(vhttp, volume)  # free once its sandbox is gone
    try:
        assert ok(vhttp.delete(f"{V}/{volume}", params={"force": "true"}), 200) == {"deleted": True}
        err(vhttp.get(f"{V}/{volume}"), 404)
        # Its sandbox runs on: the volume is gone from under it, its own workspace is still there.
        ok(vhttp.get(f"{U}/{again['sandbox_id']}"), 200)
    finally:
        ok(vhttp.delete(f"{U}/{again['sandbox_id']}"), 202)


def test_an_rwx_volume_is_refused_at_claim_and_an_rox_one_is_bound_to_several(vhttp):
    rwx = new_volume(vhttp, access_mode="RWX")
    rox = new_volume(vhttp, access_mode="rox")
    claimed = []
    try:
        assert "RWX" in err(vhttp.post(U, json={"template": "default", "mounts": [
            {"sandboxvolume_id": rwx, "mount_point": "/workspace"}]}), 400, "bad_request")["message"]
        claimed = [claim_with(vhttp, rox)["sandbox_id"] for _ in range(2)]
        assert ok(vhttp.get(f"{V}/{rox}"), 200)["access_mode"] == "ROX"
    finally:
        for sandbox in claimed:
            vhttp.delete(f"{U}/{sandbox}")
        vhttp.delete(f"{V}/{rwx}")
        vhttp.delete(f"{V}/{rox}")


def test_snapshots_restore_and_fork_copy_a_volumes_files(vhttp):
    volume = new_volume(vhttp)
    fork = None
    try:
        ok(vhttp.post(f"{V}/{volume}/files", params={"path": "notes.txt"}, content=b"version 1"), 200)
        snapshot = ok(vhttp.post(f"{V}/{volume}/snapshots", json={"name": "before", "description": "v1"}), 201)
        go_parses(snapshot, GO_SNAPSHOT)
        assert snapshot["volume_id"] == volume and snapshot["description"] == "v1" and snapshot["size_bytes"] > 0
        ok(vhttp.post(f"{V}/{volume}/files", params={"path": "notes.txt"}, content=b"version 2"), 200)
        listed = ok(vhttp.get(f"{V}/{volume}/snapshots"), 200)
        assert [s["id"] for s in listed] == [snapshot["id"]]  # an array in data
        assert ok(vhttp.get(f"{V}/{volume}/snapshots/{snapshot['id']}"), 200)["name"] == "before"
        forked = ok(vhttp.post(f"{V}/{volume}/fork", json={}), 201)
        fork = forked["id"]
        go_parses(forked, GO_VOLUME)
        assert forked["source_volume_id"] == volume and forked["access_mode"] == "RWO"
        assert ok(vhttp.post(f"{V}/{volume}/snapshots/{snapshot['id']}/restore"), 200) == {"status": "restored"}
        assert vhttp.get(f"{V}/{volume}/files", params={"path": "notes.txt"}).content == b"version 1"
        assert vhttp.get(f"{V}/{fork}/files", params={"path": "notes.txt"}).content == b"version 2"
        from_snapshot = ok(vhttp.post(V, json={"snapshot_id": snapshot["id"]}), 201)["id"]
        assert vhttp.get(f"{V}/{from_snapshot}/files", params={"path": "notes.txt"}).content == b"version 1"
        vhttp.delete(f"{V}/{from_snapshot}")
        assert ok(vhttp.delete(f"{V}/{volume}/snapshots/{snapshot['id']}"), 200) == {"deleted": True}
        assert ok(vhttp.delete(f"{V}/{volume}/snapshots/{snapshot['id']}"), 200) == {"deleted": True}
        assert ok(vhttp.get(f"{V}/{volume}/snapshots"), 200) == []
    finally:
        vhttp.delete(f"{V}/{volume}")
        if fork:
            vhttp.delete(f"{V}/{fork}")


def test_a_restore_is_refused_while_a_running_sandbox_mounts_the_volume(vhttp):
    volume = new_volume(vhttp)
    snapshot = ok(vhttp.post(f"{V}/{volume}/snapshots", json={"name": "s"}), 201)["id"]
    sandbox = claim_with(vhttp, volume)["sandbox_id"]
    try:
        refused = err(vhttp.post(f"{V}/{volume}/snapshots/{snapshot}/restore"), 409, "conflict")
        assert sandbox in refused["message"]
        ok(vhttp.post(f"{U}/{sandbox}/pause", json={}), 200)
        ok(vhttp.post(f"{V}/{volume}/snapshots/{snapshot}/restore"), 200)  # paused: nothing has it mounted
    finally:
        vhttp.delete(f"{U}/{sandbox}")
        vhttp.delete(f"{V}/{volume}")


def test_the_team_quota_counts_volumes_and_snapshots_and_a_delete_gives_it_back(vhttp, volume_server):
    existing = ok(vhttp.get(V), 200)
    assert not existing, existing
    big = new_volume(vhttp, size="448Mi")  # 448 of the 512 MiB quota
    small = None
    try:
        refused = err(vhttp.post(V, json={"size": "128Mi"}), 429, "quota_exceeded")
        assert "512" in refused["message"] or str(512 * 2**20) in refused["message"]
        small = new_volume(vhttp, size="32Mi")
        ok(vhttp.post(f"{V}/{small}/snapshots", json={"name": "s"}), 201)  # a snapshot's blocks count too
        err(vhttp.post(f"{V}/{big}/fork", json={}), 429, "quota_exceeded")
        vhttp.delete(f"{V}/{big}")
        big = None
        ok(vhttp.delete(f"{V}/{new_volume(vhttp, size='448Mi')}"), 200)  # the space came back
    finally:
        for volume in (big, small):
            if volume:
                vhttp.delete(f"{V}/{volume}")
    leftovers = [p.name for p in (volume_server.data_dir / "volumes").iterdir() if p.name != ".lock"]
    assert not leftovers, leftovers  # every disk and snapshot of them is gone from the data dir
