"""``sessionctl``: output formats, exit codes and one-line errors (docs/cli.md's walkthrough runs in
tests/test_docs_blocks.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path


from session_supervisor.client.cli import EXIT
from tests.helpers import TOKEN, wait_for

ROOT = Path(__file__).resolve().parents[2]
def cli_env(server) -> dict:
    bin_dir = str(Path(sys.executable).parent)  # where pip put the sessionctl script
    return {**os.environ, "SESSIOND_URL": server.url, "SESSIOND_TOKEN": TOKEN,
            "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def sessionctl(server, *args, input_=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "session_supervisor.client.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, input=input_, env={**cli_env(server), **(env or {})})


def test_json_output_is_exactly_the_api_data_and_quiet_prints_ids(server, client, sandbox):
    session = client.create_session(sandbox, {"command": ["/bin/cat"], "name": "j"})
    shown = sessionctl(server, "session", "get", sandbox, session.id, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == client.get_session(sandbox, session.id).raw
    listed = sessionctl(server, "-o", "json", "session", "list", sandbox)
    assert json.loads(listed.stdout) == client.list_sessions(sandbox).raw
    assert sessionctl(server, "session", "list", sandbox, "-q").stdout.split() == [session.id]
    table = sessionctl(server, "session", "list", sandbox).stdout.splitlines()
    assert table[0].split()[:3] == ["ID", "NAME", "PHASE"] and table[1].split()[:3] == [session.id, "j", "running"]


def test_create_flags_and_a_yaml_spec_file_build_the_spec(server, client, sandbox, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("command: [/bin/cat]\nname: from-yaml\nlifecycle:\n  restart:\n    policy: always\n")
    made = sessionctl(server, "session", "create", sandbox, "--spec-file", str(spec), "--env", "A=1",
                      "--restart", "on_failure", "--runtime-recovery", "stop", "--readiness", "output",
                      "--ready-output", "go", "--cwd", "/workspace", "-o", "json", "--", "sh", "-c", "echo go; cat")
    assert made.returncode == 0, made.stderr
    data = json.loads(made.stdout)["spec"]
    assert data["command"] == ["sh", "-c", "echo go; cat"] and data["name"] == "from-yaml"
    assert data["env"] == {"A": "1"} and data["cwd"] == "/workspace"
    assert data["lifecycle"]["restart"]["policy"] == "on_failure" and data["lifecycle"]["runtime_recovery"] == "stop"
    assert data["readiness"]["type"] == "output" and data["readiness"]["output"] == "go"
    pty = sessionctl(server, "session", "create", sandbox, "--pty", "--rows", "30", "--cols", "100", "-o", "json",
                     "--", "/bin/cat")
    assert json.loads(pty.stdout)["spec"]["io"] == {"mode": "pty", "terminal": {"rows": 30, "cols": 100,
                                                                                "term": "xterm-256color"}}
    agent = sessionctl(server, "session", "create", sandbox, "--harness", "pi", "-o", "json")
    assert json.loads(agent.stdout)["spec"]["command"] == ["pi", "--mode", "rpc"]


def test_errors_are_one_line_on_stderr_with_an_exit_code_per_kind(server, sandbox):
    missing = sessionctl(server, "session", "get", sandbox, "ses-00000000-000")
    assert missing.returncode == EXIT["not_found"] == 3
    assert missing.stderr == "sessionctl: session_not_found (404): session not found\n" and missing.stdout == ""
    bad = sessionctl(server, "session", "signal", sandbox, "ses-00000000-000", "NOPE")
    assert bad.returncode == EXIT["invalid"] and bad.stderr.count("\n") == 1
    denied = sessionctl(server, "sandbox", "list", env={"SESSIOND_TOKEN": "wrong"})
    assert denied.returncode == EXIT["auth"] and "unauthorized" in denied.stderr
    gone = sessionctl(server, "--url", "http://127.0.0.1:9", "sandbox", "list")
    assert gone.returncode == EXIT["unavailable"] and gone.stderr.count("\n") == 1
    usage = sessionctl(server, "session", "create", sandbox)
    assert usage.returncode == EXIT["usage"]


def test_input_log_signal_and_expired_cursor_through_the_cli(server, client, sandbox):
    session = client.create_session(sandbox, {"command": ["/bin/cat"]})
    fed = sessionctl(server, "session", "input", sandbox, session.id, "--file", "-", "--eof",
                     "--attempt-id", session.attempt_id, "--input-id", "cli-1", input_="piped bytes\n")
    assert fed.returncode == 0 and "cli-1" in fed.stdout
    again = sessionctl(server, "session", "input", sandbox, session.id, "--file", "-", "--eof",
                       "--attempt-id", session.attempt_id, "--input-id", "cli-1", "-o", "json", input_="piped bytes\n")
    assert json.loads(again.stdout)["duplicate"] is True
    until = sessionctl(server, "session", "events", sandbox, session.id, "--follow", "--until", "attempt.exited")
    assert until.returncode == 0 and until.stdout.splitlines()[-1].split()[2] == "attempt.exited"
    assert sessionctl(server, "session", "log", sandbox, session.id).stdout == "piped bytes\n"
    jsonl = sessionctl(server, "session", "events", sandbox, session.id, "--after", "2", "-o", "json")
    assert json.loads(jsonl.stdout.splitlines()[0])["seq"] == 3
    big = client.create_session(sandbox, {"command": ["head", "-c", "2000000", "/dev/zero"],
                                          "event_retention": {"max_bytes": 256 * 1024}})
    wait_for(lambda: any(e.type == "attempt.exited" for e in client.history(sandbox, big.id).events), timeout=15)
    expired = sessionctl(server, "session", "events", sandbox, big.id)
    assert expired.returncode == EXIT["expired"] and "earliest=" in expired.stderr
    skipped = sessionctl(server, "session", "events", sandbox, big.id, "--skip-gap")
    assert skipped.returncode == 0 and skipped.stdout


def test_update_signal_resize_and_sandbox_verbs_through_the_cli(server, client, sandbox, tmp_path):
    pty = client.create_session(sandbox, {"command": ["/bin/cat"], "io": {"mode": "pty"}})
    assert sessionctl(server, "session", "resize", sandbox, pty.id, "30", "100").returncode == 0
    stale = sessionctl(server, "session", "resize", sandbox, pty.id, "30", "100", "--attempt-id", "att-0")
    assert stale.returncode == EXIT["conflict"] and "session attempt mismatch" in stale.stderr
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"command": ["/bin/cat", "-u"], "name": "updated"}))
    updated = sessionctl(server, "session", "update", sandbox, pty.id, "--spec-file", str(spec), "-o", "json")
    assert json.loads(updated.stdout)["spec"]["name"] == "updated"
    assert sessionctl(server, "session", "signal", sandbox, pty.id, "TERM").returncode == 0
    wait_for(lambda: client.get_session(sandbox, pty.id).phase == "exited")
    shown = sessionctl(server, "sandbox", "get", sandbox)
    assert re.search(rf"^id\s+{sandbox}$", shown.stdout, re.M) and re.search(r"^status\s+running$", shown.stdout, re.M)
    assert sandbox in sessionctl(server, "sandbox", "list", "-q").stdout.split()
    assert json.loads(sessionctl(server, "sandbox", "status", sandbox, "-o", "json").stdout)["status"] == "running"
    paused = sessionctl(server, "sandbox", "pause", sandbox, "-o", "json")
    assert json.loads(paused.stdout)["sandbox_id"] == sandbox
    resumed = sessionctl(server, "sandbox", "resume", sandbox, "-o", "json")
    assert json.loads(resumed.stdout) == {"sandbox_id": sandbox, "resumed": True}


def test_help_has_the_exit_codes_and_every_verb_an_example_and_version_prints_it(server):
    top = sessionctl(server, "--help")
    assert top.returncode == 0
    assert "exit codes:" in top.stdout
    for code, meaning in ((3, "not found"), (6, "unauthorized"), (8, "unavailable"), (130, "interrupted")):
        assert re.search(rf"\b{code}\s+{meaning}", top.stdout), (code, top.stdout)
    from session_supervisor.client.cli import build_parser
    import session_supervisor.client.cli as cli_module
    nouns = build_parser(cli_module)._subparsers._group_actions[0].choices
    for noun, parser in nouns.items():
        if parser._subparsers is None:  # a noun that is its own verb (run, apply, completion)
            text = parser.format_help()
            assert re.search(r"examples?:\n  .*sessionctl ", text), noun
            assert all(action.help for action in parser._actions), noun
            continue
        for verb, verb_parser in parser._subparsers._group_actions[0].choices.items():
            text = verb_parser.format_help()
            assert "example:\n  " in text and "sessionctl " in text.split("example:")[1], (noun, verb)
            for action in verb_parser._actions:
                assert action.help, (noun, verb, action.dest)  # every option and positional says what it is
    version = sessionctl(server, "--version")
    assert version.returncode == 0 and re.fullmatch(r"sessionctl \d+\.\d+\.\d+\n", version.stdout), version.stdout


def test_an_unreachable_server_is_one_line_that_names_the_url(server):
    gone = sessionctl(server, "--url", "http://127.0.0.1:9", "session", "get", "sb-x", "ses-x")
    assert gone.returncode == EXIT["unavailable"] and gone.stderr.count("\n") == 1
    assert "http://127.0.0.1:9/" in gone.stderr, gone.stderr
