"""Every command block of README.md and docs/ runs as printed, against the set-up's server.

The server is started as the README's set-up starts it (``.venv/bin/sessiond serve``, no flags:
port 8780, the hardened runtime, its data dir and token under ``~/.local/share/sessiond``), with a
HOME of this module's own. Each block runs in the repository, in a clean environment (no
``SESSIOND_*`` variables, ``.venv/bin`` not on PATH: a block that needs it says so), and must end
with 0 and leave no sandbox behind. Blocks with needs of their own (a PostgreSQL cluster, an image
archive, Chromium, a terminal) name the test file that runs them in their marker.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys

import pytest

from session_supervisor.client import Client
from tests.docs_blocks import ROOT, RUNNABLE, SetUpServer, block, blocks, docs_env, run_block

def walkthrough_ok(out: str) -> bool:
    """The sessionctl walkthrough: its events in order, both outputs, the new attempts, the log."""
    events = [line for line in out.splitlines() if re.match(r"^\s+\d+\s+\d{4}-", line)]
    kinds = [line.split()[2] for line in events]
    return (kinds[:2] == ["session.created", "attempt.starting"] and kinds[-1] == "attempt.exited"
            and any('stdout "hello from the session\\n"' in line for line in events)
            and any('stdout "typed by the walkthrough\\n"' in line for line in events)
            and "input.accepted" in kinds
            and re.search(r"^phase\s+running$", out, re.M) is not None and re.search(r"#3 gen 1", out) is not None
            and out.count("hello from the session\n") >= 3 and "sandbox terminated successfully" in out)


def api_keys_ok(out: str) -> bool:
    """A team key was made, claimed into its team, and is listed without its secret."""
    listed = json.JSONDecoder().raw_decode(out[out.index('{"success"'):])[0]["data"]["api_keys"]
    return ([(k["name"], k["roles"]) for k in listed] == [("ci", ["developer"])]
            and listed[0]["key_value"].endswith("***") and "sandbox terminated successfully" in out)


# Blocks this module runs, with what their output must show.
HERE = {
    "curl-walkthrough": lambda out: '"type":"output"' in out and "sessiond_attempts_exited_total" in out,
    "sdk-install": lambda out: True,
    "sdk-walkthrough": lambda out: out.splitlines()[-1].endswith(" attempt.exited"),
    "aerolvm-install": lambda out: True,
    "aerolvm-sdk": lambda out: out.splitlines() == ["health ok", "exit {'code': 0}", "True"],
    "contexts-sdk": lambda out: "Hello, Sandbox0!" in out and "out err 3 crashed" in out,
    "contexts-cli": lambda out: "hello from a context" in out and "THE TASK" in out,
    "python-client": lambda out: " attempt.exited " in out,
    "api-keys": api_keys_ok,
    "network-walkthrough": lambda out: '"mode":"block-all"' in out,
    "console-address": lambda out: re.fullmatch(r"open http://127\.0\.0\.1:8780/ui/#token=\S+\n", out) is not None,
    "sessionctl-walkthrough": walkthrough_ok,
    "sessionctl-run": lambda out: out == "42\n",
}
RUN_WITH = {"aerolvm-env": "aerolvm-sdk"}  # a block run in the shell of another's test
NEEDS_HARDENED = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bwrap") is None,
                                    reason="the set-up's server runs the hardened runtime: root and bubblewrap")


def test_every_command_block_says_whether_a_test_runs_it_and_which():
    unmarked = [b.where() for b in blocks() if b.lang in RUNNABLE
                and not (b.marker.startswith("run:") or b.marker.startswith("not run:"))]
    assert unmarked == [], "blocks with no <!-- run: NAME --> or <!-- not run: why --> marker"
    bare = [b.where() for b in blocks() if b.lang == "" and b.text.strip()]
    assert bare == [], "a fence with no language: say sh, python, toml or text"
    names = [b.name for b in blocks() if b.name]
    assert len(names) == len(set(names)), "two blocks share a name"
    for b in blocks():
        if b.name is None or b.name in HERE or b.name in RUN_WITH or b.marker.startswith("run: by .ci/run"):
            continue
        assert b.runner_file, f"{b.where()}: {b.name} is run by no test here and names none"
        runner = ROOT / b.runner_file
        assert runner.exists() and f'"{b.name}"' in runner.read_text(), \
            f"{b.where()}: {b.runner_file} does not run block {b.name!r}"
    not_run = [b.marker for b in blocks() if b.marker.startswith("not run:")]
    assert all(len(m) > len("not run: ") + 20 for m in not_run), "a block not run says why"


def test_the_test_command_is_the_one_ci_runs():
    (tests,) = [b for b in blocks() if b.marker.startswith("run: by .ci/run")]
    assert tests.text.strip() in (ROOT / ".ci" / "run").read_text()


@pytest.fixture(scope="module")
def setup_server(tmp_path_factory):
    server = SetUpServer(tmp_path_factory.mktemp("home"))
    server.start()
    yield server
    server.stop()


def sandboxes_left(server) -> list[str]:
    with Client(server.url, server.token) as client:
        return [sb.id for sb in client.list_sandboxes(limit=200)]


@NEEDS_HARDENED
@pytest.mark.parametrize("name", list(HERE))
def test_the_block_runs_as_printed_against_the_set_ups_server(setup_server, name, tmp_path):
    b = block(name)
    env = docs_env(setup_server.home)
    if name == "aerolvm-sdk":  # run in the shell the environment block made
        shell = block("aerolvm-env").text + f'\n"{sys.executable}" -c "$AEROLVM_SDK"\n'
        done = run_block(type(b)(b.path, b.line, b.marker, "sh", shell), {**env, "AEROLVM_SDK": b.text})
    else:
        done = run_block(b, env)
    assert done.returncode == 0, f"{b.where()}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    assert HERE[name](done.stdout), f"{b.where()}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    assert sandboxes_left(setup_server) == [], f"{b.where()} left a sandbox behind"
