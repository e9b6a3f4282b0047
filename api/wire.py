"""The Sandbox0 wire forms of the small requests, parsed into the domain's typed values.

Each raises InvalidRequestError with the reference's message. Routes call them in the
contract's order relative to the session lookup (most of them before it).
"""
from __future__ import annotations

import re

from session_supervisor.domain.model.commands import DesiredState, ResizeRequest, SignalRequest
from session_supervisor.domain.model.errors import InvalidRequestError
from session_supervisor.domain.model.json_fields import body_object, optional_bool, optional_str
from session_supervisor.domain.model.signals import parse_signal

__all__ = ["body_object", "optional_bool", "optional_str", "parse_cursor", "parse_desired_state",
           "parse_limit", "parse_replace_current", "parse_resize", "parse_signal_request"]


def parse_signal_request(body: dict) -> SignalRequest:
    name = body.get("signal")
    if not isinstance(name, str):
        raise InvalidRequestError("unsupported signal")
    try:
        signum = parse_signal(name)
    except ValueError:
        raise InvalidRequestError("unsupported signal") from None
    return SignalRequest(signum, optional_str(body, "expected_attempt_id").strip())


def parse_resize(body: dict) -> ResizeRequest:
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
    return ResizeRequest(sizes[0], sizes[1], optional_str(body, "expected_attempt_id").strip())


def parse_desired_state(body: dict) -> DesiredState:
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
