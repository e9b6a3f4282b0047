"""Volumes bound into real sandboxes under the hardened runtime (bubblewrap, a host uid of its own
per sandbox): what one sandbox writes at /workspace is the next one's, writable; an ROX volume is
read-only inside; a volume is bounded by its size; a mount point elsewhere is a bind of its own; a
setuid file a tenant leaves on a volume gives nobody root on the host."""
from __future__ import annotations

import os
import subprocess

from tests.helpers import err, ok

from .conftest import U, V, claim_with, needs_root, new_volume, run

pytestmark = needs_root

GIT = "git -c user.email=a@example.com -c user.name=agent"


def test_the_repository_a_sandbox_wrote_at_workspace_is_the_next_sandboxs_own(hhttp, hardened_server):
    volume = new_volume(hhttp)
    first = claim_with(hhttp, volume, template="coding-agent")["sandbox_id"]
    try:
        made = run(hhttp, first, f"cd /workspace && git init -q repo && cd repo && echo one > a.txt && "
                                 f"git add a.txt && {GIT} commit -qm first && git log --format=%s")
        assert made["exit_code"] == 0 and made["output_raw"].strip() == "first", made
    finally:
        ok(hhttp.delete(f"{U}/{first}"), 202)
    second = claim_with(hhttp, volume, template="coding-agent")["sandbox_id"]
    try:
        later = run(hhttp, second, f"cd /workspace/repo && echo two >> a.txt && git add a.txt && "
                                   f"{GIT} commit -qm second && git log --format=%s && stat -c %u a.txt && id -u")
        assert later["exit_code"] == 0, later
        lines = later["output_raw"].split()
        assert lines[:2] == ["second", "first"], later  # the first sandbox's commit, and a new one on it
        assert lines[2] == lines[3] == "0", later  # its own files: root inside its namespace
        # On the volume's disk the files belong to uid 0, whichever sandbox wrote them.
        point = hardened_server.data_dir / "volume-mounts" / volume
        assert os.stat(point / "repo" / "a.txt").st_uid == 0
    finally:
        ok(hhttp.delete(f"{U}/{second}"), 202)
        hhttp.delete(f"{V}/{volume}")


def test_a_link_a_sandbox_plants_in_its_volume_never_leads_the_file_api_out(hhttp):
    volume = new_volume(hhttp)
    sandbox = claim_with(hhttp, volume)["sandbox_id"]
    try:
        run(hhttp, sandbox, "ln -s /etc/shadow /workspace/shadow && ln -s ../../../../../etc /workspace/up")
        err(hhttp.get(f"{U}/{sandbox}/files", params={"path": "/workspace/shadow"}), 403, "permission_denied")
        err(hhttp.get(f"{U}/{sandbox}/files", params={"path": "/workspace/up/passwd"}), 403, "permission_denied")
        err(hhttp.get(f"{V}/{volume}/files", params={"path": "shadow"}), 404, "file_not_found")  # /etc of the volume
        ok(hhttp.post(f"{U}/{sandbox}/files", params={"path": "/workspace/from-api"}, content=b"x\n"), 200)
        seen = run(hhttp, sandbox, "echo more >> /workspace/from-api && cat /workspace/from-api")
        assert seen["exit_code"] == 0 and seen["output_raw"].split() == ["x", "more"], seen  # the sandbox's own
    finally:
        hhttp.delete(f"{U}/{sandbox}")
        hhttp.delete(f"{V}/{volume}")


def test_an_rox_volume_is_read_only_in_every_sandbox_that_binds_it(hhttp):
    volume = new_volume(hhttp, access_mode="ROX")
    ok(hhttp.post(f"{V}/{volume}/files", params={"path": "data.csv"}, content=b"a,b\n"), 200)
    sandboxes = [claim_with(hhttp, volume)["sandbox_id"] for _ in range(2)]
    try:
        for sandbox in sandboxes:
            read = run(hhttp, sandbox, "cat /workspace/data.csv && echo x > /workspace/new 2>&1; "
                                       "touch /workspace/data.csv 2>&1; echo rc=$?")
            assert read["output_raw"].startswith("a,b") and "Read-only file system" in read["output_raw"], read
            assert "rc=1" in read["output_raw"], read
    finally:
        for sandbox in sandboxes:
            hhttp.delete(f"{U}/{sandbox}")
        hhttp.delete(f"{V}/{volume}")


def test_a_volume_is_bounded_by_its_own_size_and_the_sandbox_keeps_working(hhttp):
    volume = new_volume(hhttp, size="32Mi")
    sandbox = claim_with(hhttp, volume)["sandbox_id"]
    try:
        filled = run(hhttp, sandbox, "dd if=/dev/zero of=/workspace/fill bs=1M count=64 2>&1; echo rc=$?")
        assert "No space left on device" in filled["output_raw"] and "rc=1" in filled["output_raw"], filled
        after = run(hhttp, sandbox, "rm /workspace/fill && echo ok > /workspace/after && echo tmp > /tmp/t && "
                                    "cat /workspace/after /tmp/t")
        assert after["output_raw"].split() == ["ok", "tmp"], after
        assert ok(hhttp.get(f"{V}/{volume}"), 200)["metered_storage_bytes"] < 32 * 2**20 * 2
    finally:
        hhttp.delete(f"{U}/{sandbox}")
        hhttp.delete(f"{V}/{volume}")


def test_a_volume_at_another_mount_point_is_bound_there_beside_the_sandboxs_own_workspace(hhttp):
    volume = new_volume(hhttp)
    ok(hhttp.post(f"{V}/{volume}/files", params={"path": "dataset", "mkdir": "true"}), 201)
    ok(hhttp.post(f"{V}/{volume}/files", params={"path": "dataset/rows.txt"}, content=b"row\n"), 200)
    sandbox = claim_with(hhttp, volume, mount_point="/data")["sandbox_id"]
    try:
        seen = run(hhttp, sandbox, "cat /data/dataset/rows.txt && echo mine > /workspace/own.txt && "
                                   "echo out > /data/out.txt && ls /workspace")
        assert seen["exit_code"] == 0 and seen["output_raw"].split() == ["row", "own.txt"], seen
        assert hhttp.get(f"{V}/{volume}/files", params={"path": "out.txt"}).content == b"out\n"
        err(hhttp.get(f"{V}/{volume}/files", params={"path": "own.txt"}), 404)  # the sandbox's, not the volume's
    finally:
        hhttp.delete(f"{U}/{sandbox}")
        hhttp.delete(f"{V}/{volume}")


def test_a_setuid_file_a_tenant_leaves_on_a_volume_gives_nobody_root_on_the_host(hhttp, hardened_server):
    volume = new_volume(hhttp)
    sandbox = claim_with(hhttp, volume)["sandbox_id"]
    try:
        made = run(hhttp, sandbox, "cp /usr/bin/id /workspace/rootme && chmod 4755 /workspace/rootme && "
                                   "ls -l /workspace/rootme")
        assert made["exit_code"] == 0 and made["output_raw"].startswith("-rwsr-xr-x"), made
        planted = hardened_server.data_dir / "volume-mounts" / volume / "rootme"
        info = os.stat(planted)
        assert info.st_uid == 0 and info.st_mode & 0o4000  # on its disk: setuid root, as the tenant made it
        # The attack: an unprivileged user on the host runs it (handed an open descriptor, so the
        # 0700 directories above do not stop it first). The disk is mounted nosuid: no root for them.
        fd = os.open(planted, os.O_RDONLY)
        try:
            ran = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                  f"/proc/self/fd/{fd}", "-u"], capture_output=True, text=True, timeout=30,
                                 pass_fds=(fd,))
        finally:
            os.close(fd)
        assert ran.returncode == 0 and ran.stdout.strip() == "65534", ran
    finally:
        hhttp.delete(f"{U}/{sandbox}")
        hhttp.delete(f"{V}/{volume}")
