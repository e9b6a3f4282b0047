"""Every route of the Sandbox0 API as a transport-free ``Call``, shared by both clients.

A method here builds a ``Call`` and hands it to ``self._run``: the sync client
returns the parsed result, the async client returns an awaitable of it. So each
route is written once (sans-IO), and both clients cover the same routes.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import quote

import orjson

from .errors import APIError, error_for
from .models import (Attempt, Claim, EventPage, InputResult, Listing, Message, PauseResult,
                     RefreshResult, ResumeResult, Sandbox, SandboxStatus, Session)

NO_BODY: Any = object()


def _identity(value):
    return value


@dataclass
class Call:
    method: str
    path: str
    expect: tuple[int, ...]
    parse: Callable[[Any], Any] = _identity
    params: dict | None = None
    body: Any = NO_BODY
    headers: dict | None = None
    envelope: str = "sandbox0"  # "sandbox0": {"success","data"}; "aero": bare JSON; "raw": bytes
    content: bytes | None = None  # a raw request body (files); "bytes" envelope: raw reply, sandbox0 errors

    def request_kwargs(self) -> dict:
        kwargs: dict = {"params": self.params, "headers": self.headers}
        if self.content is not None:
            kwargs["content"] = self.content
            kwargs["headers"] = {"Content-Type": "application/octet-stream", **(self.headers or {})}
        elif self.body is not NO_BODY:
            kwargs["content"] = orjson.dumps(self.body)
            kwargs["headers"] = {"Content-Type": "application/json", **(self.headers or {})}
        return kwargs


def finish(call: Call, status: int, content: bytes) -> Any:
    """Turn a response into the call's result, or raise the matching ``APIError``."""
    if call.envelope == "bytes" and status in call.expect:
        return content
    if call.envelope in ("sandbox0", "bytes"):
        return _finish_sandbox0(call, status, content)
    if not 200 <= status < 300:
        body = _json_or_none(content)
        message = body.get("error") if isinstance(body, dict) else None
        if not isinstance(message, str):
            message = content.decode(errors="replace")[:300] or f"HTTP {status}"
        raise error_for(status, _code_for(status), message)
    if call.envelope == "raw":
        return content
    body = _json_or_none(content) if content.strip() else {}
    return call.parse(body)


def _finish_sandbox0(call: Call, status: int, content: bytes) -> Any:
    body = _json_or_none(content)
    if status in call.expect and isinstance(body, dict) and body.get("success") is True:
        return call.parse(body.get("data"))
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        raise error_for(status, error["code"], str(error.get("message", "")), error.get("details"))
    text = content.decode(errors="replace")[:300]
    if 200 <= status < 300:
        raise APIError(status, "unexpected_response", f"unexpected API response: {text}")
    raise error_for(status, _code_for(status), text or f"HTTP {status}")


def _json_or_none(content: bytes):
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return None


def _code_for(status: int) -> str:
    return {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
            409: "conflict", 429: "too_many_requests", 503: "unavailable"}.get(status, f"http_{status}")


def q(value: str) -> str:
    return quote(str(value), safe="")


def sandbox_path(sandbox_id: str) -> str:
    return f"/api/v1/sandboxes/{q(sandbox_id)}"


def session_path(sandbox_id: str, session_id: str | None = None, tail: str = "") -> str:
    path = f"{sandbox_path(sandbox_id)}/sessions"
    if session_id is not None:
        path += f"/{q(session_id)}"
    return path + tail


def _listing(key: str, item: Callable) -> Callable[[Any], Listing]:
    def parse(data) -> Listing:
        items = data.get(key) if isinstance(data, dict) else None
        return Listing([item(x) for x in items or []], data if isinstance(data, dict) else {})
    return parse


def input_body(input_id: str, data: bytes, eof: bool, expected_attempt_id: str | None) -> dict:
    body: dict = {"input_id": input_id}
    if expected_attempt_id:
        body["expected_attempt_id"] = expected_attempt_id
    if data:
        body["data_base64"] = base64.b64encode(data).decode("ascii")
    body["eof"] = bool(eof)
    return body


def _cursor_params(after: int | None, limit: int | None) -> dict | None:
    params = {k: v for k, v in (("after", after), ("limit", limit)) if v is not None}
    return params or None


class SandboxOps:
    """The sandbox routes."""

    def _run(self, call: Call):  # pragma: no cover - provided by the client classes
        raise NotImplementedError

    def claim_sandbox(self, template: str = "default", *, config: dict | None = None,
                      snapshot_id: str | None = None, mounts: list[dict] | None = None):
        """``mounts``: ``[{"sandboxvolume_id", "mount_point"}]``, volumes bound at claim."""
        body: dict = {"template": template}
        if snapshot_id:
            body["snapshot_id"] = snapshot_id
        if mounts:
            body["mounts"] = mounts
        if config is not None:
            body["config"] = config
        return self._run(Call("POST", "/api/v1/sandboxes", (201,), Claim.from_api, body=body))

    def list_sandboxes(self, *, status: str | None = None, template_id: str | None = None,
                       paused: bool | None = None, limit: int = 50, offset: int = 0):
        params: dict = {"limit": limit, "offset": offset}
        if status:
            params["status"] = status
        if template_id:
            params["template_id"] = template_id
        if paused is not None:
            params["paused"] = "true" if paused else "false"
        return self._run(Call("GET", "/api/v1/sandboxes", (200,),
                              _listing("sandboxes", Sandbox.from_api), params=params))

    def get_sandbox(self, sandbox_id: str):
        return self._run(Call("GET", sandbox_path(sandbox_id), (200,), Sandbox.from_api))

    def update_sandbox(self, sandbox_id: str, config: dict):
        return self._run(Call("PUT", sandbox_path(sandbox_id), (200,), Sandbox.from_api,
                              body={"config": config}))

    def sandbox_status(self, sandbox_id: str):
        return self._run(Call("GET", sandbox_path(sandbox_id) + "/status", (200,), SandboxStatus.from_api))

    def pause_sandbox(self, sandbox_id: str, *, memory: bool = False):
        return self._run(Call("POST", sandbox_path(sandbox_id) + "/pause", (200, 202),
                              PauseResult.from_api, body={"memory": memory}))

    def resume_sandbox(self, sandbox_id: str, *, memory: bool = False):
        return self._run(Call("POST", sandbox_path(sandbox_id) + "/resume", (200,),
                              ResumeResult.from_api, body={"memory": memory}))

    def refresh_sandbox(self, sandbox_id: str, *, duration: int | None = None):
        body = {} if duration is None else {"duration": duration}
        return self._run(Call("POST", sandbox_path(sandbox_id) + "/refresh", (200,),
                              RefreshResult.from_api, body=body))

    def delete_sandbox(self, sandbox_id: str):
        return self._run(Call("DELETE", sandbox_path(sandbox_id), (202,), Message.from_api))

    def openapi(self) -> dict:
        return self._run(Call("GET", "/api/v1/openapi.json", (200,), envelope="aero"))

    def healthz(self) -> dict:
        return self._run(Call("GET", "/healthz", (200,), _identity))


class SessionOps:
    """The session routes, plus the audit views."""

    def _run(self, call: Call):  # pragma: no cover - provided by the client classes
        raise NotImplementedError

    def list_sessions(self, sandbox_id: str):
        return self._run(Call("GET", session_path(sandbox_id), (200,), _listing("sessions", Session.from_api)))

    def create_session(self, sandbox_id: str, spec: dict, *, idempotency_key: str | None = None):
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._run(Call("POST", session_path(sandbox_id), (200, 201), Session.from_api,
                              body=spec, headers=headers))

    def get_session(self, sandbox_id: str, session_id: str):
        return self._run(Call("GET", session_path(sandbox_id, session_id), (200,), Session.from_api))

    def update_session(self, sandbox_id: str, session_id: str, spec: dict):
        return self._run(Call("PUT", session_path(sandbox_id, session_id), (200,), Session.from_api, body=spec))

    def delete_session(self, sandbox_id: str, session_id: str):
        return self._run(Call("DELETE", session_path(sandbox_id, session_id), (200,), Message.from_api))

    def set_desired_state(self, sandbox_id: str, session_id: str, state: str):
        return self._run(Call("PUT", session_path(sandbox_id, session_id, "/desired-state"), (200,),
                              Session.from_api, body={"state": state}))

    def start_session(self, sandbox_id: str, session_id: str):
        return self.set_desired_state(sandbox_id, session_id, "running")

    def stop_session(self, sandbox_id: str, session_id: str):
        return self.set_desired_state(sandbox_id, session_id, "stopped")

    def create_attempt(self, sandbox_id: str, session_id: str, *, replace_current: bool = False):
        return self._run(Call("POST", session_path(sandbox_id, session_id, "/attempts"), (201,),
                              Session.from_api, body={"replace_current": replace_current}))

    def write_input(self, sandbox_id: str, session_id: str, *, input_id: str, data: bytes = b"",
                    eof: bool = False, expected_attempt_id: str | None = None):
        """One POST …/inputs. ``send_input`` adds generated ids and retries."""
        return self._run(Call("POST", session_path(sandbox_id, session_id, "/inputs"), (202,),
                              InputResult.from_api,
                              body=input_body(input_id, data, eof, expected_attempt_id)))

    def send_signal(self, sandbox_id: str, session_id: str, signal: str, *,
                    expected_attempt_id: str | None = None):
        body = {"signal": signal}
        if expected_attempt_id:
            body["expected_attempt_id"] = expected_attempt_id
        return self._run(Call("POST", session_path(sandbox_id, session_id, "/signals"), (202,),
                              Message.from_api, body=body))

    def resize_terminal(self, sandbox_id: str, session_id: str, rows: int, cols: int, *,
                        expected_attempt_id: str | None = None):
        body: dict = {"rows": rows, "cols": cols}
        if expected_attempt_id:
            body["expected_attempt_id"] = expected_attempt_id
        return self._run(Call("PUT", session_path(sandbox_id, session_id, "/terminal"), (200,),
                              Message.from_api, body=body))

    def list_events(self, sandbox_id: str, session_id: str, *, after: int | None = None,
                    limit: int | None = None):
        return self._run(Call("GET", session_path(sandbox_id, session_id, "/events"), (200,),
                              EventPage.from_api, params=_cursor_params(after, limit)))

    def list_attempts(self, sandbox_id: str, session_id: str):
        """Every attempt ever made (the audit view)."""
        return self._run(Call("GET", session_path(sandbox_id, session_id, "/attempts"), (200,),
                              _listing("attempts", Attempt.from_api)))

    def history(self, sandbox_id: str, session_id: str, *, after: int | None = None,
                limit: int | None = None):
        """Lifecycle events only (``session.*``, ``attempt.*``), never trimmed."""
        return self._run(Call("GET", session_path(sandbox_id, session_id, "/history"), (200,),
                              EventPage.from_api, params=_cursor_params(after, limit)))
