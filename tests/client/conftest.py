"""Fixtures for the client tests: ``api.client`` objects over the shared test server."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from session_supervisor.client import Client
from tests.helpers import TOKEN

STANDIN = str(Path(__file__).resolve().parent.parent / "harness_standin")


def standin(harness: str) -> list[str]:
    """The argv prefix that runs the stand-in in place of the real CLI binary."""
    return [sys.executable, STANDIN, harness]


@pytest.fixture
def client(server):
    with Client(server.url, TOKEN, timeout=30.0) as c:
        yield c


@pytest.fixture
def sandbox(client):
    sandbox_id = client.claim_sandbox("default").sandbox_id
    yield sandbox_id
    try:
        client.delete_sandbox(sandbox_id)
    except Exception:
        pass  # the test already deleted it, or the server is gone
