"""The AeroLVM ``attach`` WebSocket.

Server -> client: binary ``0x01``/``0x02`` + bytes (stdout or pty / stderr), first the
retained output window, then live output; when the session is finished, all output
first, then text ``{"type":"exit","code":N[,"signal":S]}``, then a close frame.
Client -> server: binary frames are stdin; text ``resize`` / ``signal`` / ``close``.

The snapshot and the subscription are taken in one synchronous step, so replay and
live output neither overlap nor leave a gap. Output frames follow the committed
journal order, so the exit frame can only be sent after every output of the attempt.
A detach or a dropped connection never sends EOF and never stops the session.
"""
from __future__ import annotations

import asyncio
import logging
import uuid

import orjson

from session_supervisor.domain.model.errors import (
    DomainError,
    OperationFailedError,
    SessionNotFoundError,
    SessionNotRunningError,
)
from session_supervisor.domain.model.journal import JournalEntry
from session_supervisor.domain.model.commands import InputRequest, WriteInput

from . import commands
from .journal_wire import record_of
from .aerolvm_schema import exit_info, is_finished
from .routes.ws import GONE, first_done, retrieve_outcome

log = logging.getLogger(__name__)

REPLAY_BYTES = 1 << 20  # at least the last 1 MiB of output, as upstream's ring buffer
FRAME_BYTES = 1 << 20
INBOX_FRAMES = 256  # client frames read ahead of processing, then back-pressure
LEFTOVER_WAIT_S = 0.2  # after a close, how long to wait for the next unread frame
PREFIX = {"stderr": b"\x02"}  # stdout and pty output are 0x01
STDOUT = b"\x01"
ENDINGS = {"shutdown": (1001, "server shutting down"),
           "slow": (1013, "attachment fell behind; attach again for the replay"),
           "deleted": (1000, "session deleted")}


def output_frames(chunks: list[tuple[str, bytes]]) -> list[bytes]:
    """Consecutive chunks of one stream joined into frames of at most ~FRAME_BYTES."""
    frames: list[bytes] = []
    prefix, parts, size = b"", [], 0
    for stream, data in chunks:
        head = PREFIX.get(stream, STDOUT)
        if parts and (head != prefix or size + len(data) > FRAME_BYTES):
            frames.append(prefix + b"".join(parts))
            parts, size = [], 0
        prefix = head
        parts.append(data)
        size += len(data)
    if parts:
        frames.append(prefix + b"".join(parts))
    return frames


def exit_frame(info: dict) -> str:
    return orjson.dumps({"type": "exit", **info}).decode()


def error_frame(message: str) -> str:
    return orjson.dumps({"type": "error", "message": message}).decode()


_detached: set[asyncio.Task] = set()  # client sides still writing after their handler ended


class Attach:
    """One attached client of one session."""

    def __init__(self, ws, runtime, session_id: str) -> None:
        self.ws = ws
        self.runtime = runtime
        self.session_id = session_id
        self.subscriber = None
        self.upto = 0
        self.last_exit: dict | None = None  # the latest attempt.exited seen, reset by a new attempt

    def subscribe(self):
        """Snapshot (committed seq) and subscription in one synchronous step."""
        session = self.runtime.session(self.session_id)
        self.subscriber, self.upto = self.runtime.journal.subscribe(self.session_id, self.runtime.journal.cursor(session)[1])
        if is_finished(session):
            self.last_exit = exit_info(session)
        return self.subscriber

    async def run(self) -> None:
        # A client may write and detach at once. Its frames are taken off the socket from
        # the start and acted on in order by a task of their own, which outlives this
        # handler: Sanic cancels the handler as soon as the connection is gone.
        client = asyncio.ensure_future(self._client_side())
        _detached.add(client)
        client.add_done_callback(_detached.discard)
        client.add_done_callback(retrieve_outcome)
        await self._replay()
        finished = await first_done(self._send_live(), asyncio.shield(client))
        if not client.done():
            client.cancel()  # the session ended first: nothing more to write to it
        await self._end(finished)

    async def _replay(self) -> None:
        try:
            chunks = await self.runtime.journal.output_tail(self.session_id, self.upto, REPLAY_BYTES)
        except SessionNotFoundError:
            chunks = []  # deleted meanwhile: the live feed reports it
        for frame in output_frames(chunks):
            await self.ws.send(frame)

    async def _end(self, finished) -> None:
        if finished.cancelled() or finished.exception() is not None:
            if not finished.cancelled() and not isinstance(finished.exception(), GONE):
                log.error("attach failed", exc_info=finished.exception())
                await self.ws.send(error_frame("internal error"))
                await self.ws.close(1011, "internal error")
            return
        ending = finished.result()
        if isinstance(ending, dict):
            await self.ws.send(exit_frame(ending))
            await self.ws.close(1000, "session exited")
        elif ending in ENDINGS:
            await self.ws.send(error_frame(ENDINGS[ending][1]))
            await self.ws.close(*ENDINGS[ending])
        else:  # the client detached or went away: nothing else to do
            await self.ws.close(1000, "detached")

    # ---- server -> client ---------------------------------------------------------------
    def _finished_info(self, last: int) -> dict | None:
        """Exit info once every committed event was delivered and the session rests."""
        session = self.runtime.store.sessions.get(self.session_id)
        if session is None or self.runtime.store.committed_seq.get(self.session_id) != last:
            return None
        if session.version != last or not is_finished(session):
            return None
        return exit_info(session)

    async def _send_live(self):
        """Live output until the session finishes (-> exit info) or the feed closes (-> reason)."""
        last = self.upto
        while True:
            info = self._finished_info(last)
            if info is not None:
                return info
            batch = await self.subscriber.next_batch()
            for entry in batch:
                if entry.seq <= last:
                    continue
                last = entry.seq
                await self._deliver(entry)
            if not batch and self.subscriber.closed_reason:
                reason = self.subscriber.closed_reason
                # A deleted session whose exit we saw still ends with that exit (as upstream).
                return self.last_exit if reason == "deleted" and self.last_exit else reason

    async def _deliver(self, entry: JournalEntry) -> None:
        data = entry.output
        if data is not None:  # raw bytes from the commit: never through base64
            await self.ws.send(PREFIX.get(entry.state["stream"], STDOUT) + data)
            return
        record = record_of(entry)
        kind = record["type"]
        if kind == "attempt.exited":
            info = {"code": record.get("exit_code", -1)}
            if record.get("signal"):
                info["signal"] = record["signal"]
            self.last_exit = info
        elif kind == "attempt.starting":
            self.last_exit = None

    # ---- client -> server ---------------------------------------------------------------
    async def _client_side(self) -> str:
        inbox: asyncio.Queue = asyncio.Queue(INBOX_FRAMES)
        drain = asyncio.ensure_future(self._drain(inbox))
        try:
            return await self._serve_client(inbox)
        finally:
            drain.cancel()
            await asyncio.gather(drain, return_exceptions=True)

    async def _drain(self, inbox: asyncio.Queue) -> None:
        while True:
            try:
                message = await self.ws.recv()
            except (*GONE, asyncio.CancelledError):  # recv is cancelled when the connection drops
                for leftover in await self._leftovers():
                    await inbox.put(leftover)
                await inbox.put(None)
                return
            if message is not None:
                await inbox.put(message)

    async def _leftovers(self) -> list:
        """Frames that arrived before the peer closed but were not read yet.

        Sanic's recv() refuses them once the connection is closed, though its frame
        assembler still holds them (a client may write, then detach at once).
        """
        assembler = getattr(self.ws, "assembler", None)
        leftovers: list = []
        while assembler is not None and len(leftovers) < INBOX_FRAMES:
            try:
                message = await assembler.get(timeout=LEFTOVER_WAIT_S)
            except Exception:  # an assembler in a state we do not know: stop there
                break
            if message is None:
                break
            leftovers.append(message)
        return leftovers

    async def _serve_client(self, inbox: asyncio.Queue) -> str:
        while True:
            message = await inbox.get()
            if message is None:
                return "gone"
            if isinstance(message, (bytes, bytearray, memoryview)):
                if message:
                    await self._write_stdin(bytes(message))
                continue
            if await self._control(message) == "close":
                return "detached"

    async def _control(self, text: str) -> str:
        try:
            control = orjson.loads(text)
        except orjson.JSONDecodeError:
            return ""  # upstream ignores unparseable text frames
        if not isinstance(control, dict):
            return ""
        kind = control.get("type")
        try:
            if kind == "resize":
                await commands.resize(self.runtime, self.session_id, {"rows": control.get("rows"), "cols": control.get("cols")})
            elif kind == "signal":
                await commands.send_signal(self.runtime, self.session_id, {"signal": control.get("signal")})
        except DomainError as exc:
            # No reply channel: an error frame would end the client's wait(). A pipes
            # session ignores resizes, and an exited one gets its exit frame anyway.
            log.debug("attach %s to %s ignored: %s", kind, self.session_id, exc.message)
        return kind if isinstance(kind, str) else ""

    async def _write_stdin(self, data: bytes) -> None:
        request = InputRequest(f"attach-{uuid.uuid4().hex}", data, False, "")
        try:
            await self.runtime.handle(WriteInput(self.session_id, request))
        except (SessionNotRunningError, OperationFailedError, SessionNotFoundError) as exc:
            # The process is gone: the exit frame follows, which is what the client waits for.
            log.debug("attach input to %s dropped: %s", self.session_id, exc.message)
        except DomainError as exc:  # e.g. input buffer full: lost input must not be silent
            await self.ws.send(error_frame(exc.message))
