"""The network tests' own lab: a test host (a namespace on a veth pair with a small HTTP
server on a private address assigned here), listeners, and probes run inside sandboxes.

Tests only ever target loopback and addresses of namespaces they created themselves.
"""
from __future__ import annotations

import os
import random
import socket
import subprocess
import time

from session_supervisor.infra.netns import instance_tag
from tests.helpers import all_events, create_session, output_bytes, run_to_exit, wait_for

PYTHON = "/usr/bin/python3"  # the system python: /usr is visible inside a sandbox
TEST_HOST_PORT = 8080
TEST_HOST_BODY = b"hello from the test host"

_HTTP_SERVER = f"""
import socket, threading
srv = socket.create_server((ADDR, {TEST_HOST_PORT}))
print("listening", flush=True)

def serve(conn):
    # Every request on a connection gets an answer, so a test can keep one open.
    with conn:
        conn.settimeout(30)
        try:
            while conn.recv(4096):
                conn.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Length: {len(TEST_HOST_BODY)}\\r\\n\\r\\n{TEST_HOST_BODY.decode()}")
        except OSError:
            pass

while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""

# Prints "<target> open <first bytes>" or "<target> closed <errno>" for each host:port.
PROBE = """
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3) as s:
            s.settimeout(3)
            s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
            try:
                data = s.recv(200)
            except OSError:
                data = b""
            print(target, "open", data[-40:], flush=True)
    except OSError as exc:
        print(target, "closed", exc.errno, flush=True)
"""


def sh(*argv: str, check: bool = True) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


class LabHost:
    """A namespace ``s12th-*`` behind a veth pair, serving HTTP on 10.201.<n>.2."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 10000}{random.randrange(100, 1000)}"
        self.ns = f"s12th-{tag}"
        self.iface = f"s12h{tag}"[:15]
        self.subnet = random.randrange(0, 256)
        self.host_side = f"10.201.{self.subnet}.1"
        self.address = f"10.201.{self.subnet}.2"
        self.proc: subprocess.Popen | None = None

    @property
    def target(self) -> str:
        return f"{self.address}:{TEST_HOST_PORT}"

    def start(self) -> "LabHost":
        if f"10.201.{self.subnet}." in sh("ip", "-4", "-o", "addr"):
            raise RuntimeError("test host subnet already in use; rerun")
        sh("ip", "netns", "add", self.ns)
        try:
            sh("ip", "link", "add", self.iface, "type", "veth", "peer", "name", "eth0", "netns", self.ns)
            sh("ip", "addr", "add", f"{self.host_side}/30", "dev", self.iface)
            sh("ip", "link", "set", self.iface, "up")
            sh("ip", "-n", self.ns, "addr", "add", f"{self.address}/30", "dev", "eth0")
            sh("ip", "-n", self.ns, "link", "set", "eth0", "up")
            sh("ip", "-n", self.ns, "link", "set", "lo", "up")
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", self.ns, PYTHON, "-c", f"ADDR = {self.address!r}\n{_HTTP_SERVER}"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            line = self.proc.stdout.readline()
            if b"listening" not in line:
                raise RuntimeError(f"test host server did not start: {line!r}")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        sh("ip", "link", "del", self.iface, check=False)
        sh("ip", "netns", "del", self.ns, check=False)


class HostListener:
    """A TCP listener on the host's 0.0.0.0 that answers one line to whoever connects."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("0.0.0.0", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(0.2)

    def close(self) -> None:
        self.sock.close()


def main_host_address() -> str | None:
    """The host's first global IPv4 address that is not one of the labs' veths."""
    for line in sh("ip", "-4", "-o", "addr", "show", "scope", "global").splitlines():
        address = line.split()[3].split("/")[0]
        if not address.startswith(("10.200.", "10.201.")):
            return address
    return None


def sandbox_netns(data_dir, sandbox_id: str) -> str:
    return f"sessiond-{instance_tag(str(data_dir))}-{sandbox_id}"


def sandbox_address(data_dir, sandbox_id: str) -> str:
    out = sh("ip", "-n", sandbox_netns(data_dir, sandbox_id), "-4", "-o", "addr", "show", "dev", "eth0")
    return out.split()[3].split("/")[0]


def gateway_of(data_dir, sandbox_id: str) -> str:
    """The host end of the sandbox's veth pair (its default route)."""
    out = sh("ip", "-n", sandbox_netns(data_dir, sandbox_id), "route", "show", "default")
    return out.split()[2]


def probe(http, sandbox_id: str, *targets: str) -> dict[str, str]:
    """Connect to each target from a session inside the sandbox: {target: "open …"|"closed …"}."""
    exited, out = run_to_exit(http, sandbox_id, [PYTHON, "-c", PROBE, *targets], timeout=60)
    assert exited.get("exit_code") == 0, (exited, out)
    results = {}
    for line in out.decode(errors="replace").splitlines():
        target, _, rest = line.partition(" ")
        results[target] = rest
    assert set(results) == set(targets), out
    return results


def is_open(result: str) -> bool:
    return result.startswith("open")


def start_listener_session(http, sandbox_id: str, port: int) -> str:
    """A listener on 0.0.0.0:<port> inside the sandbox; returns once it listens."""
    code = (f"import socket\ns = socket.create_server(('0.0.0.0', {port}))\nprint('listening', flush=True)\n"
            "while True:\n    c, _ = s.accept()\n    c.sendall(b'neighbour secret\\n')\n    c.close()\n")
    sid = create_session(http, sandbox_id, {"command": [PYTHON, "-c", code]})["id"]
    wait_for(lambda: b"listening" in output_bytes(all_events(http, sandbox_id, sid)), timeout=30)
    return sid


def wait_gone(path: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
