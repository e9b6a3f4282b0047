"""Plain typed result objects. Each keeps the API's ``data`` untouched in ``raw``.

Timestamps stay RFC 3339 strings: the server sends up to nine fractional
digits, which ``datetime`` would truncate. Optional fields the server omits
are ``None`` here.
"""
from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


def build(cls: type[T], data: Any, **nested: Any) -> T:
    """Construct ``cls`` from the known keys of ``data``; ``nested`` overrides converted fields."""
    if not isinstance(data, dict):
        data = {}
    names = {f.name for f in dataclasses.fields(cls)} - {"raw"}
    values = {k: v for k, v in data.items() if k in names}
    values.update(nested)
    return cls(raw=data, **values)  # type: ignore[call-arg]


# The server's (and the Go SDK's) disabled deadline: None here, as when it is omitted.
NO_DEADLINE = "0001-01-01T00:00:00Z"
_DEADLINES = ("expires_at", "hard_expires_at")


class FromApi:
    """Built from the API's ``data`` object; unknown keys stay in ``raw``."""

    @classmethod
    def from_api(cls, data):
        disabled = {k: None for k in _DEADLINES if isinstance(data, dict) and data.get(k) == NO_DEADLINE}
        if disabled and dataclasses.is_dataclass(cls):
            names = {f.name for f in dataclasses.fields(cls)}
            return build(cls, data, **{k: v for k, v in disabled.items() if k in names})
        return build(cls, data)


class Listing(list):
    """A list of results that also keeps the API's whole ``data`` object."""

    def __init__(self, items, raw: dict) -> None:
        super().__init__(items)
        self.raw = raw


@dataclass
class Cursor(FromApi):
    earliest: int = 0
    latest: int = 0
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Attempt(FromApi):
    id: str = ""
    number: int = 0
    runtime_generation: int = 0
    pid: int | None = None
    started_at: str | None = None
    ready_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    reason: str | None = None
    start_reason: str | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Session:
    id: str = ""
    spec: dict = field(default_factory=dict)
    spec_version: int = 0
    phase: str = ""
    runtime_generation: int = 0
    attempt: Attempt | None = None
    restart_count: int = 0
    cursor: Cursor = field(default_factory=Cursor)
    created_at: str = ""
    updated_at: str = ""
    last_activity_at: str = ""
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_api(cls, data) -> "Session":
        data = data if isinstance(data, dict) else {}
        attempt = Attempt.from_api(data["attempt"]) if isinstance(data.get("attempt"), dict) else None
        return build(cls, data, attempt=attempt, cursor=Cursor.from_api(data.get("cursor")))

    @property
    def attempt_id(self) -> str | None:
        return self.attempt.id if self.attempt else None

    @property
    def name(self) -> str:
        return self.spec.get("name", "")

    @property
    def desired_state(self) -> str:
        return self.spec.get("lifecycle", {}).get("desired_state", "")


@dataclass
class Event(FromApi):
    seq: int = 0
    session_id: str = ""
    runtime_generation: int = 0
    type: str = ""
    occurred_at: str = ""
    attempt_id: str | None = None
    stream: str | None = None
    data_base64: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    reason: str | None = None
    raw: dict = field(default_factory=dict, repr=False)


    @property
    def data(self) -> bytes:
        """The decoded output bytes (empty for events that are not ``output``)."""
        return base64.b64decode(self.data_base64) if self.data_base64 else b""


@dataclass
class EventPage:
    events: list[Event] = field(default_factory=list)
    cursor: Cursor = field(default_factory=Cursor)
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_api(cls, data) -> "EventPage":
        data = data if isinstance(data, dict) else {}
        return build(cls, data, events=[Event.from_api(e) for e in data.get("events") or []],
                     cursor=Cursor.from_api(data.get("cursor")))


@dataclass
class InputResult(FromApi):
    input_id: str = ""
    attempt_id: str = ""
    accepted: bool = False
    duplicate: bool = False
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Sandbox(FromApi):
    id: str = ""
    template_id: str = ""
    team_id: str = ""
    status: str = ""
    paused: bool = False
    auto_resume: bool = True
    runtime_id: str = ""
    runtime_generation: int = 0
    claimed_at: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    expires_at: str | None = None
    hard_expires_at: str | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Claim(FromApi):
    sandbox_id: str = ""
    status: str = ""
    runtime_id: str = ""
    template: str = ""
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class SandboxStatus(FromApi):
    sandbox_id: str | None = None
    template_id: str | None = None
    status: str | None = None
    runtime_id: str | None = None
    claimed_at: str | None = None
    created_at: str | None = None
    expires_at: str | None = None
    hard_expires_at: str | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class PauseResult(FromApi):
    sandbox_id: str = ""
    paused: bool = False
    status: str | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class ResumeResult(FromApi):
    sandbox_id: str = ""
    resumed: bool = False
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class RefreshResult(FromApi):
    sandbox_id: str = ""
    expires_at: str | None = None
    hard_expires_at: str | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Message:
    """A result that is only an acknowledgement (delete, signal, resize)."""

    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_api(cls, data) -> "Message":
        return cls(raw=data if isinstance(data, dict) else {})


@dataclass
class AeroSandbox(FromApi):
    id: str = ""
    name: str | None = None
    status: str | None = None
    image: str | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class AeroSession(FromApi):
    id: str = ""
    name: str = ""
    argv: list[str] = field(default_factory=list)
    workdir: str | None = None
    pty: bool = False
    status: str = ""
    exit_code: int | None = None
    exit_signal: str | None = None
    created_at: str | None = None
    started_at: str | None = None
    exited_at: str | None = None
    bytes: int = 0
    attached: int = 0
    raw: dict = field(default_factory=dict, repr=False)

