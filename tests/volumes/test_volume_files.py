"""A volume's file API (the sandbox file API's code over a view rooted at the volume): reads, writes,
mkdir 201, stat, list, move, delete, a tar import, the watch WebSocket, and its confinement."""
from __future__ import annotations

import io
import json
import tarfile

from websockets.sync.client import connect as ws_connect

from tests.helpers import TOKEN, err, ok

from .conftest import V, needs_root, new_volume

pytestmark = needs_root


def tar_of(entries: list[tuple[str, bytes | str | None]]) -> bytes:
    """(name, bytes: a file | str: a symlink's target | None: a directory)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        for name, content in entries:
            info = tarfile.TarInfo(name)
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                archive.addfile(info)
            elif isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content
                archive.addfile(info)
            else:
                info.size, info.mode = len(content), 0o755
                archive.addfile(info, io.BytesIO(content))
    return out.getvalue()


def test_the_file_calls_work_on_paths_relative_to_the_volumes_root(vhttp):
    volume = new_volume(vhttp)
    files = f"{V}/{volume}/files"
    try:
        assert ok(vhttp.post(files, params={"path": "/src/pkg", "mkdir": "true", "recursive": "true"}),
                  201) == {"created": True}
        ok(vhttp.post(files, params={"path": "src/pkg/main.py"}, content=b"print(1)\n"), 200)
        assert vhttp.get(files, params={"path": "/src/pkg/main.py"}).content == b"print(1)\n"
        as_json = ok(vhttp.get(files, params={"path": "src/pkg/main.py"}, headers={"Accept": "application/json"}), 200)
        assert as_json == {"content": "cHJpbnQoMSkK", "encoding": "base64"}
        stat = ok(vhttp.get(f"{files}/stat", params={"path": "src/pkg/main.py"}), 200)
        assert stat["path"] == "/src/pkg/main.py" and stat["type"] == "file" and stat["size"] == 9
        ok(vhttp.post(f"{files}/move", json={"source": "/src/pkg/main.py", "destination": "/src/app.py"}), 200)
        names = [(e["name"], e["path"]) for e in ok(vhttp.get(f"{files}/list", params={"path": "/src"}), 200)["entries"]]
        assert names == [("app.py", "/src/app.py"), ("pkg", "/src/pkg")]
        assert ok(vhttp.delete(files, params={"path": "/src"}), 200) == {"deleted": True}
        assert ok(vhttp.get(f"{files}/list", params={"path": "/"}), 200)["entries"] == []
        err(vhttp.get(files, params={"path": "/src/app.py"}), 404, "file_not_found")
        err(vhttp.post(files, params={"path": "/", "mkdir": "true"}), 409, "path_exists")
        err(vhttp.delete(files, params={"path": "/"}), 403, "permission_denied")  # its root stays
    finally:
        vhttp.delete(f"{V}/{volume}")


def test_no_path_or_link_in_a_volume_leads_out_of_it(vhttp):
    volume = new_volume(vhttp)
    files = f"{V}/{volume}/files"
    try:
        imported = ok(vhttp.put(f"{files}/archive", params={"path": "/"}, content=tar_of([
            ("etc", None), ("etc/passwd", b"the volume's own"),
            ("abs", "/etc/passwd"), ("up", "../../../../../../etc/passwd"), ("hostroot", "/")])), 200)
        assert imported == {"files": 1, "directories": 1, "symlinks": 3, "bytes": 16}
        # An absolute link starts again at the volume's root; ".." stops there: never the host's file.
        for path in ("abs", "up", "/../../etc/passwd", "hostroot/etc/passwd"):
            assert vhttp.get(files, params={"path": path}).content == b"the volume's own", path
        err(vhttp.get(files, params={"path": "hostroot/root/.bashrc"}), 404, "file_not_found")
        escaping = err(vhttp.put(f"{files}/archive", params={"path": "/"},
                                 content=tar_of([("../outside", b"x")])), 400, "invalid_request")
        assert "climbs out" in escaping["message"]
        err(vhttp.put(f"{files}/archive", params={"path": "/"}, content=b"not a tar"), 400, "invalid_request")
        # Written through a link, a file lands inside the volume.
        ok(vhttp.post(files, params={"path": "hostroot/tmp-made"}, content=b"x"), 200)
        assert ok(vhttp.get(f"{files}/stat", params={"path": "/tmp-made"}), 200)["size"] == 1
    finally:
        vhttp.delete(f"{V}/{volume}")


def test_a_tar_import_makes_directories_files_and_links_and_overwrites_files(vhttp):
    volume = new_volume(vhttp)
    files = f"{V}/{volume}/files"
    try:
        ok(vhttp.post(files, params={"path": "/app", "mkdir": "true"}), 201)
        ok(vhttp.post(files, params={"path": "/app/run.sh"}, content=b"old"), 200)
        counts = ok(vhttp.put(f"{files}/archive", params={"path": "/app"}, content=tar_of([
            ("./", None), ("run.sh", b"#!/bin/sh\necho new\n"), ("lib/", None), ("lib/a.txt", b"a"),
            ("latest", "run.sh")])), 200)
        assert counts == {"files": 2, "directories": 1, "symlinks": 1, "bytes": 20}
        assert vhttp.get(files, params={"path": "/app/run.sh"}).content == b"#!/bin/sh\necho new\n"
        assert ok(vhttp.get(f"{files}/stat", params={"path": "/app/run.sh"}), 200)["mode"] == "0755"
        link = ok(vhttp.get(f"{files}/stat", params={"path": "/app/latest"}), 200)
        assert link["type"] == "symlink" and link["link_target"] == "run.sh"
    finally:
        vhttp.delete(f"{V}/{volume}")


def test_the_watch_websocket_reports_changes_in_a_volume(vhttp, volume_server):
    volume = new_volume(vhttp)
    files = f"{V}/{volume}/files"
    url = "ws" + volume_server.url.removeprefix("http") + f"{files}/watch"
    try:
        ok(vhttp.post(files, params={"path": "/watched", "mkdir": "true"}), 201)
        with ws_connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}, open_timeout=10) as ws:
            ws.send(json.dumps({"action": "subscribe", "path": "/watched", "recursive": True}))
            subscribed = json.loads(ws.recv(timeout=10))
            assert subscribed["type"] == "subscribed" and subscribed["watch_id"] and subscribed["path"] == "/watched"
            ok(vhttp.post(files, params={"path": "/watched/new.txt"}, content=b"hello"), 200)
            seen = set()
            while ("rename", "/watched/new.txt") not in seen and ("create", "/watched/new.txt") not in seen:
                event = json.loads(ws.recv(timeout=10))
                assert event["type"] == "event" and event["watch_id"] == subscribed["watch_id"], event
                seen.add((event["event"], event["path"]))
            ws.send(json.dumps({"action": "subscribe", "path": "/nowhere"}))
            assert json.loads(ws.recv(timeout=10))["type"] == "error"
    finally:
        vhttp.delete(f"{V}/{volume}")
