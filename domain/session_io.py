"""The process interaction of one sandbox's sessions (``runtime.io``): input, signals, resize.

Each call checks in the contract's order, acts on the live attempt through the attempt runner,
records the fact and returns once it is committed. Input bytes are queued for the runner's pump
before ``input.accepted`` is committed; the reply (202, a WebSocket ack) comes after the commit.
"""
from __future__ import annotations

import asyncio

from .model.errors import InputBufferFullError, OperationFailedError
from .model.commands import InputRequest, ResizeRequest, SignalRequest
from .model.session import input_digest
from .model.signals import signal_description
from .live_attempt import INPUT_QUEUE_BYTES, INPUT_QUEUE_OPS
from .ports import SessionHost

EOF_WAIT_S = 5.0


class SessionIO:
    def __init__(self, runtime: SessionHost) -> None:
        self.runtime = runtime  # its sandbox's runtime, seen through the SessionHost port

    async def write(self, session_id: str, request: InputRequest) -> dict:
        """Queue ``request``'s bytes (or EOF) for the live attempt; reply once accepted and committed."""
        session = self.runtime.session(session_id)
        live = self.runtime.attempts.live_attempt(session_id)
        lock = live.input_lock if live is not None else asyncio.Lock()
        async with lock:  # input requests of one attempt are serialized: receipts stay in order
            def digest_of(attempt_id: str) -> str:
                return input_digest(attempt_id, request.data, request.eof)

            duplicate = session.check_input(request.input_id, digest_of, request.expected_attempt_id)
            attempt_id = session.attempt_id
            if duplicate:
                return _input_reply(request.input_id, attempt_id, True)
            live = self.runtime.attempts.live_attempt(session_id)
            if live is None or live.handle is None:
                raise OperationFailedError("process not running")
            if live.ops.qsize() + (1 if request.data else 0) + (1 if request.eof else 0) > INPUT_QUEUE_OPS:
                raise InputBufferFullError()
            # Bounded in bytes too; one input larger than the bound is taken when nothing waits.
            if live.queued_bytes and live.queued_bytes + len(request.data) > INPUT_QUEUE_BYTES:
                raise InputBufferFullError()
            self.runtime.pipeline.check_writable(self.runtime.store)  # 507 before the process sees a byte
            if live.eof_queued and request.data:
                raise OperationFailedError("process not running")
            close_done = self.runtime.attempts.queue_input(live, request.data, request.eof)
            self.runtime.attempts.record(session, session.accept_input, request.input_id,
                                           digest_of(attempt_id), self.runtime.clock.now_ns(),
                                           len(request.data), request.eof)
            await self.runtime.pipeline.flush(self.runtime.store)
            if close_done is not None:
                await _wait_close(close_done, live)
        return _input_reply(request.input_id, attempt_id, False)

    def refuse_when_full(self, session_id: str, input_id: str, size: int) -> None:
        """404 for an unknown session; 429 before decoding a body whose ``size`` bytes could
        not be queued anyway: a storm of large inputs would otherwise hold a decoded copy of
        each (a retry of a known id still reaches its dedupe)."""
        session = self.runtime.session(session_id)
        live = self.runtime.attempts.live_attempt(session.id)
        if live is None or not live.queued_bytes or input_id in session.receipts:
            return
        if live.queued_bytes + size > INPUT_QUEUE_BYTES:
            raise InputBufferFullError()

    async def send_signal(self, session_id: str, request: SignalRequest) -> None:
        signum = request.signum
        session = self.runtime.session(session_id)
        session.check_live(request.expected_attempt_id)
        live = self.runtime.attempts.live_attempt(session_id)
        if live is None or live.handle is None:
            raise OperationFailedError("process not running")
        live.handle.send_signal(signum)
        self.runtime.attempts.record(session, session.record_signal, signum, signal_description(signum),
                                       self.runtime.clock.now_ns())
        await self.runtime.pipeline.flush(self.runtime.store)

    async def resize(self, session_id: str, request: ResizeRequest) -> None:
        rows, cols = request.rows, request.cols
        session = self.runtime.session(session_id)
        session.check_resize(request.expected_attempt_id)
        self.runtime.pipeline.check_writable(self.runtime.store)
        live = self.runtime.attempts.live_attempt(session_id)
        if live is None or live.handle is None:
            raise OperationFailedError("process not running")
        live.handle.resize(rows, cols)
        self.runtime.attempts.record(session, session.record_resize, rows, cols, self.runtime.clock.now_ns())
        await self.runtime.pipeline.flush(self.runtime.store)


def _input_reply(input_id: str, attempt_id: str, duplicate: bool) -> dict:
    return {"input_id": input_id, "attempt_id": attempt_id, "accepted": True, "duplicate": duplicate}


async def _wait_close(close_done: asyncio.Future, live) -> None:
    try:
        await asyncio.wait_for(asyncio.shield(close_done), EOF_WAIT_S)
    except asyncio.TimeoutError:
        raise OperationFailedError("input close timed out") from None
