"""One sandbox cannot fill the host's conntrack table (shared by every sandbox and the host):
20,000 UDP flows from inside a real sandbox leave at most its cap of entries, and another
sandbox's new connections keep working. Each test prints the entries counted in
/proc/net/nf_conntrack for the flooding sandbox's address."""
from __future__ import annotations

import os

import pytest

from tests.conftest import make_http
from tests.helpers import TOKEN, claim_sandbox, run_to_exit
from tests.serverproc import ServerProcess

from .conftest import NETNS_ENV, stop_and_clean
from .netlab import PYTHON, is_open, probe, sandbox_address

CONNTRACK = "/proc/net/nf_conntrack"
FLOWS = 20_000
FLOOD = r'''
import socket, sys, time
host, count = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sent, errors, began = 0, 0, time.monotonic()
for port in range(1, count + 1):
    try:
        s.sendto(b"x", (host, port))
        sent += 1
    except OSError:
        errors += 1
print("sent", sent, "errors", errors, "seconds", round(time.monotonic() - began, 3), flush=True)
'''

if not os.path.exists(CONNTRACK):
    pytest.skip("no /proc/net/nf_conntrack on this host", allow_module_level=True)


def entries_from(address: str) -> int:
    needle = f"src={address} "
    with open(CONNTRACK) as table:
        return sum(1 for line in table if needle in line)


def flood_and_count(server, http, test_host) -> tuple[int, int, str]:
    """(the sandbox's entries after the flood, those it had before, another sandbox's probe).
    What it had before (its own start's flows, not forwarded) is outside the forward cap."""
    flooder, other = claim_sandbox(http), claim_sandbox(http)
    address = sandbox_address(server.data_dir, flooder)
    before = entries_from(address)
    exited, out = run_to_exit(http, flooder, [PYTHON, "-c", FLOOD, test_host.address, str(FLOWS)], timeout=120)
    assert exited["exit_code"] == 0 and b"sent" in out, out
    count = entries_from(address)
    other_result = probe(http, other, test_host.target)[test_host.target]
    print(f"\n{FLOWS} UDP flows from one sandbox ({out.decode().strip()}): {count} conntrack entries for it "
          f"({before} before); another sandbox's new connection: {other_result.split()[0]}")
    return count, before, other_result


def test_20000_udp_flows_leave_at_most_the_default_cap_and_others_keep_connecting(server, http, test_host):
    count, before, other = flood_and_count(server, http, test_host)
    assert count - before <= 4096
    assert is_open(other)


def test_the_cap_is_the_operators_and_holds_on_its_own(tmp_path, test_host):
    """No rate limit, a cap of 300: the count itself is what stops the flood, at the cap."""
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="bwrap", extra_env=NETNS_ENV,
                           extra_args=["--sandbox-conntrack-max", "300", "--sandbox-new-flows", "0"])
    server.start()
    try:
        with make_http(server.url) as http:
            count, before, other = flood_and_count(server, http, test_host)
    finally:
        stop_and_clean(server)
    assert 250 <= count - before <= 300
    assert is_open(other)
