"""Durability across a kill -9 of the server, and isolation between bwrap sandboxes.

Each test runs its own server on its own data directory.
"""
from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.conftest import make_http
from tests.helpers import (
    SSEReader, all_events, claim_sandbox, create_session, err, get_session, journal_tail,
    ok, output_bytes, run_to_exit, spath, wait_event, write_input,
)
from tests.serverproc import ServerProcess

TOKEN = "durability-token"
CAT = {"command": ["/bin/cat"]}


def drain(sse: SSEReader, timeout=10) -> list[dict]:
    """Every event the subscriber got until its stream ended."""
    got = []
    while (frame := sse.next_frame(timeout)) is not None:
        if frame["data"] is not None:
            got.append(json.loads(frame["data"]))
    return got


def sandbox_generation(http, sb) -> int:
    return ok(http.get(f"/api/v1/sandboxes/{sb}"), 200, allow_nulls=True)["runtime_generation"]


def test_an_accepted_input_survives_a_kill_and_no_seq_is_reused(tmp_path):
    with ServerProcess(tmp_path / "data", token=TOKEN) as srv:
        with make_http(srv.url, TOKEN) as http:
            sb = claim_sandbox(http)
            generation_before = sandbox_generation(http, sb)
            first = create_session(http, sb, CAT)
            sid, first_attempt = first["id"], first["attempt"]
            sse = SSEReader(srv.url, spath(sb, sid, "/events/stream"), token=TOKEN)
            try:
                seen = sse.read_until(lambda e: e["type"] == "attempt.starting")
                receipt = write_input(http, sb, sid, "before-crash", "hello\n")
                srv.kill()
                delivered = [json.loads(f["data"]) for f in seen] + drain(sse)
            finally:
                sse.close()
        assert receipt["attempt_id"] == first_attempt["id"]

        srv.restart()
        with make_http(srv.url, TOKEN) as http:
            describe = lambda: journal_tail(http, sb, sid)  # noqa: E731
            recovered = wait_event(http, sb, sid, lambda e: (
                e["type"] == "attempt.starting" and e.get("reason") == "runtime_recovered"))
            journal = all_events(http, sb, sid)
            by_seq = {e["seq"]: e for e in journal}
            seqs = [e["seq"] for e in journal]
            assert seqs == sorted(set(seqs)), describe()

            accepted = [e for e in journal if e["type"] == "input.accepted"]
            assert [e["attempt_id"] for e in accepted] == [first_attempt["id"]], describe()
            for event in delivered:  # what a subscriber saw was committed, and stays
                assert by_seq.get(event["seq"]) == event, f"{event} lost or changed\n{describe()}"

            replaced = [e for e in journal if e.get("reason") == "runtime_replaced"]
            assert len(replaced) == 1 and replaced[0]["attempt_id"] == first_attempt["id"], describe()
            assert "exit_code" not in replaced[0]
            before_crash = max([e["seq"] for e in delivered] + [accepted[0]["seq"]])
            after_crash = [e for e in journal if e["seq"] >= replaced[0]["seq"]]
            assert min(e["seq"] for e in after_crash) > before_crash, describe()

            session = get_session(http, sb, sid)
            new_attempt = session["attempt"]
            assert new_attempt["id"] == recovered["attempt_id"] != first_attempt["id"]
            assert new_attempt["number"] == 2
            assert new_attempt["runtime_generation"] > first_attempt["runtime_generation"]
            assert recovered["runtime_generation"] > replaced[0]["runtime_generation"]
            assert sandbox_generation(http, sb) > generation_before

            # The receipt survived too: the old input_id now belongs to a replaced attempt.
            resp = http.post(spath(sb, sid, "/inputs"),
                             json={"input_id": "before-crash", "data_base64": "aGVsbG8K"})
            err(resp, 409, "session_conflict")

            later = write_input(http, sb, sid, "after-crash", "again\n")
            assert later["attempt_id"] == new_attempt["id"]
            wait_event(http, sb, sid, lambda e: e["type"] == "output"
                       and e["attempt_id"] == new_attempt["id"])
            journal = all_events(http, sb, sid)
            new_accepted = [e for e in journal if e["type"] == "input.accepted"][-1]
            assert new_accepted["seq"] > before_crash
            assert output_bytes(e for e in journal if e.get("attempt_id") == new_attempt["id"]) \
                == b"again\n"


def test_lifecycle_replies_survive_a_kill(tmp_path):
    with ServerProcess(tmp_path / "data", token=TOKEN) as srv:
        with make_http(srv.url, TOKEN) as http:
            sb = claim_sandbox(http)
            kept = create_session(http, sb, CAT, key="kept")
            stopped = create_session(http, sb, CAT)
            deleted = create_session(http, sb, CAT, key="deleted")
            ok(http.put(spath(sb, kept["id"]), json={**CAT, "name": "renamed"}), 200)
            ok(http.put(spath(sb, stopped["id"], "/desired-state"), json={"state": "stopped"}), 200)
            ok(http.delete(spath(sb, deleted["id"])), 200)
            srv.kill()
        srv.restart()
        with make_http(srv.url, TOKEN) as http:
            listed = ok(http.get(spath(sb)), 200)["sessions"]
            assert [s["id"] for s in listed] == [kept["id"], stopped["id"]]
            renamed = get_session(http, sb, kept["id"])
            assert (renamed["spec"]["name"], renamed["spec_version"]) == ("renamed", 2)
            still = get_session(http, sb, stopped["id"])
            assert (still["phase"], still["attempt"]["number"]) == ("stopped", 1)
            assert still["spec"]["lifecycle"]["desired_state"] == "stopped"
            err(http.post(spath(sb), json=CAT, headers={"Idempotency-Key": "kept"}), 409,
                "session_conflict")  # the key is bound to a spec that was updated
            fresh = create_session(http, sb, CAT, key="deleted")  # the key was freed
            assert fresh["id"] != deleted["id"]


def find_file_with(root, name, content: bytes):
    for dirpath, _, files in os.walk(root):
        if name in files:
            path = os.path.join(dirpath, name)
            try:
                with open(path, "rb") as fh:
                    if fh.read() == content:
                        return path
            except OSError:
                continue
    return None


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_bwrap_sandboxes_see_neither_each_others_workspace_nor_the_server_data(tmp_path):
    data_dir = tmp_path / "data"
    with ServerProcess(data_dir, token=TOKEN, runtime="bwrap") as srv, \
            make_http(srv.url, TOKEN) as http:
        a, b = claim_sandbox(http), claim_sandbox(http)
        exited, out = run_to_exit(http, a, ["sh", "-c", "echo secret > /workspace/x"])
        assert exited["exit_code"] == 0, out
        exited, out = run_to_exit(http, a, ["sh", "-c", "cat x"])  # cwd is /workspace
        assert (exited["exit_code"], out) == (0, b"secret\n")  # the control: A sees its file

        exited, out = run_to_exit(http, b, ["sh", "-c", "ls -A /workspace; cat /workspace/x"])
        assert exited["exit_code"] != 0, out
        assert b"secret" not in out and b"x" not in out.split(), out

        exited, out = run_to_exit(http, b, ["ls", str(data_dir)])
        assert exited["exit_code"] != 0, f"B can list the server data dir: {out!r}"

        host_copy = find_file_with(data_dir, "x", b"secret\n")
        if host_copy is not None:  # A's workspace lives in the data dir: B must not reach it
            exited, out = run_to_exit(http, b, ["cat", host_copy])
            assert exited["exit_code"] != 0 and b"secret" not in out, host_copy
