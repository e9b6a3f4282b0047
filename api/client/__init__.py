"""Python client for the session supervisor: ``Client`` (sync) and ``AsyncClient``.

    from session_supervisor.client import Client
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

import importlib

# Loaded on first use (PEP 562): ``sessionctl`` imports only what its verb needs, which keeps
# a simple call well under 150 ms (tests/bench/bench_cli.py); the asyncio client alone costs more.
_HOME = {
    "access": ("ApiKey", "Team"),
    "aio": ("AsyncClient", "AsyncEventStream"),
    "errors": ("APIError", "ClientError", "Conflict", "CursorExpired", "InvalidRequest", "NotFound",
               "RateLimited", "ReconnectTimeout", "ServerError", "TransportError", "Unauthorized",
               "Unavailable"),
    "inputs": ("new_input_id",),
    "models": ("AeroSandbox", "AeroSession", "Attempt", "Claim", "Cursor", "Event", "EventPage",
               "InputResult", "Listing", "Message", "PauseResult", "RefreshResult", "ResumeResult",
               "Sandbox", "SandboxStatus", "Session"),
    "sync": ("Client", "EventStream"),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
