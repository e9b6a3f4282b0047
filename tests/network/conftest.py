"""A real server with a network namespace per sandbox (bwrap runtime, root) and a test host."""
from __future__ import annotations

import os
import shutil

import pytest

from session_supervisor.infra.netns import remove_everything
from tests.conftest import make_http, release_sandbox
from tests.helpers import TOKEN, claim_sandbox, ok
from tests.serverproc import ServerProcess

from .netlab import LabHost

if os.geteuid() != 0 or not all(shutil.which(t) for t in ("bwrap", "ip", "nft", "nsenter")):
    pytest.skip("network namespaces need root, bubblewrap, iproute2 and nftables", allow_module_level=True)

NETNS_ENV = {"SESSIOND_NETWORK": "netns"}  # fail loudly rather than fall back to the host's network


def netns_server(data_dir, *args: str) -> ServerProcess:
    return ServerProcess(data_dir, token=TOKEN, runtime="bwrap", extra_env=NETNS_ENV, extra_args=args)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = netns_server(tmp_path_factory.mktemp("netns-data"))
    proc.start()
    yield proc
    stop_and_clean(proc)


def stop_and_clean(proc: ServerProcess) -> None:
    """Stop, then remove whatever the server left (nothing, unless a test killed it)."""
    proc.stop()
    remove_everything(str(proc.data_dir))


@pytest.fixture(scope="module")
def test_host():
    host = LabHost().start()
    yield host
    host.stop()


@pytest.fixture
def sandboxes(server):
    """claim(config=None) -> sandbox id; every sandbox claimed is deleted afterwards."""
    created = []
    with make_http(server.url) as http:
        def claim(config=None):
            if config is None:
                sandbox_id = claim_sandbox(http)
            else:
                sandbox_id = ok(http.post("/api/v1/sandboxes", json={"template": "default", "config": config}),
                                201)["sandbox_id"]
            created.append(sandbox_id)
            return sandbox_id
        yield claim
        for sandbox_id in created:
            release_sandbox(http, sandbox_id)
