"""What a sandbox can reach under allow-all, block-all and CIDR rules (issue 12 acceptance).

Every probe runs inside a real sandbox (bwrap in its own network namespace) and connects for
real; the positive controls (the test host under allow-all, a neighbour's listener from the
neighbour itself) make sure a closed result is the policy and not a broken probe.
"""
from __future__ import annotations

import pytest

from tests.helpers import all_events, create_session, ok, output_bytes, wait_exited, wait_for, write_input

from .netlab import (
    PYTHON,
    HostListener,
    gateway_of,
    is_open,
    main_host_address,
    probe,
    sandbox_address,
    start_listener_session,
)

NEIGHBOUR_PORT = 7001


@pytest.fixture(scope="module")
def listener():
    sock = HostListener()
    yield sock
    sock.close()


@pytest.fixture
def closed_targets(server, listener, sandboxes, http):
    """Targets no sandbox may ever reach: the API, a host listener on 0.0.0.0 through every
    host address, and a listener in another sandbox."""
    neighbour = sandboxes()
    start_listener_session(http, neighbour, NEIGHBOUR_PORT)
    neighbour_target = f"{sandbox_address(server.data_dir, neighbour)}:{NEIGHBOUR_PORT}"
    assert is_open(probe(http, neighbour, f"127.0.0.1:{NEIGHBOUR_PORT}")[f"127.0.0.1:{NEIGHBOUR_PORT}"])

    def targets_for(sandbox_id: str) -> list[str]:
        out = [f"127.0.0.1:{server.port}", f"127.0.0.1:{listener.port}",
               f"{gateway_of(server.data_dir, sandbox_id)}:{listener.port}",
               f"{gateway_of(server.data_dir, sandbox_id)}:{server.port}", neighbour_target]
        main = main_host_address()
        if main:
            out += [f"{main}:{listener.port}", f"{main}:{server.port}"]
        return out
    return targets_for


def assert_all_closed(results: dict[str, str], targets: list[str]) -> None:
    opened = {t: results[t] for t in targets if is_open(results[t])}
    assert not opened, f"reachable from the sandbox: {opened}"


def test_allow_all_reaches_the_test_host_but_not_the_host_or_a_neighbour(sandboxes, http, test_host,
                                                                         closed_targets):
    sandbox = sandboxes()
    assert ok(http.get(f"/api/v1/sandboxes/{sandbox}/network"), 200) == {"mode": "allow-all"}
    targets = closed_targets(sandbox)
    results = probe(http, sandbox, test_host.target, *targets)
    assert is_open(results[test_host.target]) and "test host" in results[test_host.target], results
    assert_all_closed(results, targets)


def test_block_all_reaches_nothing_but_its_own_loopback(sandboxes, http, test_host, closed_targets):
    sandbox = sandboxes({"network": {"mode": "block-all"}})
    targets = closed_targets(sandbox)
    results = probe(http, sandbox, test_host.target, *targets)
    assert_all_closed(results, [test_host.target, *targets])


def test_block_all_with_the_test_hosts_cidr_opens_only_the_test_host(sandboxes, http, test_host, closed_targets):
    # Also names the sandbox range and the metadata range: those stay closed whatever the policy says.
    allowed = [f"{test_host.address}/32", "10.200.0.0/16", "169.254.0.0/16"]
    sandbox = sandboxes({"network": {"mode": "block-all", "egress": {"allowedCidrs": allowed}}})
    targets = closed_targets(sandbox)
    results = probe(http, sandbox, test_host.target, *targets)
    assert is_open(results[test_host.target]), results
    assert_all_closed(results, targets)


def test_allow_all_with_the_test_host_denied_cannot_reach_it(sandboxes, http, test_host):
    egress = {"deniedCidrs": [f"{test_host.address}/32"]}
    sandbox = sandboxes({"network": {"mode": "allow-all", "egress": egress}})
    assert not is_open(probe(http, sandbox, test_host.target)[test_host.target])


def test_ports_narrow_what_the_cidrs_allow_and_deny(sandboxes, http, test_host):
    wrong_port = {"mode": "block-all", "egress": {"allowedCidrs": [f"{test_host.address}/32"],
                                                  "allowedPorts": [{"port": 9, "protocol": "tcp"}]}}
    right_port = {"mode": "block-all", "egress": {"allowedPorts": [{"port": 8000, "endPort": 8090}]}}
    denied_port = {"mode": "allow-all", "egress": {"deniedPorts": [{"port": 8080, "protocol": "tcp"}]}}
    for policy, expected in ((wrong_port, False), (right_port, True), (denied_port, False)):
        sandbox = sandboxes({"network": policy})
        assert is_open(probe(http, sandbox, test_host.target)[test_host.target]) is expected, policy


KEEP_OPEN = """
import socket, sys
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
conn.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
print("first", b"test host" in conn.recv(200), flush=True)
sys.stdin.readline()  # the test changes the policy meanwhile
conn.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
print("second", b"test host" in conn.recv(200), flush=True)
"""


def test_a_policy_change_closes_new_connections_and_keeps_open_ones(sandboxes, http, test_host):
    sandbox = sandboxes()
    host, port = test_host.target.split(":")
    sid = create_session(http, sandbox, {"command": [PYTHON, "-c", KEEP_OPEN, host, port]})["id"]
    wait_for(lambda: b"first True" in output_bytes(all_events(http, sandbox, sid)), timeout=30)
    ok(http.put(f"/api/v1/sandboxes/{sandbox}/network", json={"mode": "block-all"}), 200)
    assert not is_open(probe(http, sandbox, test_host.target)[test_host.target])
    write_input(http, sandbox, sid, "go", "go\n")
    wait_exited(http, sandbox, sid, timeout=30)
    assert b"second True" in output_bytes(all_events(http, sandbox, sid))
