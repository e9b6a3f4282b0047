"""The README's "browser console" commands, run verbatim (only the port differs), then the
printed address opened in Chromium."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.helpers import wait_for
from tests.serverproc import free_port
from tests.test_readme import block_after


def test_the_readme_command_starts_a_server_whose_printed_address_opens_the_console(page, tmp_path):
    port = free_port()
    script = block_after("## The browser console", "sh").replace("8780", str(port))
    env = {**os.environ, "HOME": str(tmp_path),  # the default data dir lives under HOME
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    output = tmp_path / "readme-output.txt"
    with open(output, "w") as sink:  # a file, not a pipe: the background server may write too
        shell = subprocess.Popen(["bash", "-ec", script], cwd=tmp_path, env=env, stdout=sink,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    try:
        printed = wait_for(lambda: next((line for line in output.read_text().splitlines()
                                         if line.startswith("open ")), None), timeout=30)
        assert printed.startswith(f"open http://127.0.0.1:{port}/ui/#token="), printed
        url = printed.removeprefix("open ")
        wait_for(lambda: _healthy(port), timeout=30)
        page.goto(url)
        page.wait_for_selector("#sandboxes >> text=no sandboxes yet")
        assert "#token=" not in page.url
    finally:
        os.killpg(shell.pid, signal.SIGTERM)  # bash and the sessiond it started in the background
        shell.wait(timeout=15)
        wait_for(lambda: not _healthy(port), timeout=20)


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


