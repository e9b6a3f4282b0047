"""Validation of the small request bodies (inputs, signals, resize, desired state).

Each raises InvalidRequestError with the reference's message. The service calls them
in the contract's order relative to the session lookup.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import InvalidRequestError
from .signals import parse_signal

MAX_KEY_BYTES = 256  # Idempotency-Key and input_id: they are stored with every receipt


def body_object(body: Any, what: str = "request body") -> dict:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise InvalidRequestError(f"invalid {what}: expected a JSON object")
    return body


def optional_str(body: dict, key: str) -> str:
    value = body.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidRequestError(f"invalid request body: {key} must be a string")
    return value


def optional_bool(body: dict, key: str) -> bool:
    value = body.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidRequestError(f"invalid request body: {key} must be a boolean")
    return value


@dataclass(frozen=True)
class InputRequest:
    """The typed input command (api/commands.py parses the Sandbox0 body; AeroLVM attach makes
    one from raw stdin): bytes, never base64, inside the domain."""


    input_id: str
    data: bytes
    eof: bool
    expected_attempt_id: str


def bounded_key(value: str, what: str) -> str:
    """An id chosen by the client: trimmed, at most MAX_KEY_BYTES, no NUL."""
    value = value.strip()
    if "\x00" in value or len(value.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise InvalidRequestError(f"{what} is invalid: at most {MAX_KEY_BYTES} bytes, no NUL")
    return value


def parse_signal_request(body: dict) -> tuple[int, str]:
    name = body.get("signal")
    if not isinstance(name, str):
        raise InvalidRequestError("unsupported signal")
    try:
        signum = parse_signal(name)
    except ValueError:
        raise InvalidRequestError("unsupported signal") from None
    return signum, optional_str(body, "expected_attempt_id").strip()


def parse_resize(body: dict) -> tuple[int, int, str]:
    sizes = []
    for key in ("rows", "cols"):
        value = body.get(key, 0)
        if value is None:
            value = 0
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
            raise InvalidRequestError(f"invalid request body: {key} must be an integer from 1 to 65535")
        sizes.append(value)
    if sizes[0] == 0 or sizes[1] == 0:
        raise InvalidRequestError("rows and cols must be greater than zero")
    return sizes[0], sizes[1], optional_str(body, "expected_attempt_id").strip()


def parse_desired_state(body: dict) -> str:
    state = body.get("state")
    if state not in ("running", "stopped"):
        raise InvalidRequestError("invalid desired state")
    return state


def parse_replace_current(body: dict) -> bool:
    return optional_bool(body, "replace_current")


_DECIMAL = re.compile(r"-?[0-9]{1,19}")  # ASCII only, no spaces: as Go's strconv.ParseInt


def parse_cursor(value: str | None, name: str = "after") -> int:
    if value is None or value == "":
        return 0
    if not _DECIMAL.fullmatch(value) or not 0 <= int(value) <= 2**63 - 1:
        raise InvalidRequestError(f"{name} must be a non-negative integer")
    return int(value)


def parse_limit(value: str | None) -> int:
    if value is None or value == "":
        return 1000
    if not _DECIMAL.fullmatch(value) or not 1 <= int(value) <= 10000:
        raise InvalidRequestError("limit must be between 1 and 10000")
    return int(value)
