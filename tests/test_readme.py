"""The README's walkthroughs run verbatim against a real server (only the address and data dir differ).

The server is started as the README's set-up starts it: no flags, so it generates its
token file and requires it; the blocks find the token in that file (the default data dir
``~/.local/share/sessiond`` is replaced by the test's own).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serverproc import ServerProcess

README = Path(__file__).resolve().parent.parent / "README.md"
DEFAULT_URL = "http://127.0.0.1:8780"
DEFAULT_DATA_DIR = "~/.local/share/sessiond"


def blocks_after(heading: str, language: str) -> list[str]:
    text = README.read_text()
    section = text[text.index(heading):]
    section = section[:section.find("\n## ", 1)] if "\n## " in section[1:] else section
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def block_after(heading: str, language: str) -> str:
    return blocks_after(heading, language)[0]


@pytest.fixture(scope="module")
def readme_server(tmp_path_factory):
    """A server started with no auth flags, as the README's set-up starts it."""
    server = ServerProcess(tmp_path_factory.mktemp("readme"), token=None, runtime="host")
    server.start()
    yield server
    server.stop()


def localized(block: str, server: ServerProcess) -> str:
    return block.replace(DEFAULT_URL, server.url).replace(DEFAULT_DATA_DIR, str(server.data_dir))


def clean_env(server: ServerProcess) -> dict:
    """No SESSIOND_TOKEN: the examples must find the token file by themselves."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIOND_", "SB_"))}
    return {**env, "SESSIOND_DATA_DIR": str(server.data_dir)}


def sandboxes_left(server: ServerProcess) -> list:
    from session_supervisor.client import Client
    with Client(server.url, server.token) as client:
        return [sb.id for sb in client.list_sandboxes()]


def test_the_readme_curl_walkthrough_runs_and_cleans_up(readme_server):
    script = localized(block_after("## A walkthrough with curl", "sh"), readme_server)
    script = script.replace('curl -sN -H "$AUTH" "$U/$SB/sessions/$SID/events/stream?after=0"',
                            'curl -sN --max-time 1 -H "$AUTH" "$U/$SB/sessions/$SID/events/stream?after=0" || true')
    done = subprocess.run(["bash", "-ec", script], capture_output=True, text=True, timeout=60,
                          env=clean_env(readme_server))
    assert done.returncode == 0, done.stderr
    assert '"type":"attempt.exited"' in done.stdout
    assert "event: session.created" in done.stdout
    assert re.search(r'^sessiond_attempts_exited_total\{reason="\w+"\} [1-9]', done.stdout, re.M), done.stdout
    assert sandboxes_left(readme_server) == []


def test_the_readme_sdk_walkthrough_runs(readme_server):
    code = localized(block_after("## A walkthrough with the official SDK", "python"), readme_server)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=clean_env(readme_server))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].endswith("attempt.exited")
    assert sandboxes_left(readme_server) == []


def test_the_readme_python_client_example_finds_the_token_file_by_itself(readme_server):
    code = localized(block_after("## Python client", "python"), readme_server)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=clean_env(readme_server))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].split()[1] == "attempt.exited"
    assert sandboxes_left(readme_server) == []


def test_the_readme_aerolvm_section_runs_with_the_sdk_environment(readme_server):
    (exports,) = blocks_after("## The AeroLVM facade", "sh")
    (code,) = blocks_after("## The AeroLVM facade", "python")
    script = localized(exports, readme_server) + f'exec {sys.executable} -c "$CODE"\n'
    done = subprocess.run(["bash", "-ec", script], capture_output=True, text=True, timeout=60,
                          env={**clean_env(readme_server), "CODE": code})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["health ok", "exit {'code': 0}", "True"], done.stdout
    assert sandboxes_left(readme_server) == []


def test_the_readme_set_up_command_refreshes_the_package_lists_first():
    (setup, _tests) = blocks_after("## Set-up: two commands", "sh")[:2]
    assert setup.startswith("apt-get update && apt-get install -y bubblewrap")
