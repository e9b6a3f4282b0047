"""Stand-in for ``claude -p`` in stream-json mode (harness-protocols.md §4, §9 "Claude")."""
from __future__ import annotations

import glob
import os
import shutil
import sys

from common import (trace, append_jsonl, cwd_slug, emit, home, input_lines, install_sigterm, log, new_id, option,
                    parse, startup_delay, turn_mode)

NOT_LOGGED_IN = "Not logged in · Please run /login"


def config_dir() -> str:
    return os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(home(), ".claude")


def transcript(session_id: str) -> str:
    return os.path.join(config_dir(), "projects", cwd_slug(os.getcwd()), f"{session_id}.jsonl")


def pick_session(argv: list[str]) -> str | None:
    """The session id to use, or None after printing the real failure (the caller exits 1)."""
    resume, wanted = option(argv, "--resume"), option(argv, "--session-id")
    if resume is not None:
        if not os.path.exists(transcript(resume)):
            log(f"No conversation found with session ID: {resume}")
            emit({"type": "result", "subtype": "error_during_execution", "duration_ms": 0, "is_error": True,
                  "num_turns": 0, "stop_reason": None, "session_id": resume, "total_cost_usd": 0})
            return None
        if "--fork-session" in argv:
            forked = new_id()
            shutil.copy(transcript(resume), transcript(forked))
            return forked
        return resume
    if wanted is not None:
        if os.path.exists(transcript(wanted)):
            log(f"Error: Session ID {wanted} is already in use.")
            return None
        return wanted
    if "--continue" in argv or "-c" in argv:
        found = sorted(glob.glob(os.path.join(os.path.dirname(transcript("x")), "*.jsonl")), key=os.path.getmtime)
        if found:
            return os.path.basename(found[-1])[:-len(".jsonl")]
    return new_id()


class Claude:
    def __init__(self, session_id: str, replay: bool) -> None:
        self.session_id = session_id
        self.replay = replay
        self.last_error = False
        self.hanging = False

    def control(self, record: dict) -> None:
        request_id = record.get("request_id")
        subtype = (record.get("request") or {}).get("subtype")
        if subtype == "initialize":
            payload = {"commands": [], "agents": [], "output_style": "default", "models": [],
                       "account": {"tokenSource": "none", "apiProvider": "firstParty"}, "pid": os.getpid()}
            response = {"subtype": "success", "request_id": request_id, "response": payload}
        elif subtype == "interrupt":
            response = {"subtype": "success", "request_id": request_id}
            if self.hanging:
                self.result(is_error=False, text="", stop_reason="interrupted")
        else:
            response = {"subtype": "error", "request_id": request_id,
                        "error": f"Unsupported control request subtype: {subtype}"}
        emit({"type": "control_response", "response": response})

    def user(self, record: dict) -> None:
        message = record.get("message") or {}
        emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), "session_id": self.session_id,
              "tools": ["Bash", "Edit"], "mcp_servers": [], "model": "claude-standin",
              "permissionMode": "dontAsk", "apiKeySource": "none", "uuid": new_id()})
        if self.replay:
            emit({"type": "user", "message": message, "session_id": self.session_id,
                  "parent_tool_use_id": None, "uuid": new_id(), "isReplay": True})
        append_jsonl(transcript(self.session_id), {"type": "user", "message": message, "uuid": new_id()})
        mode = turn_mode()
        if mode == "hang":
            self.hanging = True
            return
        text = NOT_LOGGED_IN if mode == "auth_error" else "hi from fake"
        assistant = {"type": "assistant", "parent_tool_use_id": None, "session_id": self.session_id,
                     "uuid": new_id(), "message": {"role": "assistant", "model": "<synthetic>",
                                                   "content": [{"type": "text", "text": text}]}}
        if mode == "auth_error":
            assistant["error"] = "authentication_failed"
        emit(assistant)
        append_jsonl(transcript(self.session_id), {"type": "assistant", "message": assistant["message"]})
        self.result(is_error=mode == "auth_error", text=text, stop_reason="stop_sequence")

    def result(self, *, is_error: bool, text: str, stop_reason: str) -> None:
        self.hanging = False
        self.last_error = is_error
        emit({"type": "result", "subtype": "success", "is_error": is_error, "num_turns": 1, "result": text,
              "stop_reason": stop_reason, "session_id": self.session_id, "total_cost_usd": 0})


def main(argv: list[str]) -> int:
    install_sigterm(143)
    startup_delay()
    if option(argv, "--output-format") == "stream-json" and "--verbose" not in argv:
        log("Error: When using --print, --output-format=stream-json requires --verbose")
        return 1
    session_id = pick_session(argv)
    if session_id is None:
        return 1
    agent = Claude(session_id, "--replay-user-messages" in argv)
    for line in input_lines():
        try:
            record = parse(line)
        except ValueError as exc:
            log(f"Error parsing streaming input line: {line.decode(errors='replace')}: SyntaxError: {exc}")
            sys.stdout.flush()
            return 1  # a non-JSON line is fatal for claude
        trace(record)
        if record.get("type") == "control_request":
            agent.control(record)
        elif record.get("type") == "user":
            agent.user(record)
        # any other record type is ignored
    return 1 if agent.last_error else 0
