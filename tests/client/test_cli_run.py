"""``sessionctl run`` through its real entry point: claim, run, stream live, exit with the code,
delete what it claimed (also on Ctrl-C), ``--sandbox``, and ``--pty`` on a real terminal."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

from session_supervisor.client import Client
from tests.client.test_attach import Terminal, on_terminal
from tests.client.test_cli import ROOT, cli_env, sessionctl
from tests.helpers import TOKEN, wait_for

CLI = [sys.executable, "-m", "session_supervisor.client.cli"]


def sandboxes(server) -> set[str]:
    with Client(server.url, TOKEN) as client:
        return {b.id for b in client.list_sandboxes(limit=200)}


def test_run_relays_both_streams_exits_with_the_code_and_deletes_its_sandbox(server):
    before = sandboxes(server)
    done = sessionctl(server, "run", "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3")
    assert (done.returncode, done.stdout, done.stderr) == (3, "to-stdout\n", "to-stderr\n")
    assert sandboxes(server) == before  # the claimed sandbox is gone


def test_run_streams_output_while_the_command_still_runs(server):
    proc = subprocess.Popen([*CLI, "run", "--env", "WORD=live", "--", "sh", "-c", 'echo "$WORD"; sleep 3; echo later'],
                            cwd=ROOT, env=cli_env(server), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready and proc.stdout.readline() == b"live\n"
        assert proc.poll() is None  # seen before the command ended
        assert proc.wait(30) == 0 and proc.stdout.read() == b"later\n"
    finally:
        proc.kill()
        proc.wait()


def test_ctrl_c_ends_the_run_with_130_and_still_deletes_the_sandbox(server):
    before = sandboxes(server)
    proc = subprocess.Popen([*CLI, "run", "--", "sh", "-c", "echo started; exec sleep 60"], cwd=ROOT,
                            env=cli_env(server), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"started\n"
        assert len(sandboxes(server) - before) == 1
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
        assert sandboxes(server) == before
    finally:
        proc.kill()
        proc.wait()


def test_run_in_a_given_sandbox_keeps_it_and_a_missing_command_is_127(server):
    with Client(server.url, TOKEN) as client:
        sb = client.claim_sandbox("default").sandbox_id
        try:
            client.write_file(sb, "/workspace/note.txt", b"kept\n")
            done = sessionctl(server, "run", "--sandbox", sb, "--cwd", "/workspace", "--", "cat", "note.txt")
            assert (done.returncode, done.stdout) == (0, "kept\n")
            assert client.get_sandbox(sb).status == "running"
            missing = sessionctl(server, "run", "--sandbox", sb, "--", "no-such-command-here")
            assert missing.returncode == 127 and missing.stderr.count("\n") == 1
            assert "no-such-command-here" in missing.stderr and "Traceback" not in missing.stderr
        finally:
            client.delete_sandbox(sb)


def test_run_with_a_pty_is_interactive_on_a_real_terminal(server):
    terminal = Terminal()
    terminal.set_size(30, 100)
    before = sandboxes(server)
    try:
        proc = on_terminal(terminal, [*CLI, "run", "--pty", "--", "sh", "-c", "stty size; read word; echo got-$word; exit 4"],
                           server)
        terminal.expect(b"30 100")  # the remote terminal has this one's size
        terminal.type(b"hello\r")
        terminal.expect(b"got-hello")
        assert proc.wait(30) == 4
        assert sandboxes(server) == before
    finally:
        terminal.close()
