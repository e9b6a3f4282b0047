"""The escape probes of ``tests/security`` inside a sandbox running on an image's root filesystem:
the launch chain, seccomp, namespaces and mounts are as strict there as on the host's system.

Three probes change meaning and are checked apart: ``/usr`` and ``/etc`` are the sandbox's own
writable layer here, so writing them must succeed, and must reach neither the image nor the host;
and ``/sys`` exists as the image's own empty directory, so listing it must give nothing (no sysfs).
"""
from __future__ import annotations

import os

from tests.helpers import run_to_exit
from tests.security.probes import ESCAPES
from tests.security.test_escapes import EXPECTED_REFUSED, python, results

OWN_LAYER = {"write_usr", "write_etc"}
IMAGE_DIRS = {"sys_visible": "ESCAPED:[]"}  # the image's empty /sys: nothing of the host's sysfs


def test_every_escape_attempt_from_an_image_sandbox_is_refused(image_http, image_server):
    assert image_http.post("/api/v1/templates", json={"template_id": "probed", "spec": {"mainContainer": {
        "image": image_server.image_reference, "resources": {"memory": "1Gi"}}}}).status_code == 201
    sandbox = image_http.post("/api/v1/sandboxes", json={"template": "probed"}).json()["data"]["sandbox_id"]
    try:
        exited, out = run_to_exit(image_http, sandbox, python(ESCAPES), timeout=90)
        found = results(out)
        escaped = {name: how for name, how in found.items()
                   if how.startswith("ESCAPED") and name not in OWN_LAYER and IMAGE_DIRS.get(name) != how}
        assert not escaped, out.decode()
        assert set(EXPECTED_REFUSED) - OWN_LAYER <= set(found), out.decode()  # every probe really ran
        assert all(found[name].startswith("ESCAPED") for name in OWN_LAYER), out.decode()  # its own layer
        assert b"NoNewPrivs=1" in out and b"Seccomp=2" in out
        rootfs = image_server.data_dir / "images" / image_server.image_reference.split(":")[-1] / "rootfs"
        assert not (rootfs / "etc" / "sessiond-probe").exists()
        assert not os.path.exists("/etc/sessiond-probe") and not os.path.exists("/usr/local/share/sessiond-probe")
    finally:
        image_http.delete(f"/api/v1/sandboxes/{sandbox}")
        image_http.delete("/api/v1/templates/probed")
