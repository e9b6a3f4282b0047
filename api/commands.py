"""The Sandbox0 wire forms parsed into the domain's typed commands (base64 decoded here, once).

The order of checks is the contract's (§1.8): JSON type errors before the session lookup, the
429 of a full input queue before a large body is decoded, then the body's own 400s.
"""
from __future__ import annotations

import base64
import binascii

from session_supervisor.domain.model.errors import InvalidRequestError
from session_supervisor.domain.model.requests import InputRequest, optional_bool, bounded_key, optional_str
from session_supervisor.domain.session_io import SessionIO


async def write_input(io: SessionIO, session_id: str, body: dict) -> dict:
    """``POST …/inputs`` and the ``/ws`` ``input`` frame: the reply once it is committed."""
    check_input_types(body)
    io.refuse_when_full(session_id, optional_str(body, "input_id").strip(),
                        len(optional_str(body, "data_base64")) * 3 // 4)
    return await io.write(session_id, parse_input(body))


def check_input_types(body: dict) -> None:
    """JSON type errors are decode errors: they come before the lookup (contract §1.8)."""
    for key in ("input_id", "expected_attempt_id", "data_base64"):
        optional_str(body, key)
    optional_bool(body, "eof")


def parse_input(body: dict) -> InputRequest:
    input_id = bounded_key(optional_str(body, "input_id"), "input_id")
    if not input_id:
        raise InvalidRequestError("input_id is required")
    encoded = optional_str(body, "data_base64")
    try:
        data = base64.b64decode(encoded, validate=True) if encoded else b""
    except (binascii.Error, ValueError):
        raise InvalidRequestError("data_base64 is invalid") from None
    eof = optional_bool(body, "eof")
    if not data and not eof:
        raise InvalidRequestError("data_base64 or eof is required")
    return InputRequest(input_id, data, eof, optional_str(body, "expected_attempt_id").strip())
