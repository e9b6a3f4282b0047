"""What a new user tripped on in ``sessionctl``, through its real entry point: one-line errors
with their exit codes, the right empty tables, ``attach`` ending with the attempt (its code
relayed) and saying how to detach, ``session log --follow/--tail`` with a terminal's output
as text, ``sandbox cp -r``, ``ls`` and ``rm``, and the restart give-up limit as flags."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from session_supervisor.client import Client
from tests.client.test_attach import Terminal, start_attach
from tests.client.test_cli import ROOT, cli_env, sessionctl
from tests.helpers import TOKEN, wait_for
from tests.serverproc import ServerProcess

CLI = [sys.executable, "-m", "session_supervisor.client.cli"]


def one_line_error(done, code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("sessionctl: "), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    return done.stderr


def test_a_url_without_a_scheme_is_taken_as_http_and_a_foreign_scheme_is_refused_in_one_line(server):
    host_port = server.url.removeprefix("http://")
    assert sessionctl(server, "--url", host_port, "sandbox", "list", "-q").returncode == 0
    assert "expected http://HOST:PORT" in one_line_error(sessionctl(server, "--url", "ftp://x", "sandbox", "list"), 2)
    assert "port is not a number" in one_line_error(sessionctl(server, "--url", "localhost:eighty", "sandbox", "list"), 2)


def test_spec_file_errors_name_the_file_and_the_line_in_one_line(server, sandbox, tmp_path):
    bad_yaml = tmp_path / "spec.yaml"
    bad_yaml.write_text("command: [sh, -c, 'echo hi']\nio:\n  mode: pty\n   rows: 3\n")
    err = one_line_error(sessionctl(server, "session", "create", sandbox, "--spec-file", str(bad_yaml)), 2)
    assert f"{bad_yaml}:4:" in err, err
    bad_json = tmp_path / "spec.json"
    bad_json.write_text('{"command": ["true"],\n "env": {"A": 1,}}\n')
    err = one_line_error(sessionctl(server, "session", "create", sandbox, "--spec-file", str(bad_json)), 2)
    assert f"{bad_json}:2:" in err, err
    missing = one_line_error(sessionctl(server, "session", "create", sandbox, "--spec-file", str(tmp_path / "nope.yaml")), 2)
    assert "nope.yaml: No such file or directory" in missing
    usage = one_line_error(sessionctl(server, "session", "create", sandbox, "--restart", "sometimes", "--", "true"), 2)
    assert "invalid choice: 'sometimes'" in usage and "--help" in usage


def test_an_empty_sandbox_list_prints_the_sandbox_table_header(tmp_path):
    with ServerProcess(tmp_path / "data", token=TOKEN, runtime="host") as fresh:
        done = sessionctl(fresh, "sandbox", "list")
        assert done.returncode == 0 and done.stdout.split() == ["ID", "TEMPLATE", "STATUS", "GEN", "CREATED"]
        with Client(fresh.url, TOKEN) as client:
            sb = client.claim_sandbox("default").sandbox_id
            assert sessionctl(fresh, "session", "list", sb).stdout.split()[:3] == ["ID", "NAME", "PHASE"]


def test_the_restart_give_up_limit_and_its_window_are_flags(server, client, sandbox):
    sid = sessionctl(server, "session", "create", sandbox, "--restart", "on_failure", "--max-restarts", "2",
                     "--restart-window", "30", "-q", "--", "sh", "-c", "exit 3").stdout.strip()
    restart = client.get_session(sandbox, sid).spec["lifecycle"]["restart"]
    assert (restart["policy"], restart["max_restarts"], restart["window_seconds"]) == ("on_failure", 2, 30)
    wait_for(lambda: client.get_session(sandbox, sid).phase == "failed", timeout=20)
    assert client.get_session(sandbox, sid).restart_count == 2


# ---- attach -----------------------------------------------------------------------------------------
@pytest.fixture
def terminal():
    term = Terminal()
    yield term
    term.close()


def ready_pty(client, sandbox, script: str):
    session = client.create_session(sandbox, {"command": ["sh", "-c", script], "io": {"mode": "pty"}})
    wait_for(lambda: any(b"attach-ready" in e.data for e in client.iter_events(sandbox, session.id, follow=False)))
    return session


def test_attach_says_how_to_detach_and_ends_with_the_attempts_exit_code(server, client, sandbox, terminal):
    session = ready_pty(client, sandbox, "echo attach-ready; read line; echo got-$line; exit 7")
    proc = start_attach(server, terminal, sandbox, session.id)
    try:
        terminal.expect(b"detach with Ctrl-]")
        terminal.expect(b"attach-ready")
        terminal.type(b"done\r")
        terminal.expect(b"got-done")
        assert proc.wait(15) == 7  # the attempt's own code
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    again = start_attach(server, terminal, sandbox, session.id)  # attaching to what has exited
    try:
        assert again.wait(15) == 7
        terminal.expect(b"nothing to attach to")
    finally:
        if again.poll() is None:
            os.killpg(again.pid, signal.SIGKILL)
            again.wait(10)


def test_attach_with_stay_outlives_the_attempt_until_the_detach_key(server, client, sandbox, terminal):
    session = ready_pty(client, sandbox, "echo attach-ready; read line; exit 3")
    proc = start_attach(server, terminal, sandbox, session.id, "--stay")
    try:
        terminal.expect(b"attach-ready")
        terminal.type(b"x\r")
        terminal.expect(b"exited (crashed)")
        time.sleep(0.5)
        assert proc.poll() is None  # still attached
        terminal.type(b"\x1d")
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_attach_tail_starts_at_a_line_boundary(server, client, sandbox, terminal):
    session = ready_pty(client, sandbox, "echo first-line-is-long; echo attach-ready; exec cat")
    proc = start_attach(server, terminal, sandbox, session.id, "--tail", "24")  # cuts into the first line
    try:
        terminal.expect(b"attach-ready")
        terminal.type(b"\x1d")
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert b"is-long" not in terminal.seen and b"line-is" not in terminal.seen, terminal.seen


# ---- log ----------------------------------------------------------------------------------------------
def test_session_log_renders_a_terminal_as_text_and_raw_keeps_the_bytes(server, client, sandbox):
    script = r"printf '\033[1;31mred\033[0m plain\r\n'; printf 'progress 10%%\rprogress 99%%\r\n'; printf 'last'"
    session = client.create_session(sandbox, {"command": ["sh", "-c", script], "io": {"mode": "pty"}})
    wait_for(lambda: client.get_session(sandbox, session.id).phase == "exited")
    wait_for(lambda: b"last" in b"".join(e.data for e in client.iter_events(sandbox, session.id, follow=False)))
    text = sessionctl(server, "session", "log", sandbox, session.id)
    assert text.returncode == 0 and text.stdout == "red plain\nprogress 99%\nlast\n", text.stdout
    tail = sessionctl(server, "session", "log", sandbox, session.id, "--tail", "1")
    assert tail.stdout == "last\n", tail.stdout
    raw = subprocess.run([*CLI, "session", "log", sandbox, session.id, "--raw"], cwd=ROOT, env=cli_env(server),
                         capture_output=True, timeout=60)
    assert b"\x1b[1;31mred\x1b[0m" in raw.stdout and b"progress 10%\rprogress 99%" in raw.stdout


def test_session_log_follow_prints_new_output_as_it_comes(server, client, sandbox):
    sid = client.create_session(sandbox, {"command": ["sh", "-c", "for i in 1 2 3; do echo n$i; done; exec cat"]}).id
    wait_for(lambda: b"n3" in b"".join(e.data for e in client.iter_events(sandbox, sid, follow=False)))
    proc = subprocess.Popen([*CLI, "session", "log", sandbox, sid, "--tail", "2", "--follow"], cwd=ROOT,
                            env=cli_env(server), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"n2\n" and proc.stdout.readline() == b"n3\n"
        client.send_input(sandbox, sid, b"typed-later\n")
        assert proc.stdout.readline() == b"typed-later\n"
        client.delete_session(sandbox, sid)
        assert proc.wait(20) == 0 and b"deleted" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()


# ---- files ----------------------------------------------------------------------------------------------
def test_sandbox_cp_r_copies_a_tree_both_ways_and_ls_and_rm_work(server, client, sandbox, tmp_path):
    tree = tmp_path / "project"
    (tree / "src" / "pkg").mkdir(parents=True)
    (tree / "README").write_text("top\n")
    (tree / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    done = sessionctl(server, "sandbox", "cp", "-r", str(tree), f"{sandbox}:/workspace/project")
    assert done.returncode == 0, done.stderr
    assert client.read_file(sandbox, "/workspace/project/src/pkg/mod.py") == b"x = 1\n"
    listing = sessionctl(server, "sandbox", "ls", sandbox, "/workspace/project")
    assert listing.returncode == 0 and listing.stdout.split()[:5] == ["MODE", "TYPE", "SIZE", "MODIFIED", "NAME"]
    assert "README" in listing.stdout and "src/" in listing.stdout
    back = tmp_path / "back"
    assert sessionctl(server, "sandbox", "cp", "-r", f"{sandbox}:project", str(back)).returncode == 0
    assert (back / "src" / "pkg" / "mod.py").read_text() == "x = 1\n" and (back / "README").read_text() == "top\n"
    refused = one_line_error(sessionctl(server, "sandbox", "rm", sandbox, "/workspace/project"), 2)
    assert "is a directory" in refused
    assert sessionctl(server, "sandbox", "rm", sandbox, "/workspace/project/README").returncode == 0
    assert sessionctl(server, "sandbox", "rm", sandbox, "-r", "/workspace/project").returncode == 0
    assert "project" not in sessionctl(server, "sandbox", "ls", sandbox).stdout
