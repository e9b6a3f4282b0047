"""Workspace files through the official ``sandbox0`` Python SDK, against a bubblewrap server.

The attacks are real: the links are planted by a process inside the sandbox (a context), and
the assertions check both the refusal and that nothing outside the sandbox was read or changed.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import threading
import time

import httpx
import pytest

import sandbox0
from sandbox0.errors import APIError
from sandbox0.sandbox import CmdOptions
from tests.conftest import make_http
from tests.helpers import TOKEN, err, ok, workspace_dir
from tests.serverproc import ServerProcess

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


@pytest.fixture(scope="module")
def bwrap_server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("files-data"), token=TOKEN, runtime="bwrap") as srv:
        yield srv


@pytest.fixture
def client(bwrap_server):
    client = sandbox0.Client(token=TOKEN, base_url=bwrap_server.url, timeout=60.0)
    yield client
    client.close()


@pytest.fixture
def sandbox(client):
    sb = client.sandboxes.claim("default")
    yield sb
    client.sandboxes.delete(sb.id)


@pytest.fixture
def http(bwrap_server):
    with make_http(bwrap_server.url) as http:
        yield http


def sh(sandbox, script: str):
    result = sandbox.cmd("sh", CmdOptions(command=["sh", "-c", script]))
    assert result.exit_code == 0, result
    return result.stdout


def refused(call, *args) -> APIError:
    with pytest.raises(APIError) as info:
        call(*args)
    assert info.value.status_code in (400, 403, 404), info.value
    return info.value


def test_write_read_list_stat_delete_round_trip(sandbox):
    assert sandbox.write_file("/workspace/a.txt", b"hello\x00\xff").data.written
    assert sandbox.read_file("/workspace/a.txt") == b"hello\x00\xff"
    info = sandbox.stat_file("/workspace/a.txt")
    assert (info.name, info.path, info.type_.value, info.size, info.mode) == ("a.txt", "/workspace/a.txt", "file", 7, "0644")
    assert [e.name for e in sandbox.list_files("/workspace")] == ["a.txt"]
    assert sh(sandbox, "od -An -tx1 /workspace/a.txt").split() == ["68", "65", "6c", "6c", "6f", "00", "ff"]
    assert sandbox.delete_file("/workspace/a.txt").data.deleted
    assert sandbox.list_files("/workspace") == []
    refused(sandbox.read_file, "/workspace/a.txt")


def test_a_64_mib_file_round_trips_byte_exact(sandbox):
    data = os.urandom(64 << 20)
    sandbox.write_file("/workspace/big.bin", data)
    assert sandbox.stat_file("/workspace/big.bin").size == len(data)
    assert hashlib.sha256(sandbox.read_file("/workspace/big.bin")).hexdigest() == hashlib.sha256(data).hexdigest()
    seen = sh(sandbox, "sha256sum /workspace/big.bin").split()[0]  # the sandbox sees the same bytes
    assert seen == hashlib.sha256(data).hexdigest()


def test_a_write_replaces_the_file_atomically_and_leaves_no_temporary(sandbox):
    sandbox.write_file("/workspace/f", b"old")
    inode_before = sh(sandbox, "stat -c %i /workspace/f")
    sandbox.write_file("/workspace/f", b"new")
    assert sandbox.read_file("/workspace/f") == b"new"
    assert sh(sandbox, "stat -c %i /workspace/f") != inode_before  # a new file renamed over the old
    assert [e.name for e in sandbox.list_files("/workspace")] == ["f"]


def test_dot_dot_and_host_paths_are_refused(sandbox, bwrap_server):
    host_passwd = open("/etc/passwd", "rb").read()
    data_dir = str(bwrap_server.data_dir)
    for path in ("/workspace/../etc/passwd", "/../../etc/passwd", "/etc/passwd", "../etc/passwd",
                 "/workspace/../../../..", f"{data_dir}/sandboxes/{sandbox.id}/state/journal.sqlite",
                 "/proc/self/environ", "/", "/workspace/../state"):
        error = refused(sandbox.read_file, path)
        assert host_passwd[:20].decode() not in str(error)
        refused(sandbox.write_file, path, b"pwned")
    assert open("/etc/passwd", "rb").read() == host_passwd
    assert not os.path.exists(f"{data_dir}/sandboxes/{sandbox.id}/pwned")
    # Inside the workspace, .. is resolved like the sandbox would: it stays in the workspace.
    sandbox.mkdir("/workspace/d", recursive=True)
    sandbox.write_file("/workspace/d/../x", b"inside")
    assert sandbox.read_file("/workspace/x") == b"inside"
    refused(sandbox.delete_file, "/workspace")
    refused(sandbox.delete_file, "/workspace/d/../..")


def test_symlinks_planted_by_the_sandbox_resolve_inside_it(client, sandbox, bwrap_server):
    other = client.sandboxes.claim("default")
    try:
        other.write_file("/workspace/secret", b"other sandbox's secret")
        other_ws = str(workspace_dir(bwrap_server.data_dir, other.id))
        sh(sandbox, f"""cd /workspace
            ln -s /etc/passwd passwd
            ln -s ../../{other.id}/workspace other-rel
            ln -s {other_ws} other-abs
            ln -s {other_ws}/secret secret-abs
            ln -s / root
            ln -s /workspace/real inside-abs
            ln -s real inside-rel
            ln -s loop1 loop2; ln -s loop2 loop1
            echo mine > real""")
        host_passwd = open("/etc/passwd", "rb").read()
        for link in ("passwd", "other-rel/secret", "other-abs/secret", "secret-abs", "root/etc/passwd",
                     "loop1"):
            refused(sandbox.read_file, f"/workspace/{link}")
            refused(sandbox.write_file, f"/workspace/{link}", b"pwned")
            refused(sandbox.list_files, f"/workspace/{link}")
        assert open("/etc/passwd", "rb").read() == host_passwd
        assert other.read_file("/workspace/secret") == b"other sandbox's secret"
        assert [e.name for e in other.list_files("/workspace")] == ["secret"]
        # Links that stay inside the sandbox work as they do for its processes.
        assert sandbox.read_file("/workspace/inside-abs") == b"mine\n"
        assert sandbox.read_file("/workspace/inside-rel") == b"mine\n"
        link = sandbox.stat_file("/workspace/passwd")  # stat reports the link itself
        assert (link.type_.value, link.is_link, link.link_target) == ("symlink", True, "/etc/passwd")
        sandbox.delete_file("/workspace/passwd")  # deletes the link, never its target
        assert open("/etc/passwd", "rb").read() == host_passwd
    finally:
        client.sandboxes.delete(other.id)


def test_the_sandbox_tmp_is_reachable_and_shared_with_its_processes(sandbox):
    sandbox.write_file("/tmp/from-api", b"via api")
    assert sh(sandbox, "cat /tmp/from-api") == "via api"
    sh(sandbox, "echo via process > /tmp/from-proc")
    assert sandbox.read_file("/tmp/from-proc") == b"via process\n"
    assert not os.path.exists("/tmp/from-api")  # not the host's /tmp


def test_a_file_written_through_the_api_survives_pause_and_resume(client, sandbox):
    payload = os.urandom(1 << 20)
    sandbox.write_file("/workspace/kept.bin", payload)
    sandbox.write_file("/tmp/kept.txt", b"tmp too")
    client.pause_sandbox(sandbox.id)
    assert client.sandboxes.get(sandbox.id).status == "paused"
    client.resume_sandbox(sandbox.id)
    assert sandbox.read_file("/workspace/kept.bin") == payload
    assert sandbox.read_file("/tmp/kept.txt") == b"tmp too"
    assert sh(sandbox, "wc -c < /workspace/kept.bin").strip() == str(len(payload))


def test_the_sdk_e2e_file_operations_pass(sandbox):
    """The calls of sdk-py tests/e2e/test_sandbox_files.py, in its order, with its paths."""
    base_dir = f"/tmp/sdk-py-e2e-{time.time_ns()}"
    file_path, moved_path = f"{base_dir}/hello.txt", f"{base_dir}/moved.txt"
    sandbox.mkdir(base_dir, recursive=True)
    sandbox.write_file(file_path, b"hello e2e")
    sandbox.stat_file(file_path)
    assert sandbox.read_file(file_path) == b"hello e2e"
    assert any(entry.name == "hello.txt" for entry in sandbox.list_files(base_dir))
    sandbox.move_file(file_path, moved_path)
    assert sandbox.read_file(moved_path) == b"hello e2e"

    watch = sandbox.watch_files(base_dir, recursive=True)
    try:
        sandbox.write_file(f"{base_dir}/watch.txt", b"watch")
        event = wait_for_watch_event(watch, timeout_sec=10)
    finally:
        watch.unsubscribe()
    assert event is not None, "timed out waiting for watch event"
    assert (event.type, event.event, event.path) == ("event", "rename", f"{base_dir}/watch.txt")

    sandbox.delete_file(moved_path)
    sandbox.delete_file(base_dir)
    refused(sandbox.stat_file, base_dir)


def wait_for_watch_event(stream, timeout_sec: int):
    """As the SDK's e2e helper: the first event from a reader thread, or None after the timeout."""
    found = []
    reader = threading.Thread(target=lambda: found.extend(itertools.islice(stream.iter_events(), 1)), daemon=True)
    reader.start()
    reader.join(timeout_sec)
    if reader.is_alive():
        stream.close()
        reader.join(1)
    return found[0] if found else None


def test_a_recursive_watch_reports_what_the_sandbox_processes_do_and_not_what_links_point_at(sandbox):
    sandbox.mkdir("/workspace/w/sub", recursive=True)
    sh(sandbox, "ln -s /etc /workspace/w/etc-link")
    watch = sandbox.watch_files("/workspace/w", recursive=True)
    try:
        sh(sandbox, "echo x > /workspace/w/sub/made-by-process")
        event = wait_for_watch_event(watch, timeout_sec=10)
    finally:
        watch.close()
    assert event is not None and event.path == "/workspace/w/sub/made-by-process"
    assert event.event == "create"
    with pytest.raises(APIError):
        sandbox.watch_files("/workspace/w/etc-link")  # a link out of the sandbox is not watched


def test_file_errors_use_the_reference_codes(http, sandbox):
    base = f"/api/v1/sandboxes/{sandbox.id}/files"
    err(http.get(base), 400, "invalid_request")
    err(http.get(base, params={"path": "/workspace/missing"}), 404, "file_not_found")
    err(http.get(f"{base}/list", params={"path": "/workspace/missing"}), 404, "file_not_found")
    err(http.get(base, params={"path": "/etc/hostname"}), 403, "permission_denied")
    ok(http.post(base, params={"path": "/workspace/d", "mkdir": "true"}), 201)
    err(http.post(base, params={"path": "/workspace/d", "mkdir": "true"}), 409, "path_exists")
    err(http.get(base, params={"path": "/workspace/d"}), 409, "path_not_file")
    err(http.post(base, params={"path": "/workspace/d"}, content=b"x"), 409, "path_not_file")
    ok(http.post(base, params={"path": "/workspace/f"}, content=b"x"), 200)
    err(http.get(f"{base}/list", params={"path": "/workspace/f"}), 409, "path_not_directory")
    err(http.post(base, params={"path": "/workspace/f/x"}, content=b"x"), 409, "path_not_directory")
    err(http.post(base, params={"path": "/workspace/no/such/x"}, content=b"x"), 404, "file_not_found")
    err(http.post(f"{base}/move", json={"source": "/workspace/f"}), 400, "invalid_request")
    err(http.post(f"{base}/move", json={"source": "/workspace/nope", "destination": "/workspace/g"}),
        404, "file_not_found")
    err(http.post(f"{base}/move", json={"source": "/workspace/f", "destination": "/etc/f"}), 403, "permission_denied")
    assert http.get(base, params={"path": "/workspace/f"}, headers={"Accept": "application/json"}).json()["data"] \
        == {"content": "eA==", "encoding": "base64"}
    err(http.get("/api/v1/sandboxes/sb-missing/files", params={"path": "/workspace/f"}), 404, "not_found")


def test_a_link_swapped_in_while_the_api_writes_never_redirects_the_write(client, sandbox, bwrap_server):
    """The sandbox races the API: it keeps replacing a directory with a link to another sandbox's
    workspace (by its host path and by a climbing relative path) while files are written into it."""
    other = client.sandboxes.claim("default")
    try:
        other_ws = str(workspace_dir(bwrap_server.data_dir, other.id))
        sandbox.mkdir("/workspace/d")
        racer = sandbox.cmd_stream("race", CmdOptions(command=["sh", "-c", f"""
            cd /workspace; end=$(($(date +%s) + 4)); echo racing
            while [ $(date +%s) -lt $end ]; do
                mv d d.real; ln -s {other_ws} d; rm d; ln -s ../../{other.id}/workspace d; rm d; mv d.real d
            done"""]))
        outcomes = {"written": 0, "refused": 0}
        try:
            for i in range(200):
                try:
                    sandbox.write_file(f"/workspace/d/f{i}", b"racing write")
                    outcomes["written"] += 1
                except APIError as error:
                    assert error.status_code in (400, 403, 404, 409), error
                    outcomes["refused"] += 1
        finally:
            racer.wait()
            racer.close()
        assert other.list_files("/workspace") == []  # nothing ever landed in the other sandbox
        assert not os.listdir(other_ws)
        landed = {e.name for e in sandbox.list_files("/workspace/d")}
        assert len(landed) == outcomes["written"] and outcomes["written"] > 0, outcomes
    finally:
        client.sandboxes.delete(other.id)


def test_contexts_run_in_the_same_isolation_as_sessions(client, sandbox, bwrap_server):
    other = client.sandboxes.claim("default")
    try:
        other.write_file("/workspace/secret", b"theirs")
        probe = sandbox.cmd("probe", CmdOptions(command=["sh", "-c", f"""
            cat {bwrap_server.data_dir}/sandboxes/{other.id}/workspace/secret 2>&1 || echo no-host-path
            ls -A /workspace; cat /proc/1/cmdline | tr '\\0' ' '; echo"""]))
        assert "theirs" not in probe.output_raw and "no-host-path" in probe.stdout, probe
        assert "sessiond serve" not in probe.stdout and "api serve" not in probe.stdout  # own pid namespace
    finally:
        client.sandboxes.delete(other.id)


def test_an_upload_past_the_request_limit_is_refused_and_leaves_the_old_file(http, sandbox):
    base = f"/api/v1/sandboxes/{sandbox.id}/files"
    ok(http.post(base, params={"path": "/workspace/f"}, content=b"old"), 200)
    chunk = b"\0" * (1 << 20)

    def body():  # chunked: the server counts as it reads and stops at 256 MiB
        for _ in range(257):
            yield chunk

    try:
        response = http.post(base, params={"path": "/workspace/f"}, content=body())
        assert (response.status_code, response.json()["error"]["code"]) == (413, "payload_too_large")
    except httpx.HTTPError:
        pass  # the server may close the connection before reading the rest: a refusal too
    assert sandbox.read_file("/workspace/f") == b"old"
    assert [e.name for e in sandbox.list_files("/workspace")] == ["f"]  # no temporary left behind


def test_what_the_api_writes_belongs_to_the_sandbox_so_its_processes_can_change_it(sandbox):
    """The hardened sandbox's root is an unprivileged uid on the host: a file or directory
    the API created as the server's root must still be the sandbox's own to edit and delete."""
    sandbox.mkdir("/workspace/from-api")
    sandbox.write_file("/workspace/from-api/note.txt", b"written by the api\n")
    probe = sandbox.cmd("probe", CmdOptions(command=["sh", "-c",
        "echo appended >> /workspace/from-api/note.txt && cat /workspace/from-api/note.txt"
        " && rm /workspace/from-api/note.txt && rmdir /workspace/from-api && echo removed"]))
    assert probe.stdout.splitlines() == ["written by the api", "appended", "removed"], probe
