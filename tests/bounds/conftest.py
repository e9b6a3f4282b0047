"""A real server on the hardened runtime, for the bounds tests: what one tenant can hold of the
server's memory, files, descriptors and kernel tables. Each test prints the figure it asserts."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import make_http
from tests.helpers import TOKEN
from tests.serverproc import ServerProcess

HARDENED = os.geteuid() == 0 and shutil.which("bwrap") is not None


@pytest.fixture(scope="module")
def hardened(tmp_path_factory):
    if not HARDENED:
        pytest.skip("the hardened runtime needs root and bubblewrap")
    proc = ServerProcess(tmp_path_factory.mktemp("bounds-data"), token=TOKEN, runtime="bwrap")
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def http(hardened):
    with make_http(hardened.url) as client:
        client.timeout = 120.0
        yield client


@contextlib.contextmanager
def mounted(fstype_args: list[str], source: str, where: Path):
    """A filesystem mounted for one test (``mount`` as root), unmounted after it, lazily if busy."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", *fstype_args, source, str(where)], check=True, capture_output=True, timeout=30)
    try:
        yield where
    finally:
        done = subprocess.run(["umount", str(where)], capture_output=True, timeout=60)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=60)


@pytest.fixture
def tmpfs(tmp_path):
    """A fresh tmpfs (2 GiB at most) under the test's directory: fast for trees of 300,000 entries."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    with mounted(["-t", "tmpfs", "-o", "size=2g,mode=0755"], "tmpfs", tmp_path / "tmpfs") as where:
        yield where
