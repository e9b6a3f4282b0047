"""The AeroLVM-compatible ``/v1`` facade as ``Call``s.

``client.aero`` gives these methods on both clients. Errors there are bare
``{"error": "..."}`` objects, so the ``code`` of a raised error is derived from
the HTTP status; ``log`` returns raw bytes.
"""
from __future__ import annotations

from .models import AeroSandbox, AeroSession, Listing, Message
from .operations import Call, q


def _aero_sandboxes(data) -> Listing:
    items = data if isinstance(data, list) else (data.get("sandboxes") if isinstance(data, dict) else None)
    return Listing([AeroSandbox.from_api(x) for x in items or []], data if isinstance(data, dict) else {})


def _aero_sessions(data) -> Listing:
    items = data.get("sessions") if isinstance(data, dict) else None
    return Listing([AeroSession.from_api(x) for x in items or []], data if isinstance(data, dict) else {})


def aero_session_path(sandbox_id: str, session_id: str | None = None, tail: str = "") -> str:
    path = f"/v1/sandboxes/{q(sandbox_id)}/sessions"
    if session_id is not None:
        path += f"/{q(session_id)}"
    return path + tail


class AeroOps:
    """Methods over the facade; ``_run`` is the owning client's."""

    def __init__(self, run) -> None:
        self._run = run

    def create_sandbox(self, image: str = "default", **fields):
        body = {"image": image, "mounts": [], "platform_volumes": [], **fields}
        return self._run(Call("POST", "/v1/sandboxes", (200, 201), AeroSandbox.from_api,
                              body=body, envelope="aero"))

    def list_sandboxes(self, *, name: str | None = None):
        params = {"name": name} if name else None
        return self._run(Call("GET", "/v1/sandboxes", (200,), _aero_sandboxes, params=params,
                              envelope="aero"))

    def get_sandbox(self, sandbox_id: str):
        return self._run(Call("GET", f"/v1/sandboxes/{q(sandbox_id)}", (200,), AeroSandbox.from_api,
                              envelope="aero"))

    def delete_sandbox(self, sandbox_id: str):
        return self._run(Call("DELETE", f"/v1/sandboxes/{q(sandbox_id)}", (200, 202, 204),
                              Message.from_api, envelope="aero"))

    def create_session(self, sandbox_id: str, *, argv: list[str] | None = None,
                       command: str | None = None, workdir: str | None = None,
                       env: dict | None = None, pty: bool | None = None, cols: int | None = None,
                       rows: int | None = None, name: str | None = None):
        body = {k: v for k, v in (("name", name), ("argv", argv), ("command", command),
                                  ("workdir", workdir), ("env", env), ("pty", pty),
                                  ("cols", cols), ("rows", rows)) if v is not None}
        return self._run(Call("POST", aero_session_path(sandbox_id), (200, 201), AeroSession.from_api,
                              body=body, envelope="aero"))

    def list_sessions(self, sandbox_id: str):
        return self._run(Call("GET", aero_session_path(sandbox_id), (200,), _aero_sessions,
                              envelope="aero"))

    def get_session(self, sandbox_id: str, session_id: str):
        return self._run(Call("GET", aero_session_path(sandbox_id, session_id), (200,),
                              AeroSession.from_api, envelope="aero"))

    def delete_session(self, sandbox_id: str, session_id: str):
        return self._run(Call("DELETE", aero_session_path(sandbox_id, session_id), (200, 204),
                              Message.from_api, envelope="aero"))

    def signal(self, sandbox_id: str, session_id: str, signal: str):
        return self._run(Call("POST", aero_session_path(sandbox_id, session_id, "/signal"), (200,),
                              Message.from_api, body={"signal": signal}, envelope="aero"))

    def resize(self, sandbox_id: str, session_id: str, cols: int, rows: int):
        return self._run(Call("POST", aero_session_path(sandbox_id, session_id, "/resize"), (200,),
                              Message.from_api, body={"cols": cols, "rows": rows}, envelope="aero"))

    def log(self, sandbox_id: str, session_id: str) -> bytes:
        """The raw retained output, stdout and stderr interleaved in order."""
        return self._run(Call("GET", aero_session_path(sandbox_id, session_id, "/log"), (200,),
                              envelope="raw"))
