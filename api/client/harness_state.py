"""What a ``HarnessDriver`` must remember across a restart of the client process.

The last seq it consumed, the attempt and generation it handshook with, the
native ids, the next request number, and the unterminated stdout line of the
current attempt. Written atomically (temp file, fsync, rename).
"""
from __future__ import annotations

import base64
import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

VERSION = 1


@dataclass
class DriverState:
    sandbox_id: str
    session_id: str
    harness: str
    last_seq: int = 0
    attempt_id: str = ""
    runtime_generation: int = 0
    handshaken: bool = False
    next_request: int = 1
    native: dict = field(default_factory=dict)
    partial_attempt: str = ""
    partial_b64: str = ""
    version: int = VERSION

    @classmethod
    def load(cls, path: Path | None, sandbox_id: str, session_id: str, harness: str) -> "DriverState":
        fresh = cls(sandbox_id, session_id, harness)
        if path is None or not path.exists():
            return fresh
        data = json.loads(path.read_text())
        if (data.get("sandbox_id"), data.get("session_id"), data.get("harness")) != (sandbox_id, session_id, harness):
            raise ValueError(f"{path} holds the state of another session or harness")
        known = {k: v for k, v in data.items() if k in fresh.__dataclass_fields__}
        return cls(**known)

    def save(self, path: Path | None) -> None:
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".harness-", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(asdict(self), out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise

    @property
    def partial(self) -> tuple[str, bytes]:
        return self.partial_attempt, base64.b64decode(self.partial_b64) if self.partial_b64 else b""

    def set_partial(self, attempt_id: str, data: bytes) -> None:
        self.partial_attempt = attempt_id if data else ""
        self.partial_b64 = base64.b64encode(data).decode("ascii") if data else ""


class LineBuffer:
    """JSON-lines framing of one attempt's stdout: bytes are held until LF, never parsed per chunk."""

    def __init__(self, attempt_id: str = "", pending: bytes = b"") -> None:
        self.attempt_id = attempt_id
        self.pending = pending

    def feed(self, attempt_id: str, data: bytes) -> list[bytes]:
        if attempt_id != self.attempt_id:  # a new attempt: the old one's unfinished line is void
            self.attempt_id, self.pending = attempt_id, b""
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]


class PendingCall:
    """A request written to the harness, waiting for the answer on the attempt it went to."""

    def __init__(self, attempt_id: str) -> None:
        self.attempt_id = attempt_id
        self.done = threading.Event()
        self.record: dict | None = None
        self.error: Exception | None = None


def fail_all(pending, error: Exception) -> None:
    for call in pending:
        if not call.done.is_set():
            call.error = error
            call.done.set()
