"""Workspace ownership: the sandbox's host uid is its workspace's owner."""
from __future__ import annotations

import os

from session_supervisor.infra.confinement import UID_BASE, sandbox_uid


def test_an_old_root_owned_workspace_is_handed_over_but_hard_links_stay_untouched(tmp_path):
    outside = tmp_path / "host-file"
    outside.write_text("host")
    workspace = tmp_path / "sandboxes" / "sb-old" / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "main.py").write_text("print(1)")
    os.symlink("/etc/passwd", workspace / "link")
    os.link(outside, workspace / "hard")  # what an unisolated sandbox could have made

    uid = sandbox_uid("sb-old", str(workspace))

    assert uid >= UID_BASE
    for path in (workspace, workspace / "src", workspace / "src" / "main.py"):
        assert path.stat().st_uid == uid
    assert os.lstat(workspace / "link").st_uid == uid and os.stat("/etc/passwd").st_uid == 0
    assert outside.stat().st_uid == os.getuid()  # the hard-linked host file kept its owner
    assert sandbox_uid("sb-old", str(workspace)) == uid  # read back, not allotted again


def test_two_sandboxes_of_one_server_never_share_a_uid_even_when_their_ids_collide(tmp_path):
    uids = set()
    for n in range(20):
        workspace = tmp_path / "sandboxes" / f"sb-{n}" / "workspace"
        workspace.mkdir(parents=True)
        uids.add(sandbox_uid("same-hash", str(workspace)))  # every one starts from the same uid
    assert len(uids) == 20
