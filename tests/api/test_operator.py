"""Running the server as an operator would: one owner per data dir, the token file, start-up
errors on one line, the start-up line, logs and the process title.

Every server here is a real ``sessiond serve`` subprocess on loopback, stopped by the test.
"""
from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time

import httpx
import pytest

from tests.client.test_cli import ROOT
from tests.helpers import TOKEN, all_events, claim_sandbox, create_session, get_session, output_bytes, wait_event, \
    write_input
from tests.serverproc import ServerProcess, free_port

SECOND_SERVER_LIMIT_S = 2.0


def serve(data_dir, *extra, env=None, timeout=30) -> subprocess.CompletedProcess:
    """``sessiond serve`` that is expected to exit on its own (a start-up error)."""
    argv = [sys.executable, "-m", "session_supervisor.api", "serve", "--host", "127.0.0.1", "--data-dir", str(data_dir),
            "--runtime", "host", *extra]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def authed(server) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=30)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sessiond: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


# ---- one server per data dir ----------------------------------------------------------------
def test_a_second_server_on_a_data_dir_in_use_exits_at_once_and_the_first_keeps_its_live_pty_session(tmp_path):
    first = ServerProcess(tmp_path / "data", token=TOKEN).start()
    try:
        with authed(first) as http:
            sb = claim_sandbox(http)
            sid = create_session(http, sb, {"command": ["bash", "--norc", "-i"], "io": {"mode": "pty"},
                                            "env": {"PS1": "$ "}})["id"]
            write_input(http, sb, sid, "i1", "echo before-$((40+2))\r")
            wait_event(http, sb, sid, lambda e: b"before-42" in output_bytes([e]))
            before = get_session(http, sb, sid)
            journal_before = all_events(http, sb, sid)

            started = time.monotonic()
            second = serve(first.data_dir, "--port", str(free_port()), "--token", TOKEN)
            took = time.monotonic() - started
            line = one_error_line(second)
            assert "in use" in line and f"pid {first.proc.pid}" in line, line
            assert took < SECOND_SERVER_LIMIT_S, f"the second server took {took:.2f}s to give up"

            after = get_session(http, sb, sid)
            assert after["phase"] == "running" and after["attempt"] == before["attempt"]
            assert all_events(http, sb, sid) == journal_before  # not one event more, no gap
            write_input(http, sb, sid, "i2", "echo after-$((40+3))\r")  # the same bash still answers
            wait_event(http, sb, sid, lambda e: b"after-43" in output_bytes([e]))
            seqs = [e["seq"] for e in all_events(http, sb, sid)]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    finally:
        first.stop()
    assert "UNIQUE constraint" not in first.log_path.read_text()


def test_the_lock_is_released_when_the_server_is_killed_so_a_restart_takes_it(tmp_path):
    server = ServerProcess(tmp_path / "data", token=TOKEN).start()
    try:
        server.kill()
        server.start()  # the kernel dropped the flock with the process
        assert (tmp_path / "data" / "lock").read_text().strip() == str(server.proc.pid)
    finally:
        server.stop()


# ---- start-up errors --------------------------------------------------------------------------
def test_a_port_in_use_is_one_line_naming_the_port(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        line = one_error_line(serve(tmp_path / "data", "--port", str(port), "--token", TOKEN))
    assert f"port {port}" in line and "in use" in line


def test_a_data_dir_that_cannot_be_created_is_one_line(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    line = one_error_line(serve(tmp_path / "file" / "data", "--port", str(free_port()), "--token", TOKEN))
    assert str(tmp_path / "file" / "data") in line


def test_a_missing_bubblewrap_is_one_line_that_says_what_to_do(tmp_path):
    done = serve(tmp_path / "data", "--port", str(free_port()), "--token", TOKEN, "--runtime", "bwrap",
                 env={"PATH": str(tmp_path / "empty-path")})
    line = one_error_line(done)
    assert "bwrap" in line and "--runtime host" in line


def test_no_auth_is_refused_on_a_non_loopback_address(tmp_path):
    line = one_error_line(serve(tmp_path / "data", "--no-auth", "--host", "0.0.0.0", "--port", str(free_port())))
    assert "--no-auth" in line


# ---- the token file ---------------------------------------------------------------------------
def test_without_flags_the_server_generates_a_private_token_file_and_requires_it(tmp_path):
    server = ServerProcess(tmp_path / "data", token=None).start()
    try:
        token_file = server.data_dir / "token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert len(server.token) >= 32
        assert httpx.get(f"{server.url}/api/v1/sandboxes").status_code == 401
        with authed(server) as http:
            assert http.get("/api/v1/sandboxes").status_code == 200
        log = server.log_path.read_text()
        startup = [line for line in log.splitlines() if line.startswith("sessiond listening on")]
        assert startup == [f"sessiond listening on {server.url} data={server.data_dir} runtime=host "
                           f"(NO isolation) auth=token in {token_file} console={server.url}/ui/"], log
        assert server.token not in log and server.token not in " ".join(server.command())
        token = server.token
        server.restart()
        assert server.token_file.read_text().strip() == token  # kept across restarts
        assert httpx.get(f"{server.url}/api/v1/sandboxes",
                         headers={"Authorization": f"Bearer {token}"}).status_code == 200
    finally:
        server.stop()


# ---- logs and the process title --------------------------------------------------------------
def test_every_log_line_is_written_once_and_access_lines_only_with_access_log(tmp_path):
    quiet = ServerProcess(tmp_path / "quiet", token=TOKEN).start()
    try:
        httpx.get(f"{quiet.url}/healthz")
    finally:
        quiet.stop()
    quiet_log = quiet.log_path.read_text()
    assert quiet_log.count("Starting worker") == 1, quiet_log
    assert "GET http" not in quiet_log
    loud = ServerProcess(tmp_path / "loud", token=TOKEN, extra_args=["--access-log", "--log-level", "debug"])
    loud.start()
    try:
        httpx.get(f"{loud.url}/healthz?probe=1")
    finally:
        loud.stop()
    access = [line for line in loud.log_path.read_text().splitlines() if "/healthz?probe=1" in line]
    assert len(access) == 1 and " access " in access[0] and " 200 " in access[0], access


def test_the_process_shows_as_sessiond(tmp_path):
    server = ServerProcess(tmp_path / "data", token=TOKEN).start()
    try:
        pid = server.proc.pid
        with open(f"/proc/{pid}/comm") as comm:
            assert comm.read().strip() == "sessiond"
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            shown = cmdline.read().replace(b"\0", b" ").decode()
        assert shown.startswith("sessiond serve") and TOKEN not in shown, shown
    finally:
        server.stop()


@pytest.mark.parametrize("argv,shown", [(["serve", "--token", "s3cret"], ["serve", "--token", "***"]),
                                        (["serve", "--token=s3cret"], ["serve", "--token=***"])])
def test_the_title_never_shows_the_token(argv, shown):
    from session_supervisor.api.operator_log import _without_secrets
    assert _without_secrets(argv) == shown
