"""One attempt's live state while its process runs: the handle, the input queue and its pump.

Input is queued in order (bounded in writes and bytes, ``SessionIO`` checks the bounds) and a
pump task writes it to the process's stdin; EOF comes after everything queued before it.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from .model.errors import OperationFailedError
from .ports import AttemptHandle

log = logging.getLogger(__name__)
INPUT_QUEUE_OPS = 256
INPUT_QUEUE_BYTES = 16 * 1024 * 1024  # stdin not yet written to the process, per attempt
_CLOSE = object()  # an input op meaning "EOF after everything queued before it"


@dataclass
class LiveAttempt:
    attempt_id: str
    handle: AttemptHandle | None = None
    ops: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(INPUT_QUEUE_OPS))
    input_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    eof_queued: bool = False
    queued_bytes: int = 0
    exit_reason: str = ""
    tasks: set = field(default_factory=set)
    token_tail: bytes = b""
    abandoned: bool = False  # the runtime is being released: the exit is not a fact to record

    def queue(self, data: bytes, eof: bool) -> asyncio.Future | None:
        """Queue bytes and/or EOF; returns a future resolved once EOF reached the process."""
        close_done = asyncio.get_running_loop().create_future() if eof else None
        if data:
            self.queued_bytes += len(data)
            self.ops.put_nowait((data, None))
        if eof:
            self.eof_queued = True
            self.ops.put_nowait((_CLOSE, close_done))
        return close_done

    async def pump_input(self, session_id: str) -> None:
        """Write queued input to the process in order, for as long as the attempt lives."""
        while True:
            op, done = await self.ops.get()
            try:
                if op is _CLOSE:
                    await self.handle.close_input()
                else:
                    try:
                        await self.handle.write(op)
                    finally:
                        self.queued_bytes -= len(op)
                if done is not None and not done.done():
                    done.set_result(None)
            except (OSError, RuntimeError) as exc:
                if done is not None and not done.done():
                    done.set_exception(OperationFailedError("process not running"))
                log.debug("input to %s dropped: %s", session_id, exc)
