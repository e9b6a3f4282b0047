"""WebSocket connections: the Sandbox0 ``…/ws`` duplex and the AeroLVM ``attach``.

Sync classes use ``websockets.sync``; the ``Async…`` ones ``websockets.asyncio``.
A refused upgrade (400/404/410/503 before the 101) is raised as the matching
``APIError`` from the JSON body, like any HTTP call.
"""
from __future__ import annotations

import base64
import itertools
import json
from urllib.parse import urlencode

from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from .errors import TransportError
from .inputs import new_input_id
from .operations import Call, finish

CLIENT_CLOSED = 1000


# A handshake that never completed (refused connection, server gone mid-handshake, bad
# answer): nothing reached the session, so it is safe to retry. InvalidStatus is handled first.
CONNECT_FAILURES = (OSError, WebSocketException)


def ws_url(base_url: str, path: str, params: dict | None = None) -> str:
    scheme, _, rest = base_url.partition("://")
    url = ("wss" if scheme == "https" else "ws") + "://" + rest.rstrip("/") + path
    return url + ("?" + urlencode(params) if params else "")


def refused(error: InvalidStatus, envelope: str) -> Exception:
    """The pre-upgrade HTTP answer as the same error an HTTP call would raise."""
    response = error.response
    try:
        finish(Call("GET", "", (), envelope=envelope), response.status_code, response.body or b"")
    except Exception as api_error:  # finish always raises for a non-101 status
        return api_error
    return TransportError(str(error), ambiguous=False)  # pragma: no cover


def input_frame(data: bytes, eof: bool, input_id: str | None, expected_attempt_id: str | None,
                request_id: str) -> dict:
    frame = {"type": "input", "input_id": input_id or new_input_id(), "request_id": request_id,
             "eof": bool(eof)}
    if data:
        frame["data_base64"] = base64.b64encode(data).decode("ascii")
    if expected_attempt_id:
        frame["expected_attempt_id"] = expected_attempt_id
    return frame


def opened(connection):
    """We own the connection's lifetime (``close()``); websockets >= 17.1 would warn otherwise."""
    if hasattr(connection, "pending_legacy_warning"):
        connection.pending_legacy_warning = False
    return connection


def parse_message(raw) -> dict | None:
    try:
        message = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return message if isinstance(message, dict) else None


class _Frames:
    """Request frames with generated request ids, shared by the sync and async sockets."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def rid(self) -> str:
        return f"r{next(self._ids)}"

    def input(self, data: bytes, eof: bool, input_id, expected_attempt_id, request_id) -> dict:
        return input_frame(data, eof, input_id, expected_attempt_id, request_id or self.rid())

    def signal(self, signal: str, expected_attempt_id, request_id) -> dict:
        frame = {"type": "signal", "signal": signal, "request_id": request_id or self.rid()}
        if expected_attempt_id:
            frame["expected_attempt_id"] = expected_attempt_id
        return frame

    def resize(self, rows: int, cols: int, expected_attempt_id, request_id) -> dict:
        frame = {"type": "resize", "rows": rows, "cols": cols, "request_id": request_id or self.rid()}
        if expected_attempt_id:
            frame["expected_attempt_id"] = expected_attempt_id
        return frame


class SessionSocket:
    """Messages are dicts: ``{"type":"event","event":…}``, ``ack`` or ``error``."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self._frames = _Frames()

    def _send(self, frame: dict) -> str:
        self.connection.send(json.dumps(frame))
        return frame["request_id"]

    def send_input(self, data: bytes = b"", *, eof: bool = False, input_id: str | None = None,
                   expected_attempt_id: str | None = None, request_id: str | None = None) -> str:
        return self._send(self._frames.input(data, eof, input_id, expected_attempt_id, request_id))

    def send_signal(self, signal: str, *, expected_attempt_id: str | None = None,
                    request_id: str | None = None) -> str:
        return self._send(self._frames.signal(signal, expected_attempt_id, request_id))

    def resize(self, rows: int, cols: int, *, expected_attempt_id: str | None = None,
               request_id: str | None = None) -> str:
        return self._send(self._frames.resize(rows, cols, expected_attempt_id, request_id))

    def recv(self, timeout: float | None = None) -> dict | None:
        """The next message; None once the server closed the connection. TimeoutError on timeout."""
        while True:
            try:
                raw = self.connection.recv(timeout)
            except ConnectionClosed:
                return None
            message = parse_message(raw)
            if message is not None:
                return message

    def __iter__(self):
        while (message := self.recv()) is not None:
            yield message

    @property
    def close_code(self) -> int | None:
        return self.connection.close_code

    def close(self, code: int = CLIENT_CLOSED) -> None:
        self.connection.close(code)

    def __enter__(self) -> "SessionSocket":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncSessionSocket(SessionSocket):
    async def _send(self, frame: dict) -> str:  # type: ignore[override]
        await self.connection.send(json.dumps(frame))
        return frame["request_id"]

    async def recv(self, timeout: float | None = None) -> dict | None:  # type: ignore[override]
        import asyncio
        while True:
            try:
                raw = await asyncio.wait_for(self.connection.recv(), timeout)
            except ConnectionClosed:
                return None
            message = parse_message(raw)
            if message is not None:
                return message

    async def __aiter__(self):
        while (message := await self.recv()) is not None:
            yield message

    async def close(self, code: int = CLIENT_CLOSED) -> None:  # type: ignore[override]
        await self.connection.close(code)

    async def __aenter__(self) -> "AsyncSessionSocket":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


def aero_frame(raw) -> tuple[str, object] | None:
    """One attach frame as ("stdout"|"stderr", bytes) or ("exit"|"error", payload)."""
    if isinstance(raw, bytes):
        if raw[:1] == b"\x01":
            return "stdout", raw[1:]
        if raw[:1] == b"\x02":
            return "stderr", raw[1:]
        return None
    message = parse_message(raw)
    if message is None:
        return None
    if message.get("type") == "exit":
        return "exit", message
    if message.get("type") == "error":
        return "error", message.get("message", "")
    return None


class AeroAttach:
    """The AeroLVM attach socket: binary stdin out, 0x01/0x02 output and an exit frame in."""

    def __init__(self, connection) -> None:
        self.connection = connection

    def write(self, data: bytes | str) -> None:
        self.connection.send(data.encode() if isinstance(data, str) else bytes(data))

    def resize(self, cols: int, rows: int) -> None:
        self.connection.send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    def signal(self, name: str) -> None:
        self.connection.send(json.dumps({"type": "signal", "signal": name}))

    def recv(self, timeout: float | None = None):
        while True:
            try:
                frame = aero_frame(self.connection.recv(timeout))
            except ConnectionClosed:
                return None
            if frame is not None:
                return frame

    def __iter__(self):
        while (frame := self.recv()) is not None:
            yield frame
            if frame[0] in ("exit", "error"):
                return

    def detach(self) -> None:
        """Leave the session running: a ``close`` control frame, then the socket."""
        try:
            self.connection.send(json.dumps({"type": "close"}))
        except ConnectionClosed:
            pass
        self.connection.close()


class AsyncAeroAttach(AeroAttach):
    """``await attach.write(b"…")``; ``async for kind, payload in attach``."""

    async def write(self, data: bytes | str) -> None:  # type: ignore[override]
        await self.connection.send(data.encode() if isinstance(data, str) else bytes(data))

    async def resize(self, cols: int, rows: int) -> None:  # type: ignore[override]
        await self.connection.send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    async def signal(self, name: str) -> None:  # type: ignore[override]
        await self.connection.send(json.dumps({"type": "signal", "signal": name}))

    async def recv(self, timeout: float | None = None):  # type: ignore[override]
        import asyncio
        while True:
            try:
                frame = aero_frame(await asyncio.wait_for(self.connection.recv(), timeout))
            except ConnectionClosed:
                return None
            if frame is not None:
                return frame

    async def __aiter__(self):
        while (frame := await self.recv()) is not None:
            yield frame
            if frame[0] in ("exit", "error"):
                return

    async def detach(self) -> None:  # type: ignore[override]
        try:
            await self.connection.send(json.dumps({"type": "close"}))
        except ConnectionClosed:
            pass
        await self.connection.close()
