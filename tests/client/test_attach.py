"""``sessionctl session attach`` on a real terminal (a pty pair): replay, typing, resize, detach.

The CLI runs as the session leader of a fresh pseudo-terminal, exactly as in a
user's terminal emulator; the test types on the master side.
"""
from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest

from session_supervisor.client import Client
from tests.client.test_cli import ROOT, cli_env
from tests.helpers import TOKEN, wait_for
from tests.serverproc import ServerProcess

READY = b"attach-ready"


class Terminal:
    """The test's side of the pty: everything the CLI printed, read with bounded waits."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self.set_size(24, 80)
        self.seen = b""

    def set_size(self, rows: int, cols: int) -> None:
        # On the slave of our own pty: the kernel sends SIGWINCH to its foreground group.
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def expect(self, needle: bytes, count: int = 1, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while self.seen.count(needle) < count:
            left = deadline - time.monotonic()
            assert left > 0, f"{needle!r} x{count} not seen; got {self.seen[-400:]!r}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                self.seen += os.read(self.master, 65536)

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self) -> None:
        os.close(self.master)
        os.close(self.slave)


def take_terminal():
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # after setsid: this pty becomes our controlling tty


def on_terminal(terminal: Terminal, argv: list[str], server) -> subprocess.Popen:
    return subprocess.Popen(argv, stdin=terminal.slave, stdout=terminal.slave, stderr=terminal.slave, cwd=ROOT,
                            env=cli_env(server), start_new_session=True, preexec_fn=take_terminal)


def start_attach(server, terminal: Terminal, sandbox: str, session_id: str, *extra) -> subprocess.Popen:
    return on_terminal(terminal, [sys.executable, "-m", "session_supervisor.client.cli", "session", "attach", sandbox,
                                  session_id, *extra], server)


@pytest.fixture
def terminal():
    term = Terminal()
    yield term
    term.close()


def test_attach_replays_types_follows_resizes_and_detaches_without_eof(server, client, sandbox, terminal):
    session = client.create_session(sandbox, {"command": ["sh", "-c", "echo attach-ready; exec sh"],
                                              "io": {"mode": "pty"}, "env": {"PS1": "$ "}})
    wait_for(lambda: any(READY in e.data for e in client.iter_events(sandbox, session.id, follow=False)))
    before = termios.tcgetattr(terminal.slave)
    proc = start_attach(server, terminal, sandbox, session.id)
    try:
        terminal.expect(READY)  # the replay comes first
        assert termios.tcgetattr(terminal.slave) != before, "the local terminal is in raw mode while attached"
        terminal.type(b"echo typed-$((6*7))\r")
        terminal.expect(b"typed-42")
        terminal.set_size(40, 120)
        wait_for(lambda: any(e.type == "terminal.resized"
                             for e in client.iter_events(sandbox, session.id, follow=False)))
        terminal.type(b"stty size\r")
        terminal.expect(b"40 120")
        terminal.type(b"\x1d")  # Ctrl-] detaches
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert termios.tcgetattr(terminal.slave) == before, "the terminal is restored after detaching"
    current = client.get_session(sandbox, session.id)
    assert current.phase == "running" and current.attempt_id == session.attempt_id
    assert not any(e.type == "attempt.exited" for e in client.iter_events(sandbox, session.id, follow=False))
    client.send_input(sandbox, session.id, b"echo still-$((1+1))\r")  # stdin is still open: no EOF was sent
    wait_for(lambda: any(b"still-2" in e.data for e in client.iter_events(sandbox, session.id, follow=False)))


def ready_cat_on_a_pty(client, sandbox):
    session = client.create_session(sandbox, {"command": ["sh", "-c", "echo attach-ready; exec cat"],
                                              "io": {"mode": "pty"}})
    wait_for(lambda: any(READY in e.data for e in client.iter_events(sandbox, session.id, follow=False)))
    return session


def test_attach_restores_the_terminal_when_terminated(server, client, sandbox, terminal):
    session = ready_cat_on_a_pty(client, sandbox)
    before = termios.tcgetattr(terminal.slave)
    proc = start_attach(server, terminal, sandbox, session.id)
    try:
        terminal.expect(READY)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert termios.tcgetattr(terminal.slave) == before
    assert client.get_session(sandbox, session.id).phase == "running"


def test_attach_ends_cleanly_when_the_session_is_deleted(server, client, sandbox, terminal):
    session = ready_cat_on_a_pty(client, sandbox)
    before = termios.tcgetattr(terminal.slave)
    proc = start_attach(server, terminal, sandbox, session.id)
    try:
        terminal.expect(READY)
        client.delete_session(sandbox, session.id)
        assert proc.wait(15) == 0
        terminal.expect(b"the session was deleted")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert termios.tcgetattr(terminal.slave) == before


def test_attach_reconnects_by_itself_across_a_server_restart(tmp_path, terminal):
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="host")
    server.start()
    client = Client(server.url, TOKEN)
    proc = None
    try:
        sandbox = client.claim_sandbox().sandbox_id
        session = client.create_session(sandbox, {"command": ["sh", "-c", "echo attach-ready; exec cat"],
                                                  "io": {"mode": "pty"}})
        wait_for(lambda: any(READY in e.data for e in client.iter_events(sandbox, session.id, follow=False)))
        proc = start_attach(server, terminal, sandbox, session.id)
        terminal.expect(READY)
        server.stop()  # the server closes the socket with 1001; the attempt is replaced on restart
        server.start()
        terminal.expect(READY, count=2, timeout=30)  # the recovered attempt's output, live
        terminal.type(b"after-restart\r")
        terminal.expect(b"after-restart", count=2)  # the pty echo and cat's copy
        terminal.type(b"\x1d")
        assert proc.wait(15) == 0
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        client.close()
        server.stop()


# ---- the detach race, and what is replayed -------------------------------------------------------
DETACHES = 200
DETACHED = b"[sessionctl: detached]"
# One process attaches DETACHES times through the CLI's own main(): the same code path as
# `sessionctl session attach`, without paying an interpreter start per round.
ATTACH_LOOP = """
import sys
from session_supervisor.client.cli import main
for _ in range(int(sys.argv[3])):
    code = main(["session", "attach", sys.argv[1], sys.argv[2], "--tail", "32"])
    if code:
        sys.exit(code)
"""


def burn_cpu(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


@pytest.mark.timeout(900)
def test_200_detaches_in_a_loop_under_cpu_load_never_print_a_traceback(server, client, sandbox, terminal):
    # Output keeps flowing, so the reader thread is busy when each detach closes the socket.
    session = client.create_session(sandbox, {"command": ["sh", "-c", "while :; do echo tick; sleep 0.01; done"],
                                              "io": {"mode": "pty"}, "event_retention": {"max_bytes": 64 * 1024}})
    burners = burn_cpu(os.cpu_count() or 2)
    proc = on_terminal(terminal, [sys.executable, "-c", ATTACH_LOOP, sandbox, session.id, str(DETACHES)], server)
    try:
        for done in range(DETACHES):
            deadline = time.monotonic() + 60
            while terminal.seen.count(DETACHED) == done:
                assert time.monotonic() < deadline, f"attach {done + 1} never detached: {terminal.seen[-400:]!r}"
                # Output after the last detach means the next attach runs (raw mode); a key typed
                # before that is flushed by the switch to raw mode, so it is typed again.
                terminal.expect(b"tick", count=terminal.seen.count(b"tick") + 1, timeout=30)
                terminal.type(b"\x1d")
                time.sleep(0.05)
                terminal.expect(b"", timeout=0.5)  # read whatever arrived
                drain(terminal, 0.3, stop=lambda: terminal.seen.count(DETACHED) > done)
        assert proc.wait(30) == 0
    finally:
        for burner in burners:
            burner.kill()
            burner.wait(10)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    drain(terminal, 0.5)
    assert b"Traceback" not in terminal.seen and b"Exception in thread" not in terminal.seen, \
        terminal.seen[-2000:]
    assert terminal.seen.count(DETACHED) == DETACHES
    assert client.get_session(sandbox, session.id).phase == "running"


def drain(terminal: Terminal, seconds: float, stop=lambda: False) -> None:
    """Read what the CLI prints for up to ``seconds`` (or until ``stop()``)."""
    deadline = time.monotonic() + seconds
    while not stop() and (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([terminal.master], [], [], left)
        if ready:
            try:
                terminal.seen += os.read(terminal.master, 65536)
            except OSError:
                return  # every slave end is closed


def test_attach_tail_replays_only_the_last_bytes_and_no_replay_none(server, client, sandbox, terminal):
    session = client.create_session(sandbox, {"command": ["sh", "-c", "echo early-line; echo attach-ready; exec cat"],
                                              "io": {"mode": "pty"}})
    wait_for(lambda: any(READY in e.data for e in client.iter_events(sandbox, session.id, follow=False)))
    cooked = termios.tcgetattr(terminal.slave)
    for extra, shows_ready in ((["--tail", str(len(READY) + 2)], True), (["--no-replay"], False)):
        terminal.seen = b""
        proc = start_attach(server, terminal, sandbox, session.id, *extra)
        try:
            wait_for(lambda: termios.tcgetattr(terminal.slave) != cooked)  # attached: raw mode
            terminal.type(b"live-" + extra[0].encode() + b"\r")
            terminal.expect(b"live-" + extra[0].encode(), count=2)  # the pty echo and cat's copy
            terminal.type(b"\x1d")
            assert proc.wait(15) == 0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        drain(terminal, 0.3)
        assert b"early-line" not in terminal.seen, (extra, terminal.seen)
        assert (READY in terminal.seen) is shows_ready, (extra, terminal.seen)
