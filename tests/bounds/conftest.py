"""A real server on the hardened runtime, for the bounds tests: what one tenant can hold of the
server's memory, files, descriptors and kernel tables. Each test prints the figure it asserts."""
from __future__ import annotations

import os
import shutil

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
