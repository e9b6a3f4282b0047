"""The in-memory state of one context: bounded output, live subscribers, the process handle.

Nothing here is durable (that is the difference from a session): it lives as long as the
context, and the sandbox's runtime, does.
"""
from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from .model.contexts import ContextRequest
from .ports import AttemptHandle, TerminalSize

REPLAY_LIMIT = 8 << 20    # output retained per context for late WebSocket subscribers
CAPTURE_LIMIT = 16 << 20  # stdout / stderr retained for the context's status and wait_until_done
SUBSCRIBER_QUEUE = 4096   # chunks; a subscriber that falls this far behind is dropped
EXIT = ("exit", "", "", False)  # (kind, source, text, prompt seen)


class Capture:
    """Text kept up to ``limit`` characters; beyond it the oldest part is dropped."""

    def __init__(self, limit: int) -> None:
        self.parts: deque[str] = deque()
        self.size = 0
        self.limit = limit

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        while self.size > self.limit and len(self.parts) > 1:
            self.size -= len(self.parts.popleft())

    def text(self) -> str:
        return "".join(self.parts)


@dataclass(eq=False)  # kept in sets: identity, not value
class Subscriber:
    queue: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(SUBSCRIBER_QUEUE))
    dropped: bool = False

    def push(self, item: tuple) -> None:
        if self.dropped:
            return
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:  # too slow: it gets a final EXIT-like marker instead of more output
            self.dropped = True
            self.queue.get_nowait()
            self.queue.put_nowait(("dropped", "", "", False))


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
    replay: Capture = field(default_factory=lambda: Capture(REPLAY_LIMIT))
    chunks: deque = field(default_factory=deque)  # (source, text) for replay, bounded by ``replay``
    stamps: deque = field(default_factory=deque)  # (number, ns) of each chunk in ``chunks``: log cursors
    chunk_count: int = 0  # chunks ever received
    streams: dict = field(default_factory=dict)   # source -> Capture
    decoders: dict = field(default_factory=dict)  # source -> incremental UTF-8 decoder
    subscribers: set = field(default_factory=set)
    prompt_tail: str = ""
    exec_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    watcher: asyncio.Task | None = None
    launch_id: str = ""  # the runtime's attempt id of the current process (contexts._start)
    started_ns: int = 0  # when the current process started

    @property
    def running(self) -> bool:
        return self.handle is not None and not self.exited.is_set()

    def captured(self, source: str) -> str:
        capture = self.streams.get(source)
        return capture.text() if capture is not None else ""

    def raw_output(self) -> str:
        return "".join(text for _source, text in self.chunks)

    def is_due(self, now_ns: int, finished_ttl_s: float) -> bool:
        """Past its ttl or idle timeout, or finished for longer than ``finished_ttl_s``."""
        request = self.request
        return bool((request.ttl_s and now_ns - self.created_ns > request.ttl_s * 1e9)
                    or (request.idle_timeout_s and now_ns - self.last_activity_ns > request.idle_timeout_s * 1e9)
                    or (self.finished_ns and now_ns - self.finished_ns > finished_ttl_s * 1e9))


PREVIEW_CHARS = 1024  # of stdout and stderr in a process.exited webhook


def process_started(context: Context) -> dict:
    """A ``process.started`` webhook's payload (environments contract §6)."""
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
