"""Stand-in for ``pi --mode rpc`` (harness-protocols.md §6, §9 "Pi").

FAKE_HARNESS_PI_REJECT_APPROVE=1 behaves like pi 0.73 (no ``--approve``).
"""
from __future__ import annotations

import glob
import os
import time

from common import (trace, append_jsonl, emit, home, input_lines, install_sigterm, log, new_id, option, parse,
                    read_jsonl, startup_delay, turn_mode)


def agent_dir() -> str:
    return os.environ.get("PI_CODING_AGENT_DIR") or os.path.join(home(), ".pi", "agent")


def sessions_dir() -> str:
    return os.path.join(agent_dir(), "sessions", "--" + os.getcwd().strip("/").replace("/", "-") + "--")


def find_session(wanted: str) -> str | None:
    if os.path.isfile(wanted):
        return wanted
    found = [p for p in glob.glob(os.path.join(agent_dir(), "sessions", "*", "*.jsonl"))
             if os.path.basename(p).split("_", 1)[-1].startswith(wanted)]
    return found[0] if found else None


class Pi:
    def __init__(self, session_id: str, session_file: str, messages: list[dict]) -> None:
        self.session_id = session_id
        self.session_file = session_file
        self.messages = messages
        self.streaming = False

    def respond(self, record: dict, command: str, success: bool = True, data=None, error=None) -> None:
        response = {"type": "response", "command": command, "success": success}
        if "id" in record:
            response = {"id": record["id"], **response}
        if data is not None:
            response["data"] = data
        if error is not None:
            response["error"] = error
        emit(response)

    def handle(self, record: dict) -> None:
        command = record.get("type")
        handler = getattr(self, "on_" + str(command), None)
        if handler is None:
            return self.respond(record, str(command), False, error=f"Unknown command: {command}")
        handler(record)

    def on_get_state(self, record) -> None:
        self.respond(record, "get_state", data={
            "model": {"id": "unknown", "name": "unknown", "provider": "unknown"}, "thinkingLevel": "off",
            "isStreaming": self.streaming, "isCompacting": False, "sessionFile": self.session_file,
            "sessionId": self.session_id, "messageCount": len(self.messages), "pendingMessageCount": 0})

    def on_get_messages(self, record) -> None:
        self.respond(record, "get_messages", data={"messages": self.messages})

    def on_prompt(self, record) -> None:
        mode = turn_mode()
        if mode == "auth_error":
            return self.respond(record, "prompt", False, error="No API key found for the selected model.")
        user = {"role": "user", "content": record.get("message", "")}
        self.messages.append(user)
        self.respond(record, "prompt", data={"disposition": "started"})
        emit({"type": "agent_start"})
        emit({"type": "turn_start"})
        emit({"type": "message_start", "message": user})
        emit({"type": "message_end", "message": user})
        if mode == "hang":
            self.streaming = True
            return
        reply = {"role": "assistant", "content": [{"type": "text", "text": "hi from fake"}]}
        emit({"type": "message_start", "message": reply})
        emit({"type": "message_update", "message": reply})
        emit({"type": "message_end", "message": reply})
        self.messages.append(reply)
        lines = [{"type": "message", "message": m} for m in (user, reply)]
        if not os.path.exists(self.session_file):  # pi writes its file with the first assistant message
            lines.insert(0, {"type": "session", "id": self.session_id, "cwd": os.getcwd()})
        append_jsonl(self.session_file, *lines)
        emit({"type": "turn_end", "message": reply, "stopReason": "stop"})
        emit({"type": "agent_end", "messages": [user, reply]})
        emit({"type": "agent_settled", "aborted": False})

    def on_abort(self, record) -> None:
        if self.streaming:
            self.streaming = False
            emit({"type": "turn_end", "stopReason": "aborted"})
            emit({"type": "agent_settled", "aborted": True})
        self.respond(record, "abort")

    def on_bash(self, record) -> None:
        output = f"{record.get('command', '')}\n"
        emit({"type": "bash_execution_update", "id": record.get("id"), "delta": output})
        self.respond(record, "bash", data={"output": output, "exitCode": 0, "cancelled": False, "truncated": False})

    def on_set_session_name(self, record) -> None:
        emit({"type": "session_info_changed", "name": record.get("name")})
        self.respond(record, "set_session_name")


def open_session(argv: list[str]) -> Pi | None:
    wanted = option(argv, "--session")
    if wanted is not None:
        path = find_session(wanted)
        if path is None:
            log(f"No session found matching '{wanted}'")
            return None
        records = read_jsonl(path)
        session_id = records[0].get("id") if records and records[0].get("type") == "session" else new_id()
        return Pi(session_id, path, [r["message"] for r in records if r.get("type") == "message"])
    session_id = option(argv, "--session-id") or new_id()
    if "--continue" in argv or "-c" in argv:
        found = sorted(glob.glob(os.path.join(sessions_dir(), "*.jsonl")), key=os.path.getmtime)
        if found:
            return open_session(["--session", found[-1]])
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S")
    return Pi(session_id, os.path.join(sessions_dir(), f"{stamp}_{session_id}.jsonl"), [])


def main(argv: list[str]) -> int:
    install_sigterm(143)
    startup_delay()
    if "--approve" in argv and os.environ.get("FAKE_HARNESS_PI_REJECT_APPROVE") == "1":
        log("Error: Unknown option: --approve")
        return 1
    agent = open_session(argv)
    if agent is None:
        return 1
    for line in input_lines():
        try:
            record = parse(line)
        except ValueError as exc:
            emit({"type": "response", "command": "parse", "success": False,
                  "error": f"Failed to parse command: {exc}"})
            continue
        trace(record)
        agent.handle(record)
    return 0
