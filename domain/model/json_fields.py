"""Reading fields of a decoded JSON object, with the reference's messages for wrong types.

The model's own parsers (a session spec, a context request) use these; the API's wire
parsing (``api/wire.py``) does too. Each raises InvalidRequestError.
"""
from __future__ import annotations

from typing import Any

from .errors import InvalidRequestError


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
