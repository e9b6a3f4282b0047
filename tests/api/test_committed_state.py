"""What the API shows of a session is what is committed: with a neighbour keeping the writer
and the disk busy, a GET that says ``exited`` is always followed by a journal read that holds
the ``attempt.exited`` (the live aggregate records an exit before the writer commits it)."""
from __future__ import annotations

from tests.conftest import make_http
from tests.helpers import TOKEN, ok
from tests.serverproc import ServerProcess

U = "/api/v1/sandboxes"
ROUNDS = 200
FLOOD = ["sh", "-c", "while :; do head -c 64M /dev/urandom; done"]
DISK = ["sh", "-c", "while :; do dd if=/dev/zero of=big bs=1M count=256 conv=fsync 2>/dev/null; rm big; done"]


def test_a_session_shown_exited_always_has_its_attempt_exited_in_the_journal(tmp_path):
    with ServerProcess(tmp_path / "data", token=TOKEN) as server, make_http(server.url) as http:
        neighbour = ok(http.post(U, json={"template": "default"}), 201)["sandbox_id"]
        for argv in (FLOOD, DISK):
            ok(http.post(f"{U}/{neighbour}/sessions", json={"command": argv}), 201)
        sb = ok(http.post(U, json={"template": "default"}), 201)["sandbox_id"]
        for _ in range(ROUNDS):
            sid = ok(http.post(f"{U}/{sb}/sessions", json={"command": ["true"]}), 201)["id"]
            for _poll in range(2000):
                session = ok(http.get(f"{U}/{sb}/sessions/{sid}"), 200)
                if session["phase"] == "exited":
                    break
            else:
                raise AssertionError(f"session {sid} never exited")
            page = ok(http.get(f"{U}/{sb}/sessions/{sid}/events", params={"after": 0}), 200)
            types = [e["type"] for e in page["events"]]
            assert "attempt.exited" in types, (sid, types, session)
            assert page["cursor"]["latest"] >= session["cursor"]["latest"]
            ok(http.delete(f"{U}/{sb}/sessions/{sid}"), 200)
        print(f"\n{ROUNDS} sessions shown exited next to a flood: every one had attempt.exited committed")
        ok(http.delete(f"{U}/{neighbour}"), 202)
        ok(http.delete(f"{U}/{sb}"), 202)
