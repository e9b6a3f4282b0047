"""The typed commands the domain takes (the API parses the wire forms into them: ``api/wire.py``,
``api/commands.py``, the AeroLVM facade). Bytes are bytes, signals are numbers; nothing here
knows JSON or base64.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import InvalidRequestError

MAX_KEY_BYTES = 256  # Idempotency-Key and input_id: they are stored with every receipt
DesiredState = Literal["running", "stopped"]


@dataclass(frozen=True)
class InputRequest:
    """Bytes (or EOF) for a session's live attempt, idempotent by ``input_id``."""

    input_id: str
    data: bytes
    eof: bool
    expected_attempt_id: str


@dataclass(frozen=True)
class SignalRequest:
    signum: int
    expected_attempt_id: str = ""


@dataclass(frozen=True)
class ResizeRequest:
    rows: int
    cols: int
    expected_attempt_id: str = ""


def bounded_key(value: str, what: str) -> str:
    """An id chosen by the client: trimmed, at most MAX_KEY_BYTES, no NUL."""
    value = value.strip()
    if "\x00" in value or len(value.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise InvalidRequestError(f"{what} is invalid: at most {MAX_KEY_BYTES} bytes, no NUL")
    return value


# ---- the session commands a sandbox runtime handles (``SandboxRuntime.handle``) ------------------
@dataclass(frozen=True)
class CreateSession:
    spec: dict  # normalized (``model.spec.normalize_spec``)
    idempotency_key: str = ""  # bounded (``bounded_key``)


@dataclass(frozen=True)
class UpdateSession:
    session_id: str
    spec: dict  # normalized


@dataclass(frozen=True)
class SetDesiredState:
    session_id: str
    state: DesiredState


@dataclass(frozen=True)
class CreateAttempt:
    session_id: str
    replace_current: bool = False


@dataclass(frozen=True)
class DeleteSession:
    session_id: str


@dataclass(frozen=True)
class WriteInput:
    session_id: str
    request: InputRequest


@dataclass(frozen=True)
class SendSignal:
    session_id: str
    request: SignalRequest


@dataclass(frozen=True)
class ResizeTerminal:
    session_id: str
    request: ResizeRequest


SessionCommand = (CreateSession | UpdateSession | SetDesiredState | CreateAttempt | DeleteSession
                  | WriteInput | SendSignal | ResizeTerminal)
