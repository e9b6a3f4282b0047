"""A running server's data dir is a bind of itself (so a sandbox's launch can drop every other
sandbox's mounts at once); link(2) will not cross that mount even on one filesystem, so what is
hard-linked into the data dir from outside (a template build's cache) is linked where the bind is
taken away: the same files, no copy."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from session_supervisor.infra.mount_scope import outside_own_bind, release_data_dir, scope_data_dir
from session_supervisor.infra.rootfs import mount_points

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="binding the data dir needs root and unshare")


def test_a_tree_from_outside_is_hard_linked_into_the_bound_data_dir_not_copied(tmp_path):
    cache, data = tmp_path / "cache", tmp_path / "data"
    (cache / "rootfs" / "bin").mkdir(parents=True)
    (cache / "rootfs" / "bin" / "tool").write_bytes(b"#!/bin/sh\n")
    data.mkdir()
    assert outside_own_bind(data, ["true"]) is None  # not bound yet: nothing to take away
    scope_data_dir(data)
    try:
        target = data / "images" / "rootfs"
        target.parent.mkdir()
        argv = ["cp", "-al", str(cache / "rootfs"), str(target)]
        plain = subprocess.run(argv, capture_output=True, text=True)
        assert plain.returncode != 0 and "link" in plain.stderr.lower()  # the bind refuses it
        shutil.rmtree(target, ignore_errors=True)
        wrapped = outside_own_bind(data, argv)
        assert wrapped is not None
        done = subprocess.run(wrapped, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        # Seen through the server's bind: the cache's own file, not a copy.
        assert os.stat(target / "bin" / "tool").st_ino == os.stat(cache / "rootfs" / "bin" / "tool").st_ino
        assert str(data) in mount_points()  # the bind is taken away only where the links were made
    finally:
        release_data_dir(data)
    assert str(data) not in mount_points()
