"""The README's walkthroughs run verbatim against a real server (only the address differs)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serverproc import ServerProcess

README = Path(__file__).resolve().parent.parent / "README.md"
DEFAULT_URL = "http://127.0.0.1:8780"


def block_after(heading: str, language: str) -> str:
    text = README.read_text()
    section = text[text.index(heading):]
    match = re.search(rf"```{language}\n(.*?)```", section, re.S)
    return match.group(1)


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    """A server without a token, as the README starts it."""
    server = ServerProcess(tmp_path_factory.mktemp("readme"), token=None, runtime="host")
    server.start()
    yield server
    server.stop()


def test_the_readme_curl_walkthrough_runs(open_server):
    script = block_after("## A walkthrough with curl", "sh").replace(DEFAULT_URL, open_server.url)
    script = script.replace('curl -sN "$U/$SB/sessions/$SID/events/stream?after=0"',
                            'curl -sN --max-time 1 "$U/$SB/sessions/$SID/events/stream?after=0" || true')
    done = subprocess.run(["bash", "-ec", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert '"type":"attempt.exited"' in done.stdout
    assert "event: session.created" in done.stdout


def test_the_readme_sdk_walkthrough_runs(open_server):
    code = block_after("## A walkthrough with the official SDK", "python").replace(DEFAULT_URL, open_server.url)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].endswith("attempt.exited")


def test_the_readme_python_client_example_runs(open_server):
    code = block_after("## Python client", "python").replace(DEFAULT_URL, open_server.url)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].split()[1] == "attempt.exited"
