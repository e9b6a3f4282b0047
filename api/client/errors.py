"""Errors raised by the client: one class per contract error family.

Every HTTP error carries the envelope's ``status``, ``code`` and ``message``
(and ``details`` when the server sent them); transport failures say whether
the request may have reached the server (``ambiguous``), which is what the
input helper needs to decide a retry with the same input id.
"""
from __future__ import annotations

from typing import Any


class ClientError(Exception):
    """Base class of everything this client raises on purpose."""


class TransportError(ClientError):
    """The request failed below HTTP (refused, reset, timed out)."""

    def __init__(self, message: str, *, ambiguous: bool) -> None:
        super().__init__(message)
        self.ambiguous = ambiguous  # True when the server may have acted on the request


class ReconnectTimeout(TransportError):
    """An event stream could not be re-established within its reconnect budget."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ambiguous=False)


class APIError(ClientError):
    """An error response in either API's envelope."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


class InvalidRequest(APIError):
    """400: the request was refused as malformed."""


class Unauthorized(APIError):
    """401 or 403."""


class NotFound(APIError):
    """404: unknown sandbox or session."""


class Conflict(APIError):
    """409: attempt mismatch, not running, idempotency conflict, reused input id."""


class CursorExpired(APIError):
    """410: the cursor is older than the retained journal; ``earliest`` is where it resumes."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(status, code, message, details)
        details = details if isinstance(details, dict) else {}
        self.earliest: int | None = _int_or_none(details.get("earliest")) or _earliest_from(message)
        self.latest: int | None = _int_or_none(details.get("latest"))


class RateLimited(APIError):
    """429: e.g. ``input_buffer_full``."""


class Unavailable(APIError):
    """503: a lifecycle barrier, or a paused sandbox without auto_resume."""


class ServerError(APIError):
    """Any other 5xx (``<action>_failed``, ``internal_error``)."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: InvalidRequest, 401: Unauthorized, 403: Unauthorized, 404: NotFound, 409: Conflict,
    410: CursorExpired, 429: RateLimited, 503: Unavailable,
}


def error_for(status: int, code: str, message: str, details: Any = None) -> APIError:
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else APIError)
    return cls(status, code, message, details)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _earliest_from(message: str) -> int | None:
    """The reference puts the earliest seq only in the text ("... sequence is N")."""
    tail = message.rsplit(" ", 1)[-1] if message else ""
    return int(tail) if tail.isdigit() else None
