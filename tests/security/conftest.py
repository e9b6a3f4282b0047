"""A real server on the hardened bubblewrap runtime, shared by the escape probes."""
from __future__ import annotations

import pytest

from tests.conftest import make_http
from tests.helpers import TOKEN
from tests.serverproc import ServerProcess


@pytest.fixture(scope="module")
def hardened(tmp_path_factory):
    proc = ServerProcess(tmp_path_factory.mktemp("hardened-data"), token=TOKEN, runtime="bwrap",
                         extra_args=["--network", "netns"])  # the whole boundary: abstract sockets too
    proc.start()  # the start-up check runs here: a host without user namespaces fails loudly
    yield proc
    proc.stop()


@pytest.fixture
def http(hardened):
    with make_http(hardened.url) as client:
        yield client
