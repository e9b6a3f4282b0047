"""Tab completion in real interactive bash and zsh on a pseudo-terminal: nouns and verbs from
the parser, then a sandbox id and a session id asked of the local server."""
from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyte
import pytest

from tests.docs_blocks import block

from session_supervisor.client import Client
from tests.client.test_attach import Terminal, take_terminal
from tests.helpers import TOKEN
from tests.serverproc import ServerProcess

BIN = str(Path(sys.executable).parent)


@pytest.fixture(scope="module")
def lone_server(tmp_path_factory):
    """A server with one sandbox and one session, so each id completes on its own."""
    with ServerProcess(tmp_path_factory.mktemp("completion"), token=TOKEN, runtime="host") as srv:
        with Client(srv.url, TOKEN) as client:
            sb = client.claim_sandbox("default").sandbox_id
            sid = client.create_session(sb, {"command": ["sleep", "300"], "name": "completed"}).id
            yield srv, sb, sid


def shell(terminal: Terminal, argv: list[str], server, home: Path) -> subprocess.Popen:
    env = {"PATH": BIN + os.pathsep + os.environ["PATH"], "HOME": str(home), "TERM": "xterm",
           "SESSIOND_URL": server.url, "SESSIOND_TOKEN": TOKEN, "PS1": "$ ", "PROMPT": "$ "}
    return subprocess.Popen(argv, stdin=terminal.slave, stdout=terminal.slave, stderr=terminal.slave, cwd=home,
                            env=env, start_new_session=True, preexec_fn=take_terminal)


def screen_text(data: bytes) -> str:
    """What the terminal shows: a line editor paints text with styles, backspaces and redraws."""
    screen = pyte.Screen(160, 50)
    pyte.ByteStream(screen).feed(data)
    return "\n".join(line.rstrip() for line in screen.display)


def expect_text(terminal: Terminal, needle: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while needle not in screen_text(terminal.seen):
        left = deadline - time.monotonic()
        assert left > 0, f"{needle!r} not on the screen:\n{screen_text(terminal.seen)}"
        ready, _, _ = select.select([terminal.master], [], [], left)
        if ready:
            terminal.seen += os.read(terminal.master, 65536)


def complete_and_run(terminal: Terminal, sb: str, sid: str) -> None:
    terminal.type(b"sessionctl sess\t")
    expect_text(terminal, "sessionctl session")
    terminal.type(b"g\t")
    expect_text(terminal, "sessionctl session get")
    terminal.type(b"\t")  # the only sandbox
    expect_text(terminal, f"session get {sb}")
    terminal.type(b"\t")  # its only session
    expect_text(terminal, f"{sb} {sid}")
    terminal.type(b"\r")  # and the line runs: the completed ids are the right ones
    expect_text(terminal, "completed")  # the session's name in `session get`
    expect_text(terminal, "phase")


def completion_line(shell: str) -> bytes:
    """The line of docs/cli.md's "completion" block for ``shell``, as printed."""
    (line,) = [line for line in block("completion").text.splitlines() if f"completion {shell}" in line]
    return line.encode()


@pytest.mark.timeout(90)
def test_bash_completes_verbs_then_sandbox_and_session_ids_from_the_server(lone_server, tmp_path):
    server, sb, sid = lone_server
    terminal = Terminal()
    proc = shell(terminal, ["bash", "--norc", "--noprofile", "-i"], server, tmp_path)
    try:
        terminal.type(completion_line("bash") + b"\r")  # as docs/cli.md prints it
        terminal.type(b"echo loaded-$?\r")
        terminal.expect(b"loaded-0")
        complete_and_run(terminal, sb, sid)
        terminal.type(b"exit\r")
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.wait()
        terminal.close()


@pytest.mark.timeout(90)
@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed (.ci/run installs it)")
def test_zsh_completes_verbs_then_sandbox_and_session_ids_from_the_server(lone_server, tmp_path):
    server, sb, sid = lone_server
    terminal = Terminal()
    proc = shell(terminal, ["zsh", "-f", "-i"], server, tmp_path)
    try:
        terminal.type(b"autoload -U compinit && compinit -u\r")
        terminal.type(completion_line("zsh") + b"\r")  # as docs/cli.md prints it
        terminal.type(b"echo loaded-$?\r")
        terminal.expect(b"loaded-0")
        complete_and_run(terminal, sb, sid)
        terminal.type(b"exit\r")
        assert proc.wait(20) == 0
    finally:
        proc.kill()
        proc.wait()
        terminal.close()
