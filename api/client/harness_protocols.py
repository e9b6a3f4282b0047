"""The four native protocols as the driver needs them.

A protocol encodes a call, recognises the record that answers it, performs
the initialize handshake, opens and resumes a conversation, and cancels with
the harness's own verb. Native ids live in ``driver.native`` (a dict saved
with the driver's state); ``persisted`` says the harness wrote the
conversation to disk, which is when resuming it can work.
"""
from __future__ import annotations

from typing import Any

from .harness_presets import insert_args


class HarnessCallError(Exception):
    """The harness answered a call with its own error."""

    def __init__(self, message: str, code: Any = None, response: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.response = response


class HarnessError(Exception):
    """The harness cannot be driven right now (stopped, failed, session deleted)."""


class HarnessTimeout(HarnessError, TimeoutError):
    """No answer before the deadline; the harness's own cancel was sent."""


class AttemptEnded(HarnessError):
    """The attempt ended after the request was written: its outcome is unknown."""


class WriteRefused(Exception):
    """The server refused the write (fenced to an older attempt): nothing reached the harness."""


class Protocol:
    name = ""

    def __init__(self, client_info: dict, cwd: str) -> None:
        self.client_info = client_info
        self.cwd = cwd

    def encode(self, method: str, params: dict | None, number: int) -> tuple[Any, dict]:
        raise NotImplementedError

    def notification(self, method: str, params: dict | None) -> dict:
        raise NotImplementedError

    def match(self, record: dict, pending) -> Any:
        """The pending key this record answers, or None for a notification."""
        key = record.get("id")
        return key if key in pending and ("result" in record or "error" in record) else None

    def outcome(self, record: dict) -> Any:
        if "error" in record:
            error = record["error"] if isinstance(record["error"], dict) else {"message": record["error"]}
            raise HarnessCallError(str(error.get("message")), error.get("code"), record)
        return record.get("result")

    def handshake(self, driver, deadline: float) -> None:
        raise NotImplementedError

    def open_conversation(self, driver, deadline: float, params: dict) -> Any:
        raise NotImplementedError

    def resume(self, driver, deadline: float) -> None:
        """Re-open the saved conversation in a freshly handshaken process (request-based resumes)."""

    def resume_command(self, command: list[str], native: dict) -> list[str] | None:
        """The argv that resumes the saved conversation (argv-based resumes), or None."""
        return None

    def observe(self, record: dict, native: dict) -> None:
        """Learn native ids and persistence from notifications."""

    def cancel(self, driver) -> None:
        raise NotImplementedError


class Codex(Protocol):
    """``codex app-server --stdio``: JSON-RPC-like lines without a ``jsonrpc`` key."""

    name = "codex"

    def encode(self, method, params, number):
        return number, {"method": method, "id": number, "params": params or {}}

    def notification(self, method, params):
        return {"method": method, "params": params or {}}

    def handshake(self, driver, deadline):
        driver.request("initialize", {"clientInfo": self.client_info}, deadline)
        driver.notify("initialized", {})

    def open_conversation(self, driver, deadline, params):
        result = driver.request("thread/start", {"cwd": self.cwd, **params}, deadline)
        driver.set_native(thread_id=result["thread"]["id"], persisted=False, open_params=params)
        return driver.native["thread_id"]

    def resume(self, driver, deadline):
        if not driver.native.get("persisted"):
            # A thread with no items has no rollout to resume: open a fresh one.
            self.open_conversation(driver, deadline, driver.native.get("open_params") or {})
            return
        driver.request("thread/resume", {"threadId": driver.native["thread_id"]}, deadline)

    def observe(self, record, native):
        method, params = record.get("method"), record.get("params") or {}
        result = record.get("result") if isinstance(record.get("result"), dict) else {}
        if isinstance(result.get("turn"), dict) and result["turn"].get("status") == "inProgress":
            native["active_turn"] = result["turn"].get("id")  # the turn/start answer names the turn
            native["persisted"] = True
        if method == "turn/started" or method == "item/started":
            native["persisted"] = True  # the rollout is written once the thread has items
            turn = params.get("turn") or {}
            native["active_turn"] = turn.get("id") or params.get("turnId") or native.get("active_turn")
        elif method == "turn/completed":
            native.pop("active_turn", None)

    def cancel(self, driver):
        turn, thread = driver.native.get("active_turn"), driver.native.get("thread_id")
        if turn and thread:
            driver.send_request_nowait("turn/interrupt", {"threadId": thread, "turnId": turn})


class Claude(Protocol):
    """``claude -p`` stream-json: control requests answered by id; a user turn by its ``result``."""

    name = "claude"

    def encode(self, method, params, number):
        if method == "user":
            message = {"role": "user", "content": (params or {}).get("content", "")}
            return f"turn-{number:012d}", {"type": "user", "message": message, "parent_tool_use_id": None}
        request_id = f"req_{number}"
        return request_id, {"type": "control_request", "request_id": request_id,
                            "request": {"subtype": method, **(params or {})}}

    def notification(self, method, params):
        return {"type": method, **(params or {})}

    def match(self, record, pending):
        if record.get("type") == "control_response":
            key = (record.get("response") or {}).get("request_id")
            return key if key in pending else None
        if record.get("type") == "result":
            turns = sorted(k for k in pending if str(k).startswith("turn-"))
            return turns[0] if turns else None  # turns are answered in the order they were sent
        return None

    def outcome(self, record):
        if record.get("type") == "result":
            return record
        response = record.get("response") or {}
        if response.get("subtype") == "error":
            raise HarnessCallError(str(response.get("error")), "error", record)
        return response.get("response", {})

    def handshake(self, driver, deadline):
        driver.request("initialize", {}, deadline)

    def open_conversation(self, driver, deadline, params):
        # Claude assigns the session id when the first user message arrives (system/init).
        if params.get("prompt") is not None:
            driver.request("user", {"content": params["prompt"]}, deadline)
        return driver.native.get("session_id")

    def observe(self, record, native):
        if record.get("type") == "system" and record.get("subtype") == "init" and record.get("session_id"):
            native["session_id"] = record["session_id"]
            native["persisted"] = True  # the transcript exists once a user message was taken
        elif record.get("type") == "result" and record.get("session_id"):
            native.setdefault("session_id", record["session_id"])

    def resume_command(self, command, native):
        session_id = native.get("session_id")
        if not session_id or not native.get("persisted"):
            return None
        return insert_args("claude", _without(command, ("--resume", "--session-id"), ("--continue",)),
                           ["--resume", session_id])

    def cancel(self, driver):
        driver.send_request_nowait("interrupt", {})


class OpenCode(Protocol):
    """``opencode acp``: JSON-RPC 2.0 (ACP v1)."""

    name = "opencode"

    def encode(self, method, params, number):
        return number, {"jsonrpc": "2.0", "id": number, "method": method, "params": params or {}}

    def notification(self, method, params):
        return {"jsonrpc": "2.0", "method": method, "params": params or {}}

    def handshake(self, driver, deadline):
        driver.request("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            "clientInfo": self.client_info}, deadline)

    def open_conversation(self, driver, deadline, params):
        result = driver.request("session/new", {"cwd": self.cwd, "mcpServers": [], **params}, deadline)
        driver.set_native(session_id=result["sessionId"], persisted=True)  # persisted at once
        return result["sessionId"]

    def resume(self, driver, deadline):
        driver.request("session/load", {"sessionId": driver.native["session_id"], "cwd": self.cwd,
                                        "mcpServers": []}, deadline)

    def cancel(self, driver):
        if driver.native.get("session_id"):
            driver.notify("session/cancel", {"sessionId": driver.native["session_id"]})


class Pi(Protocol):
    """``pi --mode rpc``: ``{id, type}`` commands answered by ``type: "response"`` records."""

    name = "pi"

    def encode(self, method, params, number):
        key = f"r{number}"
        return key, {"id": key, "type": method, **(params or {})}

    def notification(self, method, params):
        return {"type": method, **(params or {})}

    def match(self, record, pending):
        key = record.get("id")
        return key if record.get("type") == "response" and key in pending else None

    def outcome(self, record):
        if not record.get("success"):
            raise HarnessCallError(str(record.get("error")), record.get("command"), record)
        return record.get("data")

    def handshake(self, driver, deadline):
        self._learn(driver, driver.request("get_state", {}, deadline))

    def open_conversation(self, driver, deadline, params):
        self._learn(driver, driver.request("get_state", {}, deadline))
        return driver.native.get("session_id")

    @staticmethod
    def _learn(driver, state):
        state = state or {}
        if not driver.native.get("persisted"):  # keep the resumed session's ids, not a fresh one's
            driver.set_native(session_id=state.get("sessionId"), session_file=state.get("sessionFile"))

    def observe(self, record, native):
        if record.get("type") in ("agent_end", "turn_end", "message_end"):
            message = record.get("message") or {}
            if record.get("type") != "message_end" or message.get("role") == "assistant":
                native["persisted"] = True  # pi writes its session file after an assistant message

    def resume_command(self, command, native):
        session_file = native.get("session_file")
        if not session_file or not native.get("persisted"):
            return None
        return _without(command, ("--session", "--session-id"), ("--continue", "-c")) + ["--session", session_file]

    def cancel(self, driver):
        driver.send_request_nowait("abort", {})


def _without(command: list[str], with_value: tuple[str, ...], flags: tuple[str, ...]) -> list[str]:
    out, skip = [], False
    for arg in command:
        if skip:
            skip = False
        elif arg in with_value:
            skip = True
        elif arg not in flags:
            out.append(arg)
    return out


PROTOCOLS: dict[str, type[Protocol]] = {"codex": Codex, "claude": Claude, "opencode": OpenCode, "pi": Pi}
