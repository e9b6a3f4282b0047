"""A raw-socket capture on ``lo`` inside a sandbox sees no traffic of the host or of other
sandboxes (issue 12 acceptance): once a bearer token was captured that way on the shared ``lo``.

The capture runs twice: as a session inside the sandbox (what a tenant can do), and as root
joined to the sandbox's namespace (the strongest capture that namespace allows). Each one must
see the sandbox's own loopback marker, so an empty capture cannot pass for isolation.
"""
from __future__ import annotations

import subprocess
import threading

from session_supervisor.infra.netns import NETNS_DIR
from tests.helpers import TOKEN, all_events, create_session, output_bytes, wait_for

from .netlab import PYTHON, sandbox_netns

HOST_MARKER = "host-secret-7d1e"
NEIGHBOUR_MARKER = "neighbour-secret-91ab"
OWN_MARKER = "own-marker-c0de"
WINDOW_S = 4

CAPTURE = f"""
import socket, time
try:
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    raw.bind(("lo", 0))
except OSError as exc:
    print("raw socket refused", exc.errno, flush=True)
    raise SystemExit(0)
raw.settimeout(0.2)
print("capturing", flush=True)
own = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
seen, packets, deadline = set(), 0, time.monotonic() + {WINDOW_S}
while time.monotonic() < deadline:
    own.sendto(b"{OWN_MARKER}", ("127.0.0.1", 9))
    try:
        frame = raw.recv(65535)
    except socket.timeout:
        continue
    packets += 1
    for marker in (b"{HOST_MARKER}", b"{NEIGHBOUR_MARKER}", b"{OWN_MARKER}", b"{TOKEN}"):
        if marker in frame:
            seen.add(marker.decode())
print("packets", packets, "seen", ",".join(sorted(seen)) or "-", flush=True)
"""

NEIGHBOUR_CHATTER = f"""
import socket, time
srv = socket.create_server(("127.0.0.1", 7002))
print("chatting", flush=True)
for _ in range(400):
    c = socket.create_connection(("127.0.0.1", 7002))
    peer, _ = srv.accept()
    c.sendall(b"Authorization: Bearer {NEIGHBOUR_MARKER}")
    peer.recv(100)
    c.close(); peer.close()
    time.sleep(0.05)
"""


def host_chatter(server, stop: threading.Event) -> None:
    """The host's own loopback traffic: API calls carrying a bearer token and a marker."""
    import httpx
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}",
                                                    "X-Marker": HOST_MARKER}, timeout=5) as client:
        while not stop.is_set():
            client.get("/api/v1/sandboxes")
            stop.wait(0.05)


def seen_markers(output: str) -> set[str]:
    line = next(line for line in output.splitlines() if line.startswith("packets"))
    return set(line.split("seen ", 1)[1].split(",")) - {"-"}


def test_a_loopback_capture_in_a_sandbox_sees_only_the_sandbox_itself(server, sandboxes, http):
    sandbox, neighbour = sandboxes(), sandboxes()
    chatter = create_session(http, neighbour, {"command": [PYTHON, "-c", NEIGHBOUR_CHATTER]})["id"]
    wait_for(lambda: b"chatting" in output_bytes(all_events(http, neighbour, chatter)), timeout=30)
    stop = threading.Event()
    talker = threading.Thread(target=host_chatter, args=(server, stop), daemon=True)
    talker.start()
    try:
        capture = create_session(http, sandbox, {"command": [PYTHON, "-c", CAPTURE]})["id"]
        wait_for(lambda: any(e["type"] == "attempt.exited" for e in all_events(http, sandbox, capture)),
                 timeout=WINDOW_S + 30)
        inside = output_bytes(all_events(http, sandbox, capture)).decode(errors="replace")
        netns = f"{NETNS_DIR}/{sandbox_netns(server.data_dir, sandbox)}"
        as_root = subprocess.run(["nsenter", f"--net={netns}", "--", PYTHON, "-c", CAPTURE],
                                 capture_output=True, text=True, timeout=WINDOW_S + 30).stdout
    finally:
        stop.set()
        talker.join(timeout=10)
    assert seen_markers(as_root) == {OWN_MARKER}, as_root
    if "raw socket refused" not in inside:  # an unprivileged sandbox cannot even open one
        assert seen_markers(inside) == {OWN_MARKER}, inside
