"""send_input reconciles an ambiguous try against the journal (issue 10): the recovery
recipe's "reconcile any request whose acceptance was ambiguous before retrying it".

The transport below lets the first input reach the server and loses its 202; before the
retry, the attempt is replaced, so the retry meets 409 "input id was already used with
different content". Only the journal's ``input.accepted`` (which now carries ``input_id``)
can say that the first try was accepted.
"""
from __future__ import annotations

import asyncio

import httpx
import pytest

from session_supervisor.client import AsyncClient, Client, Conflict
from tests.helpers import TOKEN, wait_for

CAT = {"command": ["/bin/cat"]}


class LoseResponseThenReplaceAttempt(httpx.BaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.inputs = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path.endswith("/inputs"):
            self.inputs += 1
            if self.inputs == 1:
                response.read()
                replace = httpx.Request("POST", str(request.url).replace("/inputs", "/attempts"),
                                        headers={"Authorization": request.headers["authorization"]},
                                        json={"replace_current": True})
                assert self.inner.handle_request(replace).status_code == 201
                raise httpx.ReadTimeout("response lost", request=request)
        return response


class AsyncLoseResponseThenReplaceAttempt(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.inputs = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.url.path.endswith("/inputs"):
            self.inputs += 1
            if self.inputs == 1:
                await response.aread()
                replace = httpx.Request("POST", str(request.url).replace("/inputs", "/attempts"),
                                        headers={"Authorization": request.headers["authorization"]},
                                        json={"replace_current": True})
                assert (await self.inner.handle_async_request(replace)).status_code == 201
                raise httpx.ReadTimeout("response lost", request=request)
        return response


def test_a_lost_202_is_found_in_the_journal_when_the_retry_meets_a_new_attempt(server, sandbox):
    transport = LoseResponseThenReplaceAttempt()
    with Client(server.url, TOKEN, transport=transport) as flaky:
        session = flaky.create_session(sandbox, CAT)
        first_attempt = session.attempt.id
        result = flaky.send_input(sandbox, session.id, b"accepted by the first attempt\n")
        assert transport.inputs == 2, "one retry, which met the replaced attempt"
        assert result.accepted and result.duplicate and result.attempt_id == first_attempt
        assert result.raw["reconciled_from_seq"] > 0
        wait_for(lambda: flaky.get_session(sandbox, session.id).attempt.id != first_attempt)


def test_without_an_ambiguous_try_the_conflict_is_raised_as_before(server, sandbox):
    with Client(server.url, TOKEN) as client:
        session = client.create_session(sandbox, CAT)
        client.send_input(sandbox, session.id, b"one\n", input_id="fixed")
        client.create_attempt(sandbox, session.id, replace_current=True)
        with pytest.raises(Conflict):
            client.send_input(sandbox, session.id, b"two\n", input_id="fixed")


def test_the_async_client_reconciles_the_same_way(server, sandbox):
    async def story():
        transport = AsyncLoseResponseThenReplaceAttempt()
        async with AsyncClient(server.url, TOKEN, transport=transport) as flaky:
            session = await flaky.create_session(sandbox, CAT)
            result = await flaky.send_input(sandbox, session.id, b"async\n")
            assert result.accepted and result.duplicate and result.attempt_id == session.attempt.id
    asyncio.run(asyncio.wait_for(story(), 60))
