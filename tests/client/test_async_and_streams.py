"""``AsyncClient`` over a real server, and the event iterators' reconnect/dedupe rules on a scripted server."""
from __future__ import annotations

import asyncio

import httpx
import pytest

from session_supervisor.client import AsyncClient, Client, CursorExpired, NotFound
from session_supervisor.client.events import SSEParser
from tests.helpers import TOKEN


def test_the_async_client_covers_the_same_routes_and_streams(server):
    async def scenario():
        async with AsyncClient(server.url, TOKEN) as client:
            sandbox = (await client.claim_sandbox()).sandbox_id
            session = await client.create_session(sandbox, {"command": ["/bin/cat"]}, idempotency_key="a-1")
            assert (await client.get_session(sandbox, session.id)).phase == "running"
            assert (await client.send_input(sandbox, session.id, "async hello\n", eof=True)).accepted
            seen = b""
            stream = client.iter_events(sandbox, session.id, after=0, follow=True)
            async for event in stream:
                seen += event.data
                if event.type == "attempt.exited":
                    break
            await stream.aclose()
            assert seen == b"async hello\n"
            socket = await client.connect(sandbox, session.id, after=0)
            first = await socket.recv(timeout=10)
            await socket.close()
            assert first["type"] == "event" and first["event"]["seq"] == 1
            assert [s.id for s in await client.list_sessions(sandbox)] == [session.id]
            assert (await client.delete_session(sandbox, session.id)).raw == {"deleted": True}
            with pytest.raises(NotFound):
                await client.get_session(sandbox, session.id)
            box = await client.aero.create_sandbox("ubuntu")
            assert (await client.aero.get_sandbox(box.id)).id == box.id
            echo = await client.aero.create_session(box.id, argv=["echo", "aero async"])
            attach = await client.aero.attach(box.id, echo.id)
            frames = [frame async for frame in attach]
            await attach.detach()
            assert frames[-1][0] == "exit" and b"aero async" in b"".join(
                data for kind, data in frames if kind == "stdout")
            await client.aero.delete_sandbox(box.id)
            await client.delete_sandbox(sandbox)
    asyncio.run(scenario())


def sse(*seqs: int) -> bytes:
    return b"".join(b'id: %d\nevent: output\ndata: {"seq":%d,"session_id":"s","runtime_generation":1,'
                    b'"type":"output","occurred_at":"t"}\n\n' % (s, s) for s in seqs)


class ScriptedStreams:
    """Each connection answers the next scripted body, overlapping earlier ones; records each ``after``."""

    def __init__(self, bodies: list) -> None:
        self.bodies = list(bodies)
        self.afters: list[int] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.afters.append(int(request.url.params["after"]))
        body = self.bodies.pop(0)
        if isinstance(body, Exception):
            raise body
        if isinstance(body, tuple):
            status, payload = body
            return httpx.Response(status, json=payload)
        return httpx.Response(200, content=body, headers={"Content-Type": "text/event-stream"})


def test_the_follow_iterator_reconnects_from_its_last_seq_and_drops_duplicates():
    script = ScriptedStreams([sse(1, 2, 3), httpx.ConnectError("refused"), sse(3, 4), sse(2, 3, 4, 5, 6)])
    with Client("http://test", TOKEN, transport=httpx.MockTransport(script)) as client:
        stream = client.iter_events("sb", "ses", after=0, follow=True)
        seqs = [next(stream).seq for _ in range(6)]
    assert seqs == [1, 2, 3, 4, 5, 6]
    assert script.afters == [0, 3, 3, 4]
    assert stream.reconnects == 3


def test_a_410_while_following_raises_cursor_expired_or_skips_the_gap_when_asked():
    expired = (410, {"success": False, "error": {"code": "event_cursor_expired", "message": "event cursor "
                     "expired; earliest available sequence is 40", "details": {"earliest": 40, "latest": 45}}})
    with Client("http://test", TOKEN, transport=httpx.MockTransport(ScriptedStreams([sse(1), expired]))) as c:
        stream = c.iter_events("sb", "ses", follow=True)
        assert next(stream).seq == 1
        with pytest.raises(CursorExpired) as caught:
            next(stream)
    assert caught.value.earliest == 40 and caught.value.latest == 45
    script = ScriptedStreams([sse(1), expired, sse(40, 41)])
    with Client("http://test", TOKEN, transport=httpx.MockTransport(script)) as c:
        stream = c.iter_events("sb", "ses", follow=True, skip_gap=True)
        assert [next(stream).seq for _ in range(3)] == [1, 40, 41]
    assert script.afters == [0, 1, 39] and stream.gaps == [(2, 39)]


def test_the_earliest_seq_is_read_from_the_message_when_details_are_missing():
    error = CursorExpired(410, "event_cursor_expired", "event cursor expired; earliest available sequence is 17")
    assert error.earliest == 17


def test_the_sse_parser_joins_data_lines_and_reads_heartbeats():
    parser = SSEParser()
    assert parser.feed(": heartbeat 42") is None and parser.latest_hint == 42
    assert parser.feed("id: 1") is None
    assert parser.feed('data: {"seq": 1,') is None
    assert parser.feed('data: "type": "x"}') is None
    assert parser.feed("") == {"seq": 1, "type": "x"}
