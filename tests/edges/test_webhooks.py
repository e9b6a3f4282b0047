"""Signed webhooks from a durable outbox, to a receiver this test runs on loopback (allowed by
``--allow-local-webhooks``): every listed event arrives and verifies with the SDK's own
``verify_webhook_signature``; with the receiver down for 10 s and the server killed with -9
meanwhile, every event still arrives once both are back (deduplicated by ``event_id``)."""
from __future__ import annotations

import http.server
import json
import threading
import time

import pytest
import sandbox0
from sandbox0 import verify_webhook_signature
from sandbox0.apispec.models.sandbox_config import SandboxConfig
from sandbox0.apispec.models.webhook_config import WebhookConfig

from tests.conftest import make_http
from tests.helpers import TOKEN, err, wait_for
from tests.serverproc import ServerProcess, free_port

SECRET = "webhook-secret"


class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST (raw body and headers); it can be taken
    down and brought back on the same port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.received: list[tuple[dict, bytes]] = []
        self._server = None

    def start(self) -> "Receiver":
        received = self.received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                received.append(({k.lower(): v for k, v in self.headers.items()}, raw))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        http.server.ThreadingHTTPServer.allow_reuse_address = True
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def events(self) -> list[dict]:
        return [json.loads(raw) for _, raw in list(self.received)]

    def types_for(self, sandbox_id: str) -> set[str]:
        return {e["event_type"] for e in self.events() if e["sandbox_id"] == sandbox_id}


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


def webhook_server(data_dir) -> ServerProcess:
    return ServerProcess(data_dir, token=TOKEN, runtime="host", extra_args=["--allow-local-webhooks"])


def claim(sdk, receiver: Receiver, watch_dir: str | None = None):
    return sdk.sandboxes.claim("default", config=SandboxConfig(
        webhook=WebhookConfig(url=receiver.url, secret=SECRET, **({"watch_dir": watch_dir} if watch_dir else {}))))


def test_every_listed_event_arrives_signed(tmp_path, receiver):
    with webhook_server(tmp_path / "data") as srv:
        sdk = sandbox0.Client(token=TOKEN, base_url=srv.url, timeout=30.0)
        sb = claim(sdk, receiver, "/workspace")
        wait_for(lambda: "sandbox.ready" in receiver.types_for(sb.id), timeout=10)
        assert sb.cmd("sh -c 'echo from the context'").exit_code == 0
        time.sleep(1.5)  # the file watch starts with the sweep
        sb.write_file("/workspace/note.txt", b"noted")
        sdk.sandboxes.pause(sb.id)
        sdk.sandboxes.resume(sb.id)
        sdk.sandboxes.delete(sb.id)
        wanted = {"sandbox.ready", "process.started", "process.exited", "file.modified", "sandbox.paused",
                  "sandbox.resumed", "sandbox.deleted"}
        wait_for(lambda: wanted <= receiver.types_for(sb.id), timeout=20,
                 describe=lambda: f"received {sorted(receiver.types_for(sb.id))}")
        sdk.close()
    for headers, raw in receiver.received:
        assert headers["content-type"] == "application/json"
        assert verify_webhook_signature(SECRET, raw, headers["x-sandbox0-signature"]), raw
        assert not verify_webhook_signature("another secret", raw, headers["x-sandbox0-signature"])
        assert list(json.loads(raw)) == ["event_id", "event_type", "timestamp", "sandbox_id", "team_id", "payload"]
    events = {e["event_type"]: e for e in receiver.events()}
    assert events["sandbox.deleted"]["event_id"] == f"evt_sandbox_deleted_{sb.id}"
    assert events["sandbox.deleted"]["payload"] == {"reason": "pod_deleted"}
    assert events["sandbox.ready"]["payload"]["sandbox_id"] == sb.id
    assert events["process.exited"]["payload"]["stdout_preview"] == "from the context\n"
    assert events["process.exited"]["payload"]["state"] == "stopped"
    files = [e["payload"] for e in receiver.events() if e["event_type"] == "file.modified"]
    assert {"event_type": "create", "path": "/workspace/note.txt"} in files or \
        any(f["path"] == "/workspace/note.txt" for f in files), files


def test_a_receiver_down_and_a_kill_9_lose_no_event(tmp_path, receiver):
    srv = webhook_server(tmp_path / "data").start()
    try:
        sdk = sandbox0.Client(token=TOKEN, base_url=srv.url, timeout=30.0)
        receiver.stop()
        down_at = time.monotonic()
        sb = claim(sdk, receiver)
        gone = claim(sdk, receiver)
        sdk.sandboxes.pause(sb.id)
        sdk.sandboxes.resume(sb.id)
        sdk.sandboxes.delete(gone.id)
        time.sleep(2)  # a few failed tries
        srv.kill()
        time.sleep(max(0.0, 10 - (time.monotonic() - down_at)))
        receiver.start()
        srv.start()
        wanted = {sb.id: {"sandbox.ready", "sandbox.paused", "sandbox.resumed"},
                  gone.id: {"sandbox.ready", "sandbox.deleted"}}
        wait_for(lambda: all(types <= receiver.types_for(sid) for sid, types in wanted.items()), timeout=45,
                 describe=lambda: f"received {[(e['sandbox_id'], e['event_type']) for e in receiver.events()]}")
        unique = {e["event_id"] for e in receiver.events()}
        assert len(unique) >= 5  # duplicates are allowed (at least once), holes are not
        for headers, raw in receiver.received:
            assert verify_webhook_signature(SECRET, raw, headers["x-sandbox0-signature"])
        sdk.sandboxes.delete(sb.id)
        sdk.close()
    finally:
        srv.stop()


def test_webhooks_never_go_to_this_machine_unless_the_operator_allows_it(server, http, receiver):
    for url in (receiver.url, "http://localhost:9/", "http://169.254.169.254/latest", "http://[::1]:8080/",
                "http://10.200.0.2:8080/"):
        refused = http.post("/api/v1/sandboxes", json={"template": "default", "config": {"webhook": {"url": url}}})
        assert "webhooks do not go there" in err(refused, 400, "bad_request")["message"], url
    for bad in ({"url": "ftp://example.com/"}, {"url": "http://user:pw@example.com/"}, {"url": 5},
                {"url": "http://example.com/", "watch_dir": "/etc"}):
        err(http.post("/api/v1/sandboxes", json={"template": "default", "config": {"webhook": bad}}), 400, "bad_request")


def test_a_sandbox_address_is_refused_even_when_local_webhooks_are_allowed(tmp_path):
    with webhook_server(tmp_path / "data") as srv, make_http(srv.url) as http:
        refused = http.post("/api/v1/sandboxes", json={"template": "default",
                                                       "config": {"webhook": {"url": "http://10.200.0.6:80/"}}})
        assert "a sandbox's address" in err(refused, 400, "bad_request")["message"]


def test_deliveries_a_crash_kept_from_the_outbox_are_found_in_the_journal(tmp_path, receiver):
    """kill -9 between the journal's commit and the outbox's: nothing of the sandbox reached the
    outbox (emptied here by hand), and the next start finds what is owed in the sandbox's record."""
    import sqlite3

    srv = webhook_server(tmp_path / "data").start()
    try:
        sdk = sandbox0.Client(token=TOKEN, base_url=srv.url, timeout=30.0)
        receiver.stop()
        sb = claim(sdk, receiver)
        sdk.sandboxes.pause(sb.id)
        time.sleep(1.5)
        srv.kill()
        with sqlite3.connect(tmp_path / "data" / "webhooks.sqlite") as db:
            assert db.execute("SELECT count(*) FROM outbox").fetchone()[0] >= 2  # they had been queued
            for table in ("outbox", "watermarks", "subscriptions"):
                db.execute(f"DELETE FROM {table}")
        receiver.start()
        srv.start()
        wait_for(lambda: {"sandbox.ready", "sandbox.paused"} <= receiver.types_for(sb.id), timeout=20,
                 describe=lambda: receiver.events())
        sdk.sandboxes.delete(sb.id)
        wait_for(lambda: "sandbox.deleted" in receiver.types_for(sb.id), timeout=20)
        sdk.close()
    finally:
        srv.stop()
