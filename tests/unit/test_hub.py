"""Live subscribers (contract §6.13): a bounded buffer each; a full one detaches only itself."""
from __future__ import annotations

import asyncio

from session_supervisor.domain.hub import BUFFER_BYTES, BUFFER_EVENTS, Hub
from session_supervisor.domain.model.journal import OUTPUT_TOPIC, JournalEntry


def record(seq: int, data: bytes = b"") -> JournalEntry:
    state = {"stream": "stdout", "data": data, "attempt_id": "att-1", "generation": 1}
    return JournalEntry(seq, "ses-1", OUTPUT_TOPIC, state, 1_700_000_000_000_000_000)


def test_a_subscriber_that_never_reads_is_detached_at_256_events_and_drops_its_buffer():
    hub = Hub()
    stalled = hub.subscribe("ses-1")
    hub.publish("ses-1", [record(i) for i in range(1, BUFFER_EVENTS + 1)])
    assert stalled.closed_reason == "" and len(stalled.items) == BUFFER_EVENTS
    hub.publish("ses-1", [record(BUFFER_EVENTS + 1)])
    assert stalled.closed_reason == "slow"
    assert not stalled.items and stalled.buffered_bytes == 0  # it resumes from the journal
    assert not hub.has_subscribers("ses-1")


def test_a_subscriber_holding_too_many_output_bytes_is_detached_before_256_events():
    hub = Hub()
    stalled = hub.subscribe("ses-1")
    chunk = b"A" * (1024 * 1024)  # bytes are counted as bytes: base64 is the renderers' business
    count = BUFFER_BYTES // len(chunk)
    hub.publish("ses-1", [record(i, chunk) for i in range(1, count + 1)])
    assert stalled.closed_reason == ""
    hub.publish("ses-1", [record(count + 1, chunk)])
    assert stalled.closed_reason == "slow" and not stalled.items


def test_a_slow_subscriber_does_not_affect_a_reading_one_or_another_session():
    async def scenario():
        hub = Hub()
        stalled = hub.subscribe("ses-1")
        reader = hub.subscribe("ses-1")
        other = hub.subscribe("ses-2")
        seen = []
        for start in range(1, 2000, 100):
            hub.publish("ses-1", [record(i) for i in range(start, start + 100)])
            hub.publish("ses-2", [record(start)])
            seen += await reader.next_batch(1.0)
        assert stalled.closed_reason == "slow"
        assert reader.closed_reason == "" and [entry.seq for entry in seen] == list(range(1, 2001))
        assert other.closed_reason == "" and len(await other.next_batch(1.0)) == 20
    asyncio.run(scenario())


def test_a_closed_subscriber_wakes_its_reader_with_nothing():
    async def scenario():
        hub = Hub()
        subscriber = hub.subscribe("ses-1")
        waiter = asyncio.ensure_future(subscriber.next_batch(10.0))
        await asyncio.sleep(0)
        hub.close_session("ses-1", "deleted")
        assert await asyncio.wait_for(waiter, 1.0) == []
        assert subscriber.closed_reason == "deleted"
    asyncio.run(scenario())
