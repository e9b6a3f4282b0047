"""A template made from a sandbox: 202 ``creating``, then ``ready``; its claims start from the
sandbox's disk as it was at the capture, and the source keeps running and writing."""
from __future__ import annotations

from tests.helpers import err, ok, wait_for
from tests.snapshots.conftest import needs_disks
from tests.snapshots.helpers import SB, claim, read, write

pytestmark = needs_disks
TPL = "/api/v1/templates"


def test_a_claim_of_a_template_made_from_a_sandbox_starts_from_its_disk(snap_http):
    source = claim(snap_http)
    write(snap_http, source, "/workspace/setup.txt", b"prepared once")
    body = {"template_id": "prepared", "sandbox_id": source, "spec_overrides": {"displayName": "Prepared"}}
    resp = snap_http.post(f"{TPL}/from-sandbox", json=body, headers={"Idempotency-Key": "k1"})
    made = ok(resp, 202)
    assert resp.headers["Location"] == f"{TPL}/prepared"
    assert made["status"]["creation"]["state"] == "creating" and made["spec"]["displayName"] == "Prepared"

    def ready():
        got = ok(snap_http.get(f"{TPL}/prepared"), 200)
        return got if got["status"]["creation"]["state"] != "creating" else None
    got = wait_for(ready, timeout=30, describe="template ready")
    assert got["status"]["creation"]["state"] == "ready", got
    write(snap_http, source, "/workspace/setup.txt", b"changed after")
    again = ok(snap_http.post(f"{TPL}/from-sandbox", json=body, headers={"Idempotency-Key": "k1"}), 202)
    assert again["created_at"] == made["created_at"]  # the same call again: the same template
    err(snap_http.post(f"{TPL}/from-sandbox", json={**body, "spec_overrides": {}}, headers={"Idempotency-Key": "k1"}),
        409, "conflict")
    sb = claim(snap_http, "prepared")
    assert read(snap_http, sb, "/workspace/setup.txt") == b"prepared once"
    assert read(snap_http, source, "/workspace/setup.txt") == b"changed after"
    assert ok(snap_http.get(f"{SB}/{source}/snapshots"), 200)["count"] == 0  # its snapshot is hidden
    ok(snap_http.delete(f"{TPL}/prepared"), 200)
    for each in (sb, source):
        ok(snap_http.delete(f"{SB}/{each}"), 202)


def test_a_template_from_an_unknown_sandbox_is_404_and_bad_bodies_400(snap_http):
    err(snap_http.post(f"{TPL}/from-sandbox", json={"template_id": "x1", "sandbox_id": "sb-0000000000000000"}),
        404, "not_found")
    err(snap_http.post(f"{TPL}/from-sandbox", json={"template_id": "x1", "sandbox_id": "Not/A/Name"}),
        400, "bad_request")
    err(snap_http.post(f"{TPL}/from-sandbox", json={"template_id": "x1", "sandbox_id": "sb-1", "extra": 1}),
        400, "bad_request")
    err(snap_http.get(f"{TPL}/x1"), 404, "not_found")
