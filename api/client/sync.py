"""``Client``: the synchronous client over httpx, and its reconnecting event iterator."""
from __future__ import annotations

import socket
import ssl
import time
from typing import TYPE_CHECKING

import httpx

from . import inputs
from .access import AccessOps
from .aerolvm import AeroOps, aero_session_path
from .errors import CursorExpired, ServerError, TransportError, Unavailable
from .events import (DEFAULT_RECONNECT_TIMEOUT_S, SSE_READ_TIMEOUT_S, STREAM_HEADERS, Backoff,
                     Resume, SSEParser, stream_params)
from .models import Event, InputResult
from .local_server import DEFAULT_URL, base_url, resolve_token
from .operations import Call, SandboxOps, SessionOps, finish, session_path
from .workspace import WorkspaceOps

if TYPE_CHECKING:  # imported on first use: see open_websocket
    from .ws import AeroAttach, SessionSocket

def auth_headers(token: str | None, url: str = DEFAULT_URL, data_dir=None) -> dict:
    """``token=None``: SESSIOND_TOKEN, else (local URL) the token file in the server's data dir."""
    token = resolve_token(token, url, data_dir)
    return {"Authorization": f"Bearer {token}"} if token else {}


def tls_verify(url: str):
    """What httpx should verify TLS with. httpx loads the CA bundle for every client, about
    100 ms, even for a plain-http URL that never uses it; there a context that verifies but
    trusts nothing is enough (it would fail closed, never open, if TLS were ever attempted)."""
    if url.startswith("https://"):
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname by default


def wrap_transport(exc: httpx.TransportError) -> TransportError:
    # A connect failure never reached the server; anything later might have.
    ambiguous = not isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))
    try:
        where = f"{exc.request.method} {exc.request.url}"
    except RuntimeError:  # raised before a request existed
        where = "request"
    return TransportError(f"{where}: {type(exc).__name__}: {exc}", ambiguous=ambiguous)


class Client(SandboxOps, SessionOps, WorkspaceOps, AccessOps):
    """Every route of the Sandbox0 API (and ``.aero`` for the ``/v1`` facade); results are typed."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None, data_dir=None) -> None:
        self.url = base_url(url)
        self.headers = auth_headers(token, self.url, data_dir)
        self._http = httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout,
                                  transport=transport, verify=tls_verify(self.url))
        self.aero = AeroClient(self)

    def _run(self, call: Call):
        try:
            response = self._http.request(call.method, call.path, **call.request_kwargs())
        except httpx.TransportError as exc:
            raise wrap_transport(exc) from exc
        return finish(call, response.status_code, response.content)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- helpers over the routes ---------------------------------------------------------
    def send_input(self, sandbox_id: str, session_id: str, data: bytes | str = b"", *,
                   eof: bool = False, attempt_id: str | None = None, input_id: str | None = None,
                   retries: int = inputs.RETRIES) -> InputResult:
        """Write input with a generated ``input_id``; retry ambiguous failures with the same id and
        bytes; before giving up after an ambiguous try, look for its acceptance in the journal."""
        input_id = input_id or inputs.new_input_id()
        payload = inputs.as_bytes(data)
        pauses = inputs.delays(retries)
        was_ambiguous = False
        while True:
            try:
                return self.write_input(sandbox_id, session_id, input_id=input_id, data=payload,
                                        eof=eof, expected_attempt_id=attempt_id)
            except Exception as error:
                delay = next(pauses, None) if inputs.should_retry(error) else None
                if delay is None:
                    found = self._accepted_earlier(sandbox_id, session_id, input_id) \
                        if inputs.worth_reconciling(error, was_ambiguous) else None
                    if found is None:
                        raise
                    return found
                was_ambiguous = was_ambiguous or inputs.ambiguous(error)
                time.sleep(delay)

    def _accepted_earlier(self, sandbox_id: str, session_id: str, input_id: str) -> InputResult | None:
        try:
            cursor = self.get_session(sandbox_id, session_id).cursor
            after = inputs.reconcile_window(cursor.earliest, cursor.latest)
            while after < cursor.latest:
                page = self.list_events(sandbox_id, session_id, after=after, limit=1000)
                found = inputs.receipt(page.events, input_id)
                if found is not None or not page.events:
                    return found
                after = page.events[-1].seq
        except Exception:  # the journal is out of reach too: the original error stands
            return None
        return None

    def iter_events(self, sandbox_id: str, session_id: str, *, after: int = 0, follow: bool = True,
                    skip_gap: bool = False, reconnect_timeout: float | None = DEFAULT_RECONNECT_TIMEOUT_S,
                    read_timeout: float = SSE_READ_TIMEOUT_S) -> "EventStream":
        """Events with seq > ``after``; with ``follow`` it never ends, reconnecting by itself."""
        return EventStream(self, sandbox_id, session_id, after=after, follow=follow, skip_gap=skip_gap,
                           reconnect_timeout=reconnect_timeout, read_timeout=read_timeout)

    def connect(self, sandbox_id: str, session_id: str, *, after: int | None = None,
                open_timeout: float = 10.0) -> "SessionSocket":
        """The ``…/ws`` duplex: replay after ``after``, live events, and acked requests."""
        params = {"after": after} if after is not None else None
        from .ws import SessionSocket
        return SessionSocket(open_websocket(self, session_path(sandbox_id, session_id, "/ws"), params,
                                            open_timeout, "sandbox0"))


def open_websocket(client: Client, path: str, params: dict | None, open_timeout: float, envelope: str):
    """A sync WebSocket to ``path``; a refused upgrade raises the same error an HTTP call would.

    websockets is imported here, on first use: most ``sessionctl`` verbs never open one.
    """
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect as ws_connect

    from .ws import CONNECT_FAILURES, opened, refused, ws_url
    url = ws_url(client.url, path, params)
    try:
        return opened(ws_connect(url, additional_headers=client.headers, open_timeout=open_timeout,
                                 max_size=None, proxy=None))
    except InvalidStatus as exc:
        raise refused(exc, envelope) from None
    except CONNECT_FAILURES as exc:
        raise TransportError(f"websocket connect to {url} failed: {exc}", ambiguous=False) from exc


class AeroClient(AeroOps):
    """``client.aero``: the ``/v1`` facade's routes, plus its ``attach`` WebSocket."""

    def __init__(self, client: Client) -> None:
        super().__init__(client._run)
        self._client = client

    def attach(self, sandbox_id: str, session_id: str, *, open_timeout: float = 10.0) -> "AeroAttach":
        from .ws import AeroAttach
        return AeroAttach(open_websocket(self._client, aero_session_path(sandbox_id, session_id, "/attach"),
                                         None, open_timeout, "aero"))


class EventStream:
    """Iterator of ``Event``s. ``last_seq``, ``gaps`` and ``reconnects`` describe its progress."""

    def __init__(self, client: Client, sandbox_id: str, session_id: str, *, after: int, follow: bool,
                 skip_gap: bool, reconnect_timeout: float | None, read_timeout: float) -> None:
        self.client = client
        self.sandbox_id = sandbox_id
        self.session_id = session_id
        self.resume = Resume(after, skip_gap)
        self.backoff = Backoff(reconnect_timeout)
        self.read_timeout = read_timeout
        self._closed = False
        self._response: httpx.Response | None = None
        self._events = self._follow() if follow else self._pages()

    @property
    def last_seq(self) -> int:
        return self.resume.last_seq

    @property
    def gaps(self) -> list[tuple[int, int]]:
        return self.resume.gaps

    @property
    def reconnects(self) -> int:
        return self.backoff.reconnects

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        return next(self._events)

    def close(self) -> None:
        """Stop iterating; safe from another thread (it wakes a blocked read)."""
        self._closed = True
        response = self._response
        if response is not None:
            _shutdown(response)
        try:
            self._events.close()  # releases the connection when called from the iterating thread
        except ValueError:
            pass  # another thread is inside the generator: the shutdown above ends it there

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _pages(self):
        while not self._closed:
            try:
                page = self.client.list_events(self.sandbox_id, self.session_id,
                                               after=self.resume.last_seq, limit=1000)
            except CursorExpired as error:
                self.resume.expired(error)
                continue
            for event in page.events:
                if (fresh := self.resume.accept(event.raw)) is not None:
                    yield fresh
            if not page.events or self.resume.last_seq >= page.cursor.latest:
                return

    def _follow(self):
        while not self._closed:
            try:
                yield from self._connection()
                why = "the server ended the stream"
            except CursorExpired as error:
                self.resume.expired(error)
                continue
            except (TransportError, Unavailable, ServerError) as error:
                why = str(error)
            if self._closed:
                return
            time.sleep(self.backoff.next_delay(why))

    def _connection(self):
        path = session_path(self.sandbox_id, self.session_id, "/events/stream")
        timeout = httpx.Timeout(10.0, read=self.read_timeout)
        try:
            with self.client._http.stream("GET", path, params=stream_params(self.resume.last_seq),
                                          headers=STREAM_HEADERS, timeout=timeout) as response:
                self._response = response
                if response.status_code != 200:
                    finish(Call("GET", path, (200,)), response.status_code, response.read())
                self.backoff.succeeded()
                parser = SSEParser()
                for line in response.iter_lines():
                    event = self.resume.accept(parser.feed(line))
                    if event is not None:
                        yield event
        except httpx.TransportError as exc:
            if self._closed:
                return
            raise wrap_transport(exc) from exc
        finally:
            self._response = None


def _shutdown(response: httpx.Response) -> None:
    """``close()`` alone does not wake a ``recv()`` blocked in another thread."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
