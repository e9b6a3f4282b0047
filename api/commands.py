"""The Sandbox0 wire forms turned into the domain's typed commands, each handed to the runtime's
one command table (``SandboxRuntime.handle``): the routes, the WebSocket frames and the scenarios
all come through here.

Base64 is decoded here, once; specs are normalized here; the domain never sees a request
body. The order of checks is the contract's: JSON type errors and the body's 400s before
the session lookup (a new attempt looks the session up first), the 429 of
a full input queue before a large input body is decoded.
"""
from __future__ import annotations

import binascii

from session_supervisor.domain.model.commands import (
    CreateAttempt,
    CreateSession,
    DeleteSession,
    InputRequest,
    ResizeTerminal,
    SendSignal,
    SetDesiredState,
    UpdateSession,
    WriteInput,
    bounded_key,
)
from session_supervisor.domain.model.errors import InvalidRequestError
from session_supervisor.domain.model.spec import normalize_spec

from .wire import (
    body_object,
    optional_bool,
    optional_str,
    parse_desired_state,
    parse_replace_current,
    parse_resize,
    parse_signal_request,
)


async def create_session(runtime, raw_spec, idempotency_key: str):
    spec = normalize_spec(raw_spec)
    return await runtime.handle(CreateSession(spec, bounded_key(idempotency_key, "Idempotency-Key")))


async def update_session(runtime, session_id: str, raw_spec):
    return await runtime.handle(UpdateSession(session_id, normalize_spec(raw_spec)))


async def set_desired_state(runtime, session_id: str, body):
    return await runtime.handle(SetDesiredState(session_id, parse_desired_state(body_object(body))))


async def create_attempt(runtime, session_id: str, body):
    body = body_object(body)
    runtime.session(session_id)  # 404 before the body's field errors (as the reference answers)
    return await runtime.handle(CreateAttempt(session_id, parse_replace_current(body)))


async def delete_session(runtime, session_id: str) -> None:
    await runtime.handle(DeleteSession(session_id))


async def send_signal(runtime, session_id: str, body) -> None:
    await runtime.handle(SendSignal(session_id, parse_signal_request(body_object(body))))


async def resize(runtime, session_id: str, body) -> None:
    await runtime.handle(ResizeTerminal(session_id, parse_resize(body_object(body))))


async def write_input(runtime, session_id: str, body: dict) -> dict:
    """``POST …/inputs`` and the ``/ws`` ``input`` frame: the reply once it is committed."""
    check_input_types(body)
    runtime.io.refuse_when_full(session_id, optional_str(body, "input_id").strip(),
                                len(optional_str(body, "data_base64")) * 3 // 4)
    return await runtime.handle(WriteInput(session_id, parse_input(body)))


def check_input_types(body: dict) -> None:
    """JSON type errors are decode errors: they come before the lookup."""
    for key in ("input_id", "expected_attempt_id", "data_base64"):
        optional_str(body, key)
    optional_bool(body, "eof")


def strict_b64decode(encoded: str) -> bytes:
    """Standard padded base64 and nothing else, as Go's ``base64.StdEncoding`` reads it: whole
    4-character groups, padding only at the end, no characters outside the alphabet. Python's
    decoder would also take ``aGVsbG8K==`` (padding after a complete group)."""
    if len(encoded) % 4:
        raise ValueError("base64 length is not a multiple of 4")
    if len(encoded) - len(encoded.rstrip("=")) > 2:
        raise ValueError("base64 has more padding than a group can")
    return binascii.a2b_base64(encoded, strict_mode=True)


def parse_input(body: dict) -> InputRequest:
    input_id = bounded_key(optional_str(body, "input_id"), "input_id")
    if not input_id:
        raise InvalidRequestError("input_id is required")
    encoded = optional_str(body, "data_base64")
    try:
        data = strict_b64decode(encoded) if encoded else b""
    except (binascii.Error, ValueError):
        raise InvalidRequestError("data_base64 is invalid") from None
    eof = optional_bool(body, "eof")
    if not data and not eof:
        raise InvalidRequestError("data_base64 or eof is required")
    return InputRequest(input_id, data, eof, optional_str(body, "expected_attempt_id").strip())
