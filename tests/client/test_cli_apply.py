"""``sessionctl apply -f sessions.toml`` through its real entry point: create, no-op, replace, prune.

A second apply of the same file changes nothing (no new attempt in any journal); after an edit
of one session's argv only that session gets a new attempt; ``--dry-run`` prints the plan and
changes nothing; ``--prune`` removes what the file no longer names.
"""
from __future__ import annotations

import json

from session_supervisor.client import Client
from tests.client.test_cli import sessionctl
from tests.helpers import TOKEN

FILE = """\
[sandboxes.web]                      # the file's own name for a sandbox
template = "default"

[sandboxes.web.sessions.server]      # the file's own name for a session in it
command = ["sh", "-c", "echo serving; exec sleep 300"]
cwd = "/workspace"

[sandboxes.web.sessions.worker]
command = ["sh", "-c", "echo working v1; exec sleep 300"]
env = { MODE = "batch" }
restart = "on_failure"
max_restarts = 3

[sandboxes.tools.sessions.shell]
command = ["cat"]
pty = true
rows = 30
cols = 100
"""


def apply(server, path, *flags):
    return sessionctl(server, "apply", "-f", str(path), *flags)


def starts(client: Client, sb: str, sid: str) -> int:
    return sum(1 for e in client.list_events(sb, sid, after=0).events if e.type == "attempt.starting")


def state(path):
    servers = json.loads((path.parent / (path.name + ".state.json")).read_text())["servers"]
    return next(iter(servers.values()))["sandboxes"]


def test_apply_creates_then_a_second_apply_changes_nothing_and_an_edit_replaces_only_that_session(server, tmp_path):
    path = tmp_path / "sessions.toml"
    path.write_text(FILE)
    first = apply(server, path)
    assert first.returncode == 0, first.stderr
    assert "applied: 5 created" in first.stdout, first.stdout  # two sandboxes, three sessions
    ids = state(path)
    web, tools = ids["web"]["id"], ids["tools"]["id"]
    with Client(server.url, TOKEN) as client:
        try:
            sessions = {name: rec["id"] for name, rec in ids["web"]["sessions"].items()}
            server_sid, worker_sid = sessions["server"], sessions["worker"]
            worker = client.get_session(web, worker_sid)
            assert worker.spec["env"]["MODE"] == "batch" and worker.name == "worker"
            assert worker.spec["lifecycle"]["restart"] == {**worker.spec["lifecycle"]["restart"],
                                                            "policy": "on_failure", "max_restarts": 3}
            shell = client.get_session(tools, ids["tools"]["sessions"]["shell"]["id"])
            assert shell.spec["io"]["mode"] == "pty" and shell.spec["io"]["terminal"]["rows"] == 30
            before = {sid: (starts(client, web, sid), client.get_session(web, sid).spec_version)
                      for sid in (server_sid, worker_sid)}

            again = apply(server, path)
            assert again.returncode == 0 and "applied: no changes" in again.stdout, again.stdout
            assert again.stdout.count("unchanged") == 5
            assert {sid: (starts(client, web, sid), client.get_session(web, sid).spec_version)
                    for sid in (server_sid, worker_sid)} == before  # no new attempt, no new spec

            path.write_text(FILE.replace("working v1", "working v2"))
            edited = apply(server, path)
            assert edited.returncode == 0 and "applied: 1 updated" in edited.stdout, edited.stdout
            assert f"update     session web/worker  {worker_sid}" in edited.stdout
            assert starts(client, web, worker_sid) == before[worker_sid][0] + 1
            assert client.get_session(web, worker_sid).spec["command"][2].startswith("echo working v2")
            assert starts(client, web, server_sid) == before[server_sid][0]  # the other one untouched
            assert state(path)["web"]["sessions"]["worker"]["id"] == worker_sid  # replaced in place
        finally:
            for sb in (web, tools):
                try:
                    client.delete_sandbox(sb)
                except Exception:
                    pass


def test_dry_run_prints_the_plan_and_prune_removes_what_the_file_no_longer_names(server, tmp_path):
    path = tmp_path / "sessions.toml"
    path.write_text(FILE)
    assert apply(server, path).returncode == 0
    ids = state(path)
    web, tools = ids["web"]["id"], ids["tools"]["id"]
    worker_sid = ids["web"]["sessions"]["worker"]["id"]
    with Client(server.url, TOKEN) as client:
        try:
            path.write_text(FILE.split("[sandboxes.web.sessions.worker]")[0])  # worker and tools gone
            plan = apply(server, path, "--prune", "--dry-run")
            assert plan.returncode == 0, plan.stderr
            assert f"delete     session web/worker  {worker_sid} (no longer in the file)" in plan.stdout
            assert f"delete     sandbox tools  {tools} (no longer in the file)" in plan.stdout
            assert "plan (dry run, nothing changed): 2 to delete" in plan.stdout, plan.stdout
            assert client.get_session(web, worker_sid).id == worker_sid  # still there
            assert client.get_sandbox(tools).id == tools
            assert state(path) == ids  # the state file is not touched either

            kept = apply(server, path)  # without --prune nothing is removed
            assert "applied: no changes" in kept.stdout and client.get_sandbox(tools).id == tools

            pruned = apply(server, path, "--prune")
            assert pruned.returncode == 0 and "applied: 2 deleted" in pruned.stdout, pruned.stdout
            assert [s.id for s in client.list_sessions(web)] == [ids["web"]["sessions"]["server"]["id"]]
            assert tools not in [b.id for b in client.list_sandboxes()]
            assert set(state(path)) == {"web"} and set(state(path)["web"]["sessions"]) == {"server"}
        finally:
            for sb in (web, tools):
                try:
                    client.delete_sandbox(sb)
                except Exception:
                    pass


def test_a_file_that_cannot_be_applied_is_one_line_naming_the_file_and_line(server, tmp_path):
    path = tmp_path / "sessions.toml"
    path.write_text('[sandboxes.web.sessions.a]\ncommand = ["true"]\nenv = { A = }\n')
    bad = apply(server, path)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and bad.stderr.startswith(f"sessionctl: {path}: ")
    assert "(at line 3, column" in bad.stderr, bad.stderr
    path.write_text('[sandboxes.web.sessions.a]\ncommand = ["true"]\ncomand = ["typo"]\n')
    typo = apply(server, path)
    assert typo.returncode == 2 and "[sandboxes.web.sessions.a]: unknown key(s) ['comand']" in typo.stderr
    assert not (tmp_path / "sessions.toml.state.json").exists()
