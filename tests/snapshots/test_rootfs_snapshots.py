"""Rootfs snapshots over the wire: a running sandbox's file and an installed program are captured,
restored after a change, forked into a child that sees the old state while the parent keeps its
new one, and claimed from; unknown ids are 404 and a running sandbox cannot be restored (409)."""
from __future__ import annotations

from tests.helpers import err, ok, wait_for, workspace_dir
from tests.snapshots.conftest import needs_disks
from tests.snapshots.helpers import SB, claim, pool_used, read, run, snapshot, write

pytestmark = needs_disks

# "A package installed": a program put on the sandbox's PATH under the workspace (the default
# template has no package manager; an image template's writable layer is tested in the SDK test).
INSTALL = "mkdir -p /workspace/bin && printf '#!/bin/sh\\necho tool-%s\\n' > /workspace/bin/tool && chmod +x /workspace/bin/tool"


def pause(http, sb):
    ok(http.post(f"{SB}/{sb}/pause", json={}), 200)


def test_a_snapshot_of_a_running_sandbox_is_restored_after_both_changed(snap_http):
    sb = claim(snap_http)
    write(snap_http, sb, "/workspace/notes.txt", b"before")
    run(snap_http, sb, INSTALL % "v1")
    snap = snapshot(snap_http, sb, name="before")
    assert snap["sandbox_id"] == sb and snap["id"].startswith("rootfs-snapshot-") and snap["name"] == "before"
    assert "expires_at" not in snap
    write(snap_http, sb, "/workspace/notes.txt", b"after")
    run(snap_http, sb, INSTALL % "v2")
    assert run(snap_http, sb, "/workspace/bin/tool").strip() == "tool-v2"
    err(snap_http.post(f"{SB}/{sb}/rootfs/restore", json={"snapshot_id": snap["id"]}), 409, "conflict")
    pause(snap_http, sb)
    restored = ok(snap_http.post(f"{SB}/{sb}/rootfs/restore", json={"snapshot_id": snap["id"]}), 200)
    assert restored == {"sandbox_id": sb, "snapshot_id": snap["id"], "status": "paused"}
    ok(snap_http.post(f"{SB}/{sb}/resume", json={}), 200)
    assert read(snap_http, sb, "/workspace/notes.txt") == b"before"
    assert run(snap_http, sb, "/workspace/bin/tool").strip() == "tool-v1"
    listed = ok(snap_http.get(f"{SB}/{sb}/snapshots"), 200)
    assert listed["count"] == 1 and listed["snapshots"][0]["id"] == snap["id"]
    ok(snap_http.delete(f"/api/v1/sandbox-rootfs-snapshots/{snap['id']}"), 200)
    err(snap_http.get(f"/api/v1/sandbox-rootfs-snapshots/{snap['id']}"), 404, "not_found")
    ok(snap_http.delete(f"{SB}/{sb}"), 202)


def test_a_fork_sees_the_state_at_the_fork_while_the_parent_keeps_writing(snap_server, snap_http):
    parent = claim(snap_http)
    write(snap_http, parent, "/workspace/notes.txt", b"shared")
    made = ok(snap_http.post(f"{SB}/{parent}/fork", json={}), 201)
    child = made["sandbox"]["id"]
    assert made["source_sandbox_id"] == parent and child != parent
    assert made["sandbox"]["status"] == "paused" and made["sandbox"]["runtime_generation"] == 0
    write(snap_http, parent, "/workspace/notes.txt", b"parent-only")
    assert read(snap_http, child, "/workspace/notes.txt") == b"shared"  # auto_resume starts it
    write(snap_http, child, "/workspace/notes.txt", b"child-only")
    assert read(snap_http, parent, "/workspace/notes.txt") == b"parent-only"
    owners = [(workspace_dir(snap_server.data_dir, sb) / "notes.txt").stat().st_uid for sb in (parent, child)]
    assert owners[0] != owners[1]  # on the host, the child's files were handed to a uid of its own
    for sb in (parent, child):
        ok(snap_http.delete(f"{SB}/{sb}"), 202)


def test_a_claim_from_a_snapshot_starts_from_it_and_outlives_its_source(snap_http):
    source = claim(snap_http)
    write(snap_http, source, "/workspace/README", b"prepared")
    snap = snapshot(snap_http, source)
    ok(snap_http.delete(f"{SB}/{source}"), 202)
    got = ok(snap_http.get(f"/api/v1/sandbox-rootfs-snapshots/{snap['id']}"), 200)
    assert got["id"] == snap["id"] and got["sandbox_id"] == source
    sb = claim(snap_http, snapshot_id=snap["id"])
    assert read(snap_http, sb, "/workspace/README") == b"prepared"
    ok(snap_http.delete(f"{SB}/{sb}"), 202)
    ok(snap_http.delete(f"/api/v1/sandbox-rootfs-snapshots/{snap['id']}"), 200)


def test_restoring_another_sandboxs_snapshot_starts_with_no_sessions(snap_http):
    donor, target = claim(snap_http), claim(snap_http)
    write(snap_http, donor, "/workspace/from-donor", b"donor")
    snap = snapshot(snap_http, donor)
    ok(snap_http.post(f"{SB}/{target}/sessions", json={"command": ["sleep", "600"]}), 201)
    assert len(ok(snap_http.get(f"{SB}/{target}/sessions"), 200)["sessions"]) == 1
    pause(snap_http, target)
    ok(snap_http.post(f"{SB}/{target}/rootfs/restore", json={"snapshot_id": snap["id"]}), 200)
    ok(snap_http.post(f"{SB}/{target}/resume", json={}), 200)
    assert ok(snap_http.get(f"{SB}/{target}/sessions"), 200)["sessions"] == []
    assert read(snap_http, target, "/workspace/from-donor") == b"donor"
    for sb in (donor, target):
        ok(snap_http.delete(f"{SB}/{sb}"), 202)


def test_unknown_ids_are_404_in_the_envelope(snap_http):
    sb = claim(snap_http)
    missing = "rootfs-snapshot-0000000000"
    err(snap_http.get(f"/api/v1/sandbox-rootfs-snapshots/{missing}"), 404, "not_found")
    err(snap_http.delete(f"/api/v1/sandbox-rootfs-snapshots/{missing}"), 404, "not_found")
    err(snap_http.get("/api/v1/sandbox-rootfs-snapshots/not-even-an-id"), 404, "not_found")
    err(snap_http.post(f"{SB}/{sb}-nope/snapshots"), 404)
    err(snap_http.post(f"{SB}/{sb}-nope/fork", json={}), 404)
    err(snap_http.post(SB, json={"template": "default", "snapshot_id": missing}), 404, "not_found")
    pause(snap_http, sb)
    err(snap_http.post(f"{SB}/{sb}/rootfs/restore", json={"snapshot_id": missing}), 404, "not_found")
    err(snap_http.post(f"{SB}/{sb}/rootfs/restore", json={}), 400, "bad_request")
    err(snap_http.post(f"{SB}/{sb}/fork", json={"memory": True}), 400, "bad_request")
    ok(snap_http.delete(f"{SB}/{sb}"), 202)


def test_a_snapshot_holds_only_what_its_source_changed_since_and_its_delete_frees_it(snap_server, snap_http):
    sb = claim(snap_http)
    run(snap_http, sb, "head -c 64M /dev/urandom > /workspace/fill && sync")
    before = pool_used(snap_server.data_dir)
    snap = snapshot(snap_http, sb)
    assert pool_used(snap_server.data_dir) - before < 1 << 20  # a reflink: nothing new yet
    run(snap_http, sb, "head -c 64M /dev/urandom > /workspace/fill && sync")  # the source rewrites it
    held = pool_used(snap_server.data_dir) - before
    assert held > 60 << 20  # the old blocks are the snapshot's alone now
    ok(snap_http.delete(f"/api/v1/sandbox-rootfs-snapshots/{snap['id']}"), 200)
    # Its delete gives them back (XFS frees a deleted file's blocks in the background).
    wait_for(lambda: pool_used(snap_server.data_dir) - before < held - (60 << 20), timeout=20,
             describe=lambda: (pool_used(snap_server.data_dir) - before, held))
    ok(snap_http.delete(f"{SB}/{sb}"), 202)


def test_restoring_its_own_snapshot_keeps_the_sessions_and_their_journal_goes_on(snap_http):
    sb = claim(snap_http)
    sid = ok(snap_http.post(f"{SB}/{sb}/sessions", json={"command": ["sleep", "600"]}), 201)["id"]
    write(snap_http, sb, "/workspace/notes.txt", b"at the snapshot")
    snap = snapshot(snap_http, sb)
    write(snap_http, sb, "/workspace/notes.txt", b"later")
    latest = ok(snap_http.get(f"{SB}/{sb}/sessions/{sid}/events"), 200)["cursor"]["latest"]
    pause(snap_http, sb)  # (a session read would resume it: auto_resume)
    ok(snap_http.post(f"{SB}/{sb}/rootfs/restore", json={"snapshot_id": snap["id"]}), 200)
    ok(snap_http.post(f"{SB}/{sb}/resume", json={}), 200)
    assert [s["id"] for s in ok(snap_http.get(f"{SB}/{sb}/sessions"), 200)["sessions"]] == [sid]
    page = ok(snap_http.get(f"{SB}/{sb}/sessions/{sid}/events"), 200)
    assert page["cursor"]["latest"] >= latest and page["events"][0]["type"] == "session.created"  # history kept
    assert read(snap_http, sb, "/workspace/notes.txt") == b"at the snapshot"
    ok(snap_http.delete(f"{SB}/{sb}"), 202)


def test_a_snapshot_past_its_expiry_is_gone_and_a_past_expiry_is_refused(snap_http):
    from datetime import datetime, timedelta, timezone
    sb = claim(snap_http)
    soon = (datetime.now(timezone.utc) + timedelta(seconds=2)).isoformat()
    snap = snapshot(snap_http, sb, expires_at=soon)
    assert snap["expires_at"].startswith(soon[:19])
    wait_for(lambda: snap_http.get(f"/api/v1/sandbox-rootfs-snapshots/{snap['id']}").status_code == 404, timeout=15)
    assert ok(snap_http.get(f"{SB}/{sb}/snapshots"), 200)["count"] == 0
    past = (datetime.now(timezone.utc) - timedelta(seconds=5)).isoformat()
    err(snap_http.post(f"{SB}/{sb}/snapshots", json={"expires_at": past}), 400, "bad_request")
    ok(snap_http.delete(f"{SB}/{sb}"), 202)
