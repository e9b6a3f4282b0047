"""Python client for the session supervisor: ``Client`` (sync) and ``AsyncClient``.

    from api.client import Client
    with Client("http://127.0.0.1:8780", token) as c:
        sb = c.claim_sandbox("default").sandbox_id
        s = c.create_session(sb, {"command": ["/bin/cat"]}, idempotency_key="k1")
        c.send_input(sb, s.id, b"hello\\n", eof=True)          # generated input_id, safe retries
        for event in c.iter_events(sb, s.id, follow=True):    # reconnects by itself
            print(event.seq, event.type, event.data)

Every route of the Sandbox0 API is a method; ``client.aero`` covers the
AeroLVM ``/v1`` facade. Results are plain dataclasses from ``api.client.models``
(each keeps the API's ``data`` in ``.raw``); errors are ``api.client.errors``.
"""
from __future__ import annotations

from .aio import AsyncClient, AsyncEventStream
from .errors import (APIError, ClientError, Conflict, CursorExpired, InvalidRequest, NotFound,
                     RateLimited, ReconnectTimeout, ServerError, TransportError, Unauthorized,
                     Unavailable)
from .inputs import new_input_id
from .models import (AeroSandbox, AeroSession, Attempt, Claim, Cursor, Event, EventPage, InputResult,
                     Listing, Message, PauseResult, RefreshResult, ResumeResult, Sandbox,
                     SandboxStatus, Session)
from .sync import Client, EventStream

__all__ = [
    "AsyncClient", "AsyncEventStream", "Client", "EventStream", "new_input_id",
    "APIError", "ClientError", "Conflict", "CursorExpired", "InvalidRequest", "NotFound",
    "RateLimited", "ReconnectTimeout", "ServerError", "TransportError", "Unauthorized", "Unavailable",
    "AeroSandbox", "AeroSession", "Attempt", "Claim", "Cursor", "Event", "EventPage", "InputResult",
    "Listing", "Message", "PauseResult", "RefreshResult", "ResumeResult", "Sandbox", "SandboxStatus",
    "Session",
]
