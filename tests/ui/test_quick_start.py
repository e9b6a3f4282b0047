"""The README's quick start, as a newcomer follows it: the block runs as printed in a terminal
against the set-up's server and ends attached to a shell in a sandbox; the console address it
prints opens, in Chromium, the sandbox list, then the sandbox, then the session, whose terminal is
the same shell: what one side types the other shows. ``exit`` ends the shell and the block."""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from session_supervisor.client import Client
from tests.client.test_attach import Terminal, take_terminal
from tests.docs_blocks import ROOT, SetUpServer, block, docs_env
from tests.helpers import wait_for

from .test_terminal import rows, type_line


@pytest.fixture
def setup_server(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the set-up's server runs the hardened runtime: root")
    server = SetUpServer(tmp_path / "home")
    server.start()
    yield server
    server.stop()


@pytest.mark.timeout(120)
def test_the_quick_start_reaches_one_shell_from_the_terminal_and_from_the_console(page, setup_server):
    quick = block("quick-start")
    terminal = Terminal()
    terminal.set_size(30, 100)
    proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", quick.text], cwd=ROOT,
                            env=docs_env(setup_server.home, TERM="xterm-256color"), stdin=terminal.slave,
                            stdout=terminal.slave, stderr=terminal.slave, start_new_session=True,
                            preexec_fn=take_terminal)
    try:
        terminal.expect(b"Ctrl-]", timeout=60)  # attached: the CLI says how to detach
        url = re.search(rb"console: (http://127\.0\.0\.1:8780/ui/#token=\S+)", terminal.seen).group(1).decode()
        with Client(setup_server.url, setup_server.token) as client:
            (sandbox,) = client.list_sandboxes()
            (session,) = client.list_sessions(sandbox.id)

        page.goto(url)  # the newcomer's way in: the list, the sandbox, the session
        page.click(f"#sandboxes a[href='#/sandboxes/{sandbox.id}']")
        page.click(f"a[href='#/sandboxes/{sandbox.id}/sessions/{session.id}']")
        page.wait_for_selector("#term-status[data-state=live]")
        type_line(page, "echo from-the-browser")
        terminal.expect(b"from-the-browser", count=2)  # echoed as typed, then printed
        terminal.type(b"echo from-the-terminal\r")
        wait_for(lambda: any(r.strip() == "from-the-terminal" for r in rows(page)),
                 describe=lambda: "\n".join(rows(page)))

        terminal.type(b"exit\r")  # the shell ends, and attach with it
        assert proc.wait(30) == 0, terminal.seen[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        terminal.close()
        with Client(setup_server.url, setup_server.token) as client:
            for sb in client.list_sandboxes():
                client.delete_sandbox(sb.id)
