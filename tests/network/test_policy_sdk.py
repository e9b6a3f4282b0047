"""Policy changes through the official SDK: applied live, persisted, and cleaned up with the
sandbox (issue 12 acceptance). These tests restart their own server."""
from __future__ import annotations

import os
import subprocess

import pytest
import sandbox0
from sandbox0.apispec.models.network_egress_policy import NetworkEgressPolicy
from sandbox0.apispec.models.sandbox_network_policy import SandboxNetworkPolicy
from sandbox0.apispec.models.sandbox_network_policy_mode import SandboxNetworkPolicyMode

from session_supervisor.infra.netns import NETNS_DIR, instance_tag
from tests.conftest import make_http
from tests.helpers import TOKEN, err, ok, wait_for

from .conftest import netns_server, stop_and_clean
from .netlab import is_open, probe, sandbox_netns, sh, wait_gone

BLOCK_ALL = SandboxNetworkPolicy(mode=SandboxNetworkPolicyMode.BLOCK_ALL)
ALLOW_ALL = SandboxNetworkPolicy(mode=SandboxNetworkPolicyMode.ALLOW_ALL)


@pytest.fixture
def own_server(tmp_path):
    # These count every namespace and chain the server has: without a warm pool, whose units are
    # no sandbox's yet (tests/security/test_warm_pool.py, tests/network/test_warm_network.py).
    proc = netns_server(tmp_path / "data", "--warm-pool", "0")
    proc.start()
    yield proc
    stop_and_clean(proc)


def table_of(server) -> str:
    return f"sessiond_{instance_tag(str(server.data_dir))}"


def nft_table(server) -> str:
    return sh("nft", "list", "table", "inet", table_of(server), check=False)


def our_netns(server) -> list[str]:
    prefix = f"sessiond-{instance_tag(str(server.data_dir))}-"
    return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix)) if os.path.isdir(NETNS_DIR) else []


def reaches(server, sandbox_id: str, target: str) -> bool:
    with make_http(server.url) as http:
        return is_open(probe(http, sandbox_id, target)[target])


def test_update_network_policy_closes_new_connections_and_survives_pause_resume_and_restarts(own_server,
                                                                                                test_host):
    client = sandbox0.Client(token=TOKEN, base_url=own_server.url, timeout=30.0)
    try:
        sb = client.sandboxes.claim("default")
        assert sb.get_network_policy().mode == SandboxNetworkPolicyMode.ALLOW_ALL
        assert reaches(own_server, sb.id, test_host.target)

        changed = sb.update_network_policy(BLOCK_ALL)
        assert changed.mode == SandboxNetworkPolicyMode.BLOCK_ALL
        assert sb.get_network_policy().mode == SandboxNetworkPolicyMode.BLOCK_ALL
        assert not reaches(own_server, sb.id, test_host.target)  # the same running sandbox

        client.sandboxes.pause_and_wait(sb.id, timeout_sec=30)
        # A paused sandbox has no runtime, so no network (removed right after the pause's answer).
        wait_for(lambda: our_netns(own_server) == [], timeout=10, describe=lambda: our_netns(own_server))
        client.sandboxes.resume_and_wait(sb.id, timeout_sec=30)
        assert sb.get_network_policy().mode == SandboxNetworkPolicyMode.BLOCK_ALL
        assert not reaches(own_server, sb.id, test_host.target)

        own_server.stop()
        own_server.start()
        assert sb.get_network_policy().mode == SandboxNetworkPolicyMode.BLOCK_ALL
        assert not reaches(own_server, sb.id, test_host.target)

        own_server.kill()  # a crash: the next start removes what this one left behind
        own_server.start()
        assert sb.get_network_policy().mode == SandboxNetworkPolicyMode.BLOCK_ALL
        assert not reaches(own_server, sb.id, test_host.target)
        assert our_netns(own_server) == [sandbox_netns(own_server.data_dir, sb.id)]

        opened = SandboxNetworkPolicy(mode=SandboxNetworkPolicyMode.BLOCK_ALL,
                                      egress=NetworkEgressPolicy(allowed_cidrs=[f"{test_host.address}/32"]))
        assert sb.update_network_policy(opened).egress.allowed_cidrs == [f"{test_host.address}/32"]
        assert reaches(own_server, sb.id, test_host.target)
        with make_http(own_server.url) as http:  # also returned in the sandbox's config
            config = ok(http.get(f"/api/v1/sandboxes/{sb.id}"), 200)["config"]
        assert config["network"] == {"mode": "block-all", "egress": {"allowedCidrs": [f"{test_host.address}/32"]}}
    finally:
        client.close()


def test_deleting_a_sandbox_and_stopping_the_server_remove_every_namespace_and_rule(own_server):
    with make_http(own_server.url) as http:
        kept = ok(http.post("/api/v1/sandboxes", json={"template": "default"}), 201)["sandbox_id"]
        gone = ok(http.post("/api/v1/sandboxes", json={"template": "coding-agent"}), 201)["sandbox_id"]
        assert ok(http.get(f"/api/v1/sandboxes/{gone}/network"), 200) == {"mode": "allow-all"}
        assert len(our_netns(own_server)) == 2 and nft_table(own_server).count("chain sb_") == 2
        assert ok(http.delete(f"/api/v1/sandboxes/{gone}"), 202)
        wait_gone(os.path.join(NETNS_DIR, sandbox_netns(own_server.data_dir, gone)))
        assert our_netns(own_server) == [sandbox_netns(own_server.data_dir, kept)]
        assert nft_table(own_server).count("chain sb_") == 1
    own_server.stop()
    assert our_netns(own_server) == [] and nft_table(own_server) == ""


def test_malformed_or_unenforceable_policies_are_refused_with_a_clear_message(server, sandboxes, http):
    sandbox = sandboxes()
    url = f"/api/v1/sandboxes/{sandbox}/network"
    cases = [
        ({"mode": "open"}, "mode"),
        ({"mode": "block-all", "egress": {"allowedCidrs": ["10.0.0.300/8"]}}, "not a CIDR"),
        ({"mode": "block-all", "egress": {"allowedPorts": [{"port": 70000}]}}, "1-65535"),
        ({"mode": "allow-all", "egress": {"deniedPorts": [{"port": 80, "protocol": "icmp"}]}}, "protocol"),
        ({"mode": "block-all", "egress": {"allowedDomains": ["example.com"]}}, "not enforced"),
        ({"mode": "allow-all", "egress": {"trafficRules": [{"action": "deny", "cidrs": ["1.1.1.1/32"]}]}},
         "not enforced"),
        ({"mode": "allow-all", "credentialBindings": [{"ref": "x"}]}, "not supported"),
    ]
    for body, words in cases:
        assert words in err(http.put(url, json=body), 400, "bad_request")["message"], body
    assert ok(http.get(url), 200) == {"mode": "allow-all"}, "a refused policy changes nothing"
    err(http.post("/api/v1/sandboxes", json={"template": "default", "config": {"network": {"mode": 1}}}),
        400, "bad_request")
    err(http.get("/api/v1/sandboxes/sb-missing/network"), 404, "not_found")
    # Rules the selected mode ignores are stored as given (denied* under block-all).
    stored = {"mode": "block-all", "egress": {"deniedDomains": ["example.com"], "deniedCidrs": ["10.1.0.0/16"]}}
    assert ok(http.put(url, json=stored), 200) == stored
    # config.network through the sandbox update is the same policy.
    ok(http.put(f"/api/v1/sandboxes/{sandbox}", json={"config": {"network": {"mode": "allow-all"}}}), 200)
    assert ok(http.get(url), 200) == {"mode": "allow-all"}
