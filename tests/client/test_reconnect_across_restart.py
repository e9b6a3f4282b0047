"""A client following a session's events across a server restart receives every seq exactly once.

The server is stopped (SIGTERM, or SIGKILL for a crash) while a consumer
iterates ``iter_events(follow=True)`` and the session keeps printing; the
server comes back on the same port and data dir, recovers the session into a
new runtime generation, and the consumer carries on by itself from its last
seq. The consumer must end up with 1..latest, no gap and no duplicate.
"""
from __future__ import annotations

import threading

import pytest

from session_supervisor.client import Client
from tests.helpers import TOKEN, wait_for
from tests.serverproc import ServerProcess

TICKER = ["sh", "-c", "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.02; done"]


class Consumer(threading.Thread):
    def __init__(self, client: Client, sandbox_id: str, session_id: str) -> None:
        super().__init__(daemon=True)
        self.stream = client.iter_events(sandbox_id, session_id, after=0, follow=True, reconnect_timeout=60)
        self.events = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for event in self.stream:
                self.events.append(event)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def seqs(self) -> list[int]:
        return [e.seq for e in self.events]


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_following_consumer_gets_every_seq_exactly_once_across_a_server_restart(tmp_path, how):
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="host")
    server.start()
    client = Client(server.url, TOKEN)
    consumer = None
    try:
        sandbox = client.claim_sandbox().sandbox_id
        session = client.create_session(sandbox, {"command": TICKER, "lifecycle": {"runtime_recovery": "restart"}})
        consumer = Consumer(client, sandbox, session.id)
        consumer.start()
        wait_for(lambda: len(consumer.events) >= 30, timeout=20, describe=consumer.seqs)
        server.stop() if how == "stop" else server.kill()
        server.start()

        def recovered_output():
            generations = {e.runtime_generation for e in consumer.events if e.type == "output"}
            return len(generations) >= 2 and consumer.events[-1].type == "output"
        wait_for(recovered_output, timeout=30, describe=lambda: (consumer.error, consumer.seqs()[-10:]))
        client.stop_session(sandbox, session.id)
        latest = client.get_session(sandbox, session.id).cursor.latest
        wait_for(lambda: consumer.events and consumer.events[-1].seq >= latest, timeout=20,
                 describe=lambda: (latest, consumer.error, consumer.seqs()[-10:]))
    finally:
        if consumer is not None:
            consumer.stream.close()
            consumer.join(10)
        client.close()
        server.stop()
    seqs = consumer.seqs()
    assert consumer.error is None, consumer.error
    assert seqs == list(range(1, latest + 1)), "every seq exactly once, in order"
    assert consumer.stream.reconnects >= 1
    kinds = [(e.type, e.reason) for e in consumer.events]
    assert ("attempt.exited", "runtime_replaced") in kinds and ("attempt.starting", "runtime_recovered") in kinds
