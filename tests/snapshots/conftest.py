"""A hardened server with a disk per sandbox and the disk pool, for the rootfs snapshot tests."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import make_http
from tests.serverproc import ServerProcess
from tests.helpers import TOKEN

needs_disks = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("mkfs.xfs") is None,
                                 reason="needs root, bubblewrap and xfsprogs (loop-mounted disks and the disk pool)")


@pytest.fixture(scope="module")
def snap_server(tmp_path_factory):
    proc = ServerProcess(tmp_path_factory.mktemp("snapshots"), token=TOKEN, runtime="bwrap",
                         extra_args=["--disk-quota", "on"])
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def snap_http(snap_server):
    with make_http(snap_server.url) as client:
        yield client
