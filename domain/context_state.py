"""The in-memory state of one context: bounded output, live subscribers, the process handle.

Nothing here is durable (that is the difference from a session): it lives as long as the
context, and the sandbox's runtime, does.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from .context_output import SUBSCRIBER_LIMIT, OutputLog, text_size
from .model.contexts import ContextRequest
from .model.errors import InputBufferFullError
from .ports import AttemptHandle, TerminalSize

# Input waiting to reach one context's process, as for a session's attempt: past it 429.
INPUT_QUEUE_BYTES = 16 << 20
INPUT_QUEUE_WRITES = 256
SUBSCRIBER_QUEUE = 4096   # chunks; a subscriber that falls this far behind is dropped
EXIT = ("exit", "", "", False)  # (kind, source, text, prompt seen)


@dataclass(eq=False)  # kept in sets: identity, not value
class Subscriber:
    """A live WebSocket reader; bounded by chunks and by the memory of what waits for it."""

    queue: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(SUBSCRIBER_QUEUE))
    dropped: bool = False
    queued: int = 0  # memory of the text waiting in ``queue``

    def push(self, item: tuple) -> None:
        if self.dropped:
            return
        size = text_size(item[2]) if item[0] == "output" else 0
        if self.queued + size > SUBSCRIBER_LIMIT:
            self._drop()
            return
        try:
            self.queue.put_nowait(item)
            self.queued += size
        except asyncio.QueueFull:
            self._drop()

    def _drop(self) -> None:
        """Too slow: what waits is let go, and a final marker takes its place."""
        self.dropped = True
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queued = 0
        self.queue.put_nowait(("dropped", "", "", False))

    async def get(self) -> tuple:
        item = await self.queue.get()
        if item[0] == "output":
            self.queued = max(0, self.queued - text_size(item[2]))
        return item


@dataclass
class Context:
    id: str
    request: ContextRequest
    created_ns: int
    last_activity_ns: int
    terminal: TerminalSize | None
    handle: AttemptHandle | None = None
    exit_code: int | None = None
    state: str = "running"
    finished_ns: int = 0
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    output: OutputLog = field(default_factory=OutputLog)  # bounded: domain/context_output.py
    decoders: dict = field(default_factory=dict)  # source -> incremental UTF-8 decoder
    subscribers: set = field(default_factory=set)
    prompt_tail: str = ""
    exec_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    watcher: asyncio.Task | None = None
    launch_id: str = ""  # the runtime's attempt id of the current process (contexts._start)
    started_ns: int = 0  # when the current process started
    input_queued: int = 0  # bytes handed to the process's stdin and not written yet
    input_writes: int = 0

    @property
    def running(self) -> bool:
        return self.handle is not None and not self.exited.is_set()

    def refuse_input(self, size: int, *, writing: bool = False) -> None:
        """429 when ``size`` more bytes of input would not fit in the queue: one input larger than
        the queue, or too much already waiting (``writing``: the write itself, which also counts)."""
        if size > INPUT_QUEUE_BYTES or (self.input_writes and self.input_queued + size > INPUT_QUEUE_BYTES) \
                or (writing and self.input_writes >= INPUT_QUEUE_WRITES):
            raise InputBufferFullError(
                f"context input queue is full ({self.input_queued} bytes in {self.input_writes} writes waiting; "
                f"{INPUT_QUEUE_BYTES} bytes and {INPUT_QUEUE_WRITES} writes at most)")

    def captured(self, source: str) -> str:
        return self.output.text(source)

    def raw_output(self) -> str:
        return self.output.text()

    def is_due(self, now_ns: int, finished_ttl_s: float) -> bool:
        """Past its ttl or idle timeout, or finished for longer than ``finished_ttl_s``."""
        request = self.request
        return bool((request.ttl_s and now_ns - self.created_ns > request.ttl_s * 1e9)
                    or (request.idle_timeout_s and now_ns - self.last_activity_ns > request.idle_timeout_s * 1e9)
                    or (self.finished_ns and now_ns - self.finished_ns > finished_ttl_s * 1e9))


PREVIEW_CHARS = 1024  # of stdout and stderr in a process.exited webhook


def process_started(context: Context) -> dict:
    """A ``process.started`` webhook's payload."""
    request = context.request
    payload = {"process_id": context.id, "process_type": request.type, "pid": context.handle.pid if context.handle
               else 0, "command": request.command, "env_vars": request.env, "cwd": request.cwd,
               "alias": request.alias}
    if context.terminal is not None:
        payload["pty_size"] = {"rows": context.terminal.rows, "cols": context.terminal.cols}
    return payload


def process_ended(context: Context) -> dict:
    """A ``process.exited`` / ``process.crashed`` webhook's payload."""
    return {"process_id": context.id, "process_type": context.request.type,
            "pid": context.handle.pid if context.handle else 0, "exit_code": context.exit_code,
            "duration_ms": max(0, (context.finished_ns - context.started_ns) // 1_000_000),
            "stdout_preview": context.captured("stdout")[-PREVIEW_CHARS:],
            "stderr_preview": context.captured("stderr")[-PREVIEW_CHARS:] or context.captured("pty")[-PREVIEW_CHARS:],
            "state": context.state}
