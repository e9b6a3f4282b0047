"""A stop of a process a client had stopped (SIGSTOP) ends it within its grace period's first
moments: CONT follows TERM, so the process acts on TERM at once instead of sitting out the
whole grace period and then being killed."""
from __future__ import annotations

import time

from tests.conftest import make_http
from tests.helpers import TOKEN, ok, wait_for
from tests.serverproc import ServerProcess

U = "/api/v1/sandboxes"


def test_stopping_a_sigstopped_session_does_not_wait_out_its_grace_period(tmp_path):
    with ServerProcess(tmp_path / "data", token=TOKEN) as server, make_http(server.url) as http:
        sb = ok(http.post(U, json={"template": "default"}), 201)["sandbox_id"]
        spec = {"command": ["sleep", "600"], "lifecycle": {"stop_grace_period_seconds": 10}}
        sid = ok(http.post(f"{U}/{sb}/sessions", json=spec), 201)["id"]
        wait_for(lambda: ok(http.get(f"{U}/{sb}/sessions/{sid}"), 200)["phase"] == "running")
        ok(http.post(f"{U}/{sb}/sessions/{sid}/signals", json={"signal": "SIGSTOP"}), 202)
        started = time.monotonic()
        stopped = ok(http.put(f"{U}/{sb}/sessions/{sid}/desired-state", json={"state": "stopped"}), 200)
        took = time.monotonic() - started
        print(f"\nstop of a SIGSTOPped sleep with a 10 s grace period: {took * 1000:.0f} ms")
        assert stopped["attempt"].get("signal") == "TERM", stopped["attempt"]  # TERM ended it, not KILL
        ok(http.delete(f"{U}/{sb}"), 202)
