"""What a server start finds on disk: a store it cannot open stays a listed, deletable sandbox
(``status: failed`` with its reason), and a claim that a kill -9 cut short leaves no directory
that the list does not show."""
from __future__ import annotations

import contextlib
import random
import sqlite3
import threading

import httpx

from tests.conftest import make_http
from tests.helpers import TOKEN, err, listed_sandbox_ids, ok, wait_for
from tests.serverproc import ServerProcess

U = "/api/v1/sandboxes"


def test_a_sandbox_whose_store_cannot_load_is_listed_as_failed_and_can_be_deleted(tmp_path):
    server = ServerProcess(tmp_path / "data", token=TOKEN).start()
    try:
        with make_http(server.url) as http:
            sb = ok(http.post(U, json={"template": "default"}), 201)["sandbox_id"]
            ok(http.post(f"{U}/{sb}/refresh", json={}), 200)
            ok(http.post(f"{U}/{sb}/refresh", json={}), 200)
        server.stop()
        db = server.data_dir / "sandboxes" / sb / "state" / "journal.sqlite"
        with contextlib.closing(sqlite3.connect(db)) as con:  # a gap: version 2 is gone, no snapshot
            con.execute("DELETE FROM stored_events WHERE originator_id=? AND originator_version=2", (sb,))
            con.execute("DELETE FROM stored_snapshots WHERE originator_id=?", (sb,))
            con.commit()
        server.start()
        with make_http(server.url) as http:
            got = ok(http.get(f"{U}/{sb}"), 200)
            assert got["status"] == "failed" and "could not be opened" in got["status_reason"], got
            listed = ok(http.get(U), 200)["sandboxes"]
            assert [s["status"] for s in listed if s["id"] == sb] == ["failed"]
            refused = err(http.post(f"{U}/{sb}/sessions", json={"command": ["true"]}), 503)
            assert "failed" in refused["message"]
            err(http.post(f"{U}/{sb}/resume", json={}), 503, "sandbox_resume_failed")
            ok(http.delete(f"{U}/{sb}"), 202)
            err(http.get(f"{U}/{sb}"), 404)
        wait_for(lambda: not (server.data_dir / "sandboxes" / sb).exists())  # removed after the 202
    finally:
        server.stop()


def test_kill_9_during_claims_leaves_no_sandbox_directory_the_list_does_not_show(tmp_path):
    rng = random.Random(7)
    server = ServerProcess(tmp_path / "data", token=TOKEN)
    strays_seen = 0
    server.start()
    try:
        for attempt in range(20):
            stop = threading.Event()

            def claim_until_stopped():
                with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"},
                                  timeout=5) as client:
                    while not stop.is_set():
                        with contextlib.suppress(httpx.HTTPError):
                            client.post(U, json={"template": "default"})
            claimers = [threading.Thread(target=claim_until_stopped) for _ in range(3)]
            for thread in claimers:
                thread.start()
            threading.Event().wait(rng.uniform(0.05, 0.3))
            server.kill()
            stop.set()
            for thread in claimers:
                thread.join(10)
            on_disk = {p.name for p in (server.data_dir / "sandboxes").iterdir()}
            server.start()
            with make_http(server.url) as http:
                listed = listed_sandbox_ids(http)
            after = {p.name for p in (server.data_dir / "sandboxes").iterdir()}
            strays_seen += len(on_disk - listed)
            assert after == listed, (attempt, sorted(after - listed))
        print(f"\n20 kill -9 rounds: {strays_seen} unlisted sandbox directories found and removed at start")
    finally:
        server.stop()
