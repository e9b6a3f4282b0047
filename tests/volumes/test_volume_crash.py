"""kill -9 of the server while volumes are being deleted, created, forked or snapshotted: after the
restart each volume (and snapshot) is either whole (listed, its files readable) or gone (not listed,
nothing of it on disk, nothing of it counted against the team's quota); an answered delete is never
undone and an answered create never lost."""
from __future__ import annotations

import os
import random
import select
import socket
import time

from tests.conftest import make_http
from tests.helpers import TOKEN, err, ok
from tests.serverproc import ServerProcess

from .conftest import V, needs_root, new_volume

pytestmark = needs_root

ROUNDS, PER_ROUND = 10, 3
QUOTA = 256 * 2**20


def send_delete(port: int, volume_id: str) -> socket.socket:
    """The request written whole to the server, its answer left to be read after the kill."""
    return send(port, "DELETE", f"{V}/{volume_id}", b"")


def answered(sock: socket.socket) -> bool:
    """Whether the server answered 200 before it died (what it wrote is still in our buffer)."""
    return answer(sock).startswith(b"HTTP/1.1 200")


def on_disk(volumes_dir) -> set[str]:
    return {p.name for p in volumes_dir.iterdir() if p.name != ".lock"}


def mounted_under(path) -> list[str]:
    with open("/proc/self/mountinfo") as table:
        return [line.split()[4] for line in table if line.split()[4].startswith(str(path))]


def test_kill_9_during_volume_deletes_leaves_each_volume_whole_or_gone(tmp_path):
    rng = random.Random(27)
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="host",
                           extra_args=["--volume-size", "32Mi", "--volume-quota", f"{QUOTA}"])
    volumes_dir = server.data_dir / "volumes"
    states = {"acknowledged": 0, "caught half way": 0, "done, unanswered": 0, "not begun": 0}
    server.start()
    try:
        for attempt in range(ROUNDS):
            with make_http(server.url) as http:
                made = {}
                for index in range(PER_ROUND):
                    volume = new_volume(http)
                    content = os.urandom(4 * 2**20)  # blocks to free, in the disk and in its snapshot
                    ok(http.post(f"{V}/{volume}/files", params={"path": "data.bin"}, content=content), 200)
                    ok(http.post(f"{V}/{volume}/snapshots", json={"name": f"s{index}"}), 201)
                    made[volume] = content
            sockets = {volume: send_delete(server.port, volume) for volume in made}
            time.sleep(rng.uniform(0, 0.06))
            server.kill()
            acked = {volume for volume, sock in sockets.items() if answered(sock)}
            left = on_disk(volumes_dir)
            aside = {v for v in made if any(name.startswith(f".removing-{v}") for name in left)}
            server.start()
            with make_http(server.url) as http:
                listed = {v["id"] for v in ok(http.get(V), 200)}
                for volume, content in made.items():
                    whole = volume in listed
                    if volume in acked:
                        states["acknowledged"] += 1
                        assert not whole, (attempt, volume, "an answered delete was undone")
                    elif volume in aside:
                        states["caught half way"] += 1
                    elif volume in left:
                        states["not begun"] += 1
                    else:
                        states["done, unanswered"] += 1
                    if whole:
                        assert volume not in aside, (attempt, volume, "listed and moved aside")
                        assert http.get(f"{V}/{volume}/files", params={"path": "data.bin"}).content == content
                        snapshot = ok(http.get(f"{V}/{volume}/snapshots"), 200)[0]["id"]
                        ok(http.post(f"{V}/{volume}/snapshots/{snapshot}/restore"), 200)
                        assert ok(http.delete(f"{V}/{volume}"), 200) == {"deleted": True}
                    else:
                        err(http.get(f"{V}/{volume}"), 404, "not_found")
                # Whatever the kill left aside or half made is gone, and so are its mounts.
                assert on_disk(volumes_dir) == set(), (attempt, sorted(on_disk(volumes_dir)))
                assert mounted_under(server.data_dir / "volume-mounts") == [], attempt
        with make_http(server.url) as http:
            # Nothing a killed delete left behind counts: the whole quota is the team's again.
            ok(http.delete(f"{V}/{new_volume(http, size=f'{QUOTA}')}"), 200)
        print(f"\n{ROUNDS} kill -9 rounds of {PER_ROUND} volume deletes each: {states}")
        assert states["acknowledged"] + states["done, unanswered"] + states["caught half way"] > 0
        assert states["not begun"] + states["caught half way"] + states["done, unanswered"] > 0
    finally:
        server.stop()


def send(port: int, method: str, path: str, body: bytes = b"{}") -> socket.socket:
    """The request written whole (its answer is read later, perhaps after a kill)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                 .encode() + body)
    return sock


def answer(sock: socket.socket) -> bytes:
    """What the server wrote before it closed or died (still in our receive buffer)."""
    received = b""
    try:
        while select.select([sock], [], [], 2)[0]:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    except OSError:
        pass
    finally:
        sock.close()
    return received


def test_kill_9_during_volume_creates_forks_and_snapshots_leaves_nothing_half_made(tmp_path):
    rng = random.Random(72)
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="host",
                           extra_args=["--volume-size", "32Mi", "--volume-quota", f"{QUOTA}"])
    volumes_dir = server.data_dir / "volumes"
    content = os.urandom(4 * 2**20)
    answered_201 = 0
    server.start()
    try:
        with make_http(server.url) as http:
            base = new_volume(http)
            ok(http.post(f"{V}/{base}/files", params={"path": "data.bin"}, content=content), 200)
        for attempt in range(ROUNDS):
            calls = [send(server.port, "POST", V, b'{"access_mode":"RWO"}'),
                     send(server.port, "POST", f"{V}/{base}/fork"),
                     send(server.port, "POST", f"{V}/{base}/snapshots", b'{"name":"crash"}')]
            time.sleep(rng.uniform(0, 0.15))
            server.kill()
            made = []
            for sock in calls:
                reply = answer(sock)
                if reply.startswith(b"HTTP/1.1 201"):
                    answered_201 += 1
                    made.append(reply.split(b'"id":"', 1)[1].split(b'"', 1)[0].decode())
            server.start()
            with make_http(server.url) as http:
                listed = {v["id"]: v for v in ok(http.get(V), 200)}
                snapshots = {s["id"] for s in ok(http.get(f"{V}/{base}/snapshots"), 200)}
                for item in made:  # every answered create is there after the restart
                    assert item in listed or item in snapshots, (attempt, item)
                for volume in listed.values():  # and whatever is listed is whole
                    if volume.get("source_volume_id") == base:
                        assert http.get(f"{V}/{volume['id']}/files", params={"path": "data.bin"}).content == content
                    elif volume["id"] != base:
                        assert ok(http.get(f"{V}/{volume['id']}/files/list", params={"path": "/"}), 200)["entries"] == []
                for snapshot in snapshots:
                    made_from = ok(http.post(V, json={"snapshot_id": snapshot}), 201)["id"]
                    assert http.get(f"{V}/{made_from}/files", params={"path": "data.bin"}).content == content
                    ok(http.delete(f"{V}/{made_from}"), 200)
                    ok(http.delete(f"{V}/{base}/snapshots/{snapshot}"), 200)
                for volume in listed:
                    if volume != base:
                        ok(http.delete(f"{V}/{volume}"), 200)
                half_made = [p.name for p in volumes_dir.rglob(".creating-*")]
                assert half_made == [] and on_disk(volumes_dir) == {base}, (attempt, half_made, on_disk(volumes_dir))
        with make_http(server.url) as http:
            ok(http.delete(f"{V}/{base}"), 200)
            ok(http.delete(f"{V}/{new_volume(http, size=f'{QUOTA}')}"), 200)  # nothing half made counts
        print(f"\n{ROUNDS} kill -9 rounds of a create, a fork and a snapshot: {answered_201} of {3 * ROUNDS} answered")
    finally:
        server.stop()
