"""``AsyncClient``: the same routes as ``Client`` over ``httpx.AsyncClient``.

Route methods come from the shared ``SandboxOps``/``SessionOps`` and return
awaitables here; the streaming helpers are the async twins of ``sync.py``.
"""
from __future__ import annotations

import asyncio

import httpx
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from . import inputs
from .access import AccessOps
from .aerolvm import AeroOps, aero_session_path
from .errors import CursorExpired, ServerError, TransportError, Unavailable
from .events import (DEFAULT_RECONNECT_TIMEOUT_S, SSE_READ_TIMEOUT_S, STREAM_HEADERS, Backoff,
                     Resume, SSEParser, stream_params)
from .models import Event, InputResult
from .operations import Call, SandboxOps, SessionOps, finish, session_path
from .sync import auth_headers, base_url, tls_verify, wrap_transport
from .workspace import WorkspaceOps
from .ws import CONNECT_FAILURES, AsyncAeroAttach, AsyncSessionSocket, refused, ws_url


class AsyncClient(SandboxOps, SessionOps, WorkspaceOps, AccessOps):
    """``await client.get_session(sb, sid)``; ``async for event in client.iter_events(...)``."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None, data_dir=None) -> None:
        self.url = base_url(url)
        self.headers = auth_headers(token, self.url, data_dir)
        self._http = httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=timeout,
                                       transport=transport, verify=tls_verify(self.url))
        self.aero = AsyncAeroClient(self)

    async def _run(self, call: Call):
        try:
            response = await self._http.request(call.method, call.path, **call.request_kwargs())
        except httpx.TransportError as exc:
            raise wrap_transport(exc) from exc
        return finish(call, response.status_code, response.content)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def send_input(self, sandbox_id: str, session_id: str, data: bytes | str = b"", *,
                         eof: bool = False, attempt_id: str | None = None, input_id: str | None = None,
                         retries: int = inputs.RETRIES) -> InputResult:
        """As ``Client.send_input``: generated id, ambiguous failures retried with the same id and
        bytes, reconciled against the journal before giving up."""
        input_id = input_id or inputs.new_input_id()
        payload = inputs.as_bytes(data)
        pauses = inputs.delays(retries)
        was_ambiguous = False
        while True:
            try:
                return await self.write_input(sandbox_id, session_id, input_id=input_id, data=payload,
                                              eof=eof, expected_attempt_id=attempt_id)
            except Exception as error:
                delay = next(pauses, None) if inputs.should_retry(error) else None
                if delay is None:
                    found = await self._accepted_earlier(sandbox_id, session_id, input_id) \
                        if inputs.worth_reconciling(error, was_ambiguous) else None
                    if found is None:
                        raise
                    return found
                was_ambiguous = was_ambiguous or inputs.ambiguous(error)
                await asyncio.sleep(delay)

    async def _accepted_earlier(self, sandbox_id: str, session_id: str, input_id: str) -> InputResult | None:
        try:
            cursor = (await self.get_session(sandbox_id, session_id)).cursor
            after = inputs.reconcile_window(cursor.earliest, cursor.latest)
            while after < cursor.latest:
                page = await self.list_events(sandbox_id, session_id, after=after, limit=1000)
                found = inputs.receipt(page.events, input_id)
                if found is not None or not page.events:
                    return found
                after = page.events[-1].seq
        except Exception:  # the journal is out of reach too: the original error stands
            return None
        return None

    def iter_events(self, sandbox_id: str, session_id: str, *, after: int = 0, follow: bool = True,
                    skip_gap: bool = False, reconnect_timeout: float | None = DEFAULT_RECONNECT_TIMEOUT_S,
                    read_timeout: float = SSE_READ_TIMEOUT_S) -> "AsyncEventStream":
        return AsyncEventStream(self, sandbox_id, session_id, after=after, follow=follow,
                                skip_gap=skip_gap, reconnect_timeout=reconnect_timeout,
                                read_timeout=read_timeout)

    async def connect(self, sandbox_id: str, session_id: str, *, after: int | None = None,
                      open_timeout: float = 10.0) -> AsyncSessionSocket:
        params = {"after": after} if after is not None else None
        url = ws_url(self.url, session_path(sandbox_id, session_id, "/ws"), params)
        try:
            connection = await ws_connect(url, additional_headers=self.headers, open_timeout=open_timeout,
                                          max_size=None, proxy=None)
        except InvalidStatus as exc:
            raise refused(exc, "sandbox0") from None
        except CONNECT_FAILURES as exc:
            raise TransportError(f"websocket connect to {url} failed: {exc}", ambiguous=False) from exc
        return AsyncSessionSocket(connection)


class AsyncAeroClient(AeroOps):
    """``client.aero`` of the async client: the ``/v1`` routes and an async ``attach``."""

    def __init__(self, client: AsyncClient) -> None:
        super().__init__(client._run)
        self._client = client

    async def attach(self, sandbox_id: str, session_id: str, *, open_timeout: float = 10.0) -> AsyncAeroAttach:
        url = ws_url(self._client.url, aero_session_path(sandbox_id, session_id, "/attach"))
        try:
            connection = await ws_connect(url, additional_headers=self._client.headers,
                                          open_timeout=open_timeout, max_size=None, proxy=None)
        except InvalidStatus as exc:
            raise refused(exc, "aero") from None
        except CONNECT_FAILURES as exc:
            raise TransportError(f"websocket connect to {url} failed: {exc}", ambiguous=False) from exc
        return AsyncAeroAttach(connection)


class AsyncEventStream:
    """``async for event in stream``; same cursor, dedupe and 410 rules as ``EventStream``."""

    def __init__(self, client: AsyncClient, sandbox_id: str, session_id: str, *, after: int,
                 follow: bool, skip_gap: bool, reconnect_timeout: float | None, read_timeout: float) -> None:
        self.client = client
        self.sandbox_id = sandbox_id
        self.session_id = session_id
        self.resume = Resume(after, skip_gap)
        self.backoff = Backoff(reconnect_timeout)
        self.read_timeout = read_timeout
        self._events = self._follow() if follow else self._pages()

    @property
    def last_seq(self) -> int:
        return self.resume.last_seq

    @property
    def gaps(self) -> list[tuple[int, int]]:
        return self.resume.gaps

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Event:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        await self._events.aclose()

    async def _pages(self):
        while True:
            try:
                page = await self.client.list_events(self.sandbox_id, self.session_id,
                                                     after=self.resume.last_seq, limit=1000)
            except CursorExpired as error:
                self.resume.expired(error)
                continue
            for event in page.events:
                if (fresh := self.resume.accept(event.raw)) is not None:
                    yield fresh
            if not page.events or self.resume.last_seq >= page.cursor.latest:
                return

    async def _follow(self):
        while True:
            try:
                async for event in self._connection():
                    yield event
                why = "the server ended the stream"
            except CursorExpired as error:
                self.resume.expired(error)
                continue
            except (TransportError, Unavailable, ServerError) as error:
                why = str(error)
            await asyncio.sleep(self.backoff.next_delay(why))

    async def _connection(self):
        path = session_path(self.sandbox_id, self.session_id, "/events/stream")
        timeout = httpx.Timeout(10.0, read=self.read_timeout)
        try:
            async with self.client._http.stream("GET", path, params=stream_params(self.resume.last_seq),
                                                headers=STREAM_HEADERS, timeout=timeout) as response:
                if response.status_code != 200:
                    finish(Call("GET", path, (200,)), response.status_code, await response.aread())
                self.backoff.succeeded()
                parser = SSEParser()
                async for line in response.aiter_lines():
                    event = self.resume.accept(parser.feed(line))
                    if event is not None:
                        yield event
        except httpx.TransportError as exc:
            raise wrap_transport(exc) from exc
