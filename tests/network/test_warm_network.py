"""A warm network made for one template's policy and taken by a claim with another gets the
claim's policy before anything of the sandbox runs: a block-all sandbox from a pool of allow-all
networks reaches nothing outside, and an allow-all one from a pool of block-all networks does."""
from __future__ import annotations

import pytest

from tests.conftest import make_http
from tests.helpers import ok
from tests.security.test_warm_pool import pool_metrics, wait_until_full

from .conftest import netns_server, stop_and_clean
from .netlab import is_open, probe


@pytest.fixture
def pooled(tmp_path):
    proc = netns_server(tmp_path / "data", "--warm-pool", "1")
    proc.start()
    yield proc
    stop_and_clean(proc)


def claim(http, policy: dict) -> str:
    return ok(http.post("/api/v1/sandboxes", json={"template": "default", "config": {"network": policy}}),
              201)["sandbox_id"]


def test_a_claim_whose_policy_differs_from_the_warm_networks_gets_its_own_policy(pooled, test_host):
    with make_http(pooled.url) as http:
        wait_until_full(http, 1)  # one network, made for the default template's allow-all
        blocked = claim(http, {"mode": "block-all"})
        got = pool_metrics(http)
        assert got[("sessiond_warm_pool_taken_total", "network")] == 1, got
        assert not is_open(probe(http, blocked, test_host.target)[test_host.target])
        # The block-all shape is now wanted too; once both are stocked, allow-all takes its own
        # and, with its own gone, the block-all one, which must then let it out.
        wait_until_full(http, 1)
        first = claim(http, {"mode": "allow-all"})
        second = claim(http, {"mode": "allow-all"})
        got = pool_metrics(http)
        assert got[("sessiond_warm_pool_taken_total", "network")] == 3, got
        for sandbox in (first, second):
            assert is_open(probe(http, sandbox, test_host.target)[test_host.target]), sandbox
