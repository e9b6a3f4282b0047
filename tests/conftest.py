"""Fixtures for black-box tests against a real ``sessiond`` subprocess.

The ``server`` fixture is lazy: only tests that ask for it (directly or via
``http``/``sandbox_id``/``sdk``) start a server.
"""
from __future__ import annotations

import httpx
import pytest

from tests.helpers import TOKEN, claim_sandbox, wait_for  # noqa: F401  (re-exported)
from tests.serverproc import ServerProcess


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    proc = ServerProcess(tmp_path_factory.mktemp("sessiond-data"), token=TOKEN, runtime="host")
    proc.start()
    yield proc
    proc.stop()


def make_http(base_url: str, token: str | None = TOKEN) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=base_url, headers=headers, timeout=30.0)


@pytest.fixture
def http(server):
    with make_http(server.url) as client:
        yield client


def release_sandbox(http: httpx.Client, sandbox_id: str) -> None:
    """Delete the sandbox; if that is not possible, at least delete its sessions."""
    try:
        if http.delete(f"/api/v1/sandboxes/{sandbox_id}").status_code == 202:
            return
        listed = http.get(f"/api/v1/sandboxes/{sandbox_id}/sessions")
        if listed.status_code == 200:
            for s in listed.json()["data"]["sessions"]:
                http.delete(f"/api/v1/sandboxes/{sandbox_id}/sessions/{s['id']}")
    except httpx.HTTPError:
        pass  # the server is gone; its children lost their stdin with it


@pytest.fixture
def sandbox_id(server):
    with make_http(server.url) as client:
        sb = claim_sandbox(client)
        yield sb
        release_sandbox(client, sb)


@pytest.fixture
def sdk(server):
    import sandbox0

    # A read timeout bounds every SDK call, including each read of an SSE stream.
    client = sandbox0.Client(token=TOKEN, base_url=server.url, timeout=15.0)
    yield client
    client.close()


# ---- a private PostgreSQL cluster (tests/pgcluster.py), started once, only when asked for ------
@pytest.fixture(scope="session")
def pg_cluster():
    from tests.pgcluster import PgCluster, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries not found (initdb on PATH or in /usr/lib/postgresql/*/bin); "
                    "`apt-get install postgresql` (.ci/run does)")
    cluster = PgCluster(bin_dir)
    cluster.start()
    # Each test's database is a copy of this empty template: CREATE DATABASE from a template
    # takes milliseconds, and no test sees another's tables or leases.
    cluster.sql("CREATE DATABASE sessiond_template IS_TEMPLATE true")
    yield cluster
    cluster.stop()


_pg_databases = iter(range(1, 1 << 30))


@pytest.fixture
def pg_url(pg_cluster):
    """A libpq URL to a database of this test's own, dropped afterwards (with its connections)."""
    name = f"test_{next(_pg_databases)}"
    pg_cluster.sql(f"CREATE DATABASE {name} TEMPLATE sessiond_template")
    yield pg_cluster.url(name)
    pg_cluster.sql(f"DROP DATABASE {name} WITH (FORCE)")


def pytest_sessionfinish(session):
    """Servers a test killed (-9) leave their sandboxes' disks and overlays mounted (a clean stop
    unmounts them): unmount whatever is still mounted under this run's temporary directories."""
    import subprocess

    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    try:
        base = str(factory.getbasetemp())
    except (OSError, ValueError):
        return
    try:
        from session_supervisor.infra.rootfs import mount_points
        leftovers = sorted((p for p in mount_points() if p.startswith(base + "/")), reverse=True)
    except OSError:
        return
    for point in leftovers:
        subprocess.run(["umount", "--lazy", point], check=False, capture_output=True)
