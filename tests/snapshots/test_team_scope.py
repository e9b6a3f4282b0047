"""Another team's rootfs snapshot does not exist for a caller: get, delete, a claim from it, a restore
from it and a template from the other team's sandbox are all 404 in the envelope; a viewer of the
owning team reads it but cannot delete it (403)."""
from __future__ import annotations

from tests.api.test_team_isolation import http_for
from tests.helpers import TOKEN, err, ok
from tests.snapshots.conftest import needs_disks

pytestmark = needs_disks
SB, ONE = "/api/v1/sandboxes", "/api/v1/sandbox-rootfs-snapshots"


def test_another_teams_snapshot_is_404_on_every_call(snap_server):
    keys = {}
    with http_for(snap_server.url, TOKEN) as admin:
        for name in ("alpha", "beta"):
            team = ok(admin.post("/teams", json={"name": f"snap-{name}", "home_region_id": "local"}), 201)["id"]
            with http_for(snap_server.url, TOKEN, team) as as_team:
                for role in ("developer", "viewer", "admin"):
                    keys[name, role] = ok(as_team.post("/api-keys", json={
                        "name": f"{name}-{role}", "roles": [role]}), 201)["key"]
    with http_for(snap_server.url, keys["alpha", "developer"]) as alpha, \
            http_for(snap_server.url, keys["beta", "developer"]) as beta, \
            http_for(snap_server.url, keys["alpha", "viewer"]) as viewer:
        source = ok(alpha.post(SB, json={"template": "default"}), 201)["sandbox_id"]
        snap = ok(alpha.post(f"{SB}/{source}/snapshots"), 201)["id"]
        own = ok(beta.post(SB, json={"template": "default"}), 201)["sandbox_id"]
        ok(beta.post(f"{SB}/{own}/pause", json={}), 200)
        err(beta.get(f"{ONE}/{snap}"), 404, "not_found")
        err(beta.delete(f"{ONE}/{snap}"), 404, "not_found")
        err(beta.post(SB, json={"template": "default", "snapshot_id": snap}), 404, "not_found")
        err(beta.post(f"{SB}/{own}/rootfs/restore", json={"snapshot_id": snap}), 404, "not_found")
        err(beta.post(f"{SB}/{source}/snapshots"), 404, "not_found")
        err(beta.post(f"{SB}/{source}/fork", json={}), 404, "not_found")
        with http_for(snap_server.url, keys["beta", "admin"]) as beta_admin:  # templates need template:create
            err(beta_admin.post("/api/v1/templates/from-sandbox", json={"template_id": "stolen", "sandbox_id": source}),
                404, "not_found")
        assert ok(viewer.get(f"{ONE}/{snap}"), 200)["id"] == snap
        err(viewer.delete(f"{ONE}/{snap}"), 403)
        ok(alpha.delete(f"{ONE}/{snap}"), 200)
        ok(alpha.delete(f"{SB}/{source}"), 202)
        ok(beta.delete(f"{SB}/{own}"), 202)
