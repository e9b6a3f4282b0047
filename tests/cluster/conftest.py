"""Two ``sessiond`` nodes on this machine sharing one PostgreSQL database (a private cluster
on a unix socket, ``tests/pgcluster.py``) and one checkpoint directory: what "more than one
machine" looks like to its clients. Both nodes use the same token, as a deployment must."""
from __future__ import annotations

import shutil
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest

from tests.serverproc import ServerProcess, free_port

TOKEN = "cluster-test-token"
LEASE_SECONDS = 3  # short, so that a takeover after a kill -9 is seconds away


@dataclass
class Node:
    name: str
    server: ServerProcess

    @property
    def url(self) -> str:
        return self.server.url

    def client(self, timeout: float = 30.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=timeout)


def node(name: str, tmp_path, pg_url: str, checkpoints, lease_seconds: float = LEASE_SECONDS,
         runtime: str = "host") -> Node:
    port = free_port()
    server = ServerProcess(tmp_path / name, token=TOKEN, port=port, runtime=runtime, extra_args=[
        "--database-url", pg_url, "--checkpoint-dir", str(checkpoints), "--node-id", name,
        "--advertise-url", f"http://127.0.0.1:{port}", "--lease-seconds", str(lease_seconds)])
    return Node(name, server)


@pytest.fixture
def checkpoints(tmp_path):
    path = tmp_path / "shared-checkpoints"
    path.mkdir()
    return path


@contextmanager
def running(*nodes: Node):
    """Start the nodes in order, stop them in reverse, whatever happens in between."""
    started = []
    try:
        for each in nodes:
            each.server.start()
            started.append(each)
        yield nodes
    finally:
        for each in reversed(started):
            each.server.stop()


@pytest.fixture
def two_nodes(tmp_path, pg_url, checkpoints):
    with running(node("node-a", tmp_path, pg_url, checkpoints), node("node-b", tmp_path, pg_url, checkpoints)) as pair:
        yield pair


@pytest.fixture
def two_hardened_nodes(tmp_path, pg_url, checkpoints):
    """Two nodes on the bubblewrap runtime (contexts and the sandbox's /tmp need it)."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    with running(node("node-a", tmp_path, pg_url, checkpoints, runtime="bwrap"),
                 node("node-b", tmp_path, pg_url, checkpoints, runtime="bwrap")) as pair:
        yield pair
