"""Stand-in for ``opencode acp`` (ACP v1, JSON-RPC 2.0; harness-protocols.md §5, §9 "OpenCode").

FAKE_HARNESS_OPENCODE_ERROR_MS is the delay before an ``auth_error`` prompt
fails (the real one retries for about 63 s).
"""
from __future__ import annotations

import json
import os
import threading
import time

from common import trace, emit, home, input_lines, install_sigterm, log, parse, startup_delay, turn_mode

CONFIG_OPTIONS = [{"id": "model", "name": "Model", "category": "model", "type": "select",
                   "currentValue": "opencode/big-pickle", "options": []},
                  {"id": "mode", "name": "Session Mode", "category": "mode", "type": "select",
                   "currentValue": "build", "options": []}]


def store_path() -> str:
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(home(), ".local", "share")
    return os.path.join(data, "opencode", "standin-sessions.json")


def load_store() -> dict:
    try:
        with open(store_path()) as src:
            return json.load(src)
    except FileNotFoundError:
        return {}


def save_store(store: dict) -> None:
    os.makedirs(os.path.dirname(store_path()), exist_ok=True)
    tmp = store_path() + ".tmp"
    with open(tmp, "w") as out:
        json.dump(store, out)
    os.replace(tmp, store_path())


class OpenCode:
    def __init__(self) -> None:
        self.store = load_store()
        self.prompts: dict[str, object] = {}  # session id -> request id of a pending prompt

    def reply(self, rid, result) -> None:
        emit({"jsonrpc": "2.0", "id": rid, "result": result})

    def error(self, rid, code: int, message: str, data=None) -> None:
        error = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        emit({"jsonrpc": "2.0", "id": rid, "error": error})
        log(f"Error handling request {json.dumps(error)}")

    def update(self, session_id: str, update: dict) -> None:
        emit({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}})

    def handle(self, record: dict) -> None:
        method, rid, params = record.get("method"), record.get("id"), record.get("params") or {}
        handler = getattr(self, "on_" + str(method).replace("/", "_"), None)
        if handler is None:
            if rid is not None:
                self.error(rid, -32601, f'"Method not found": {method}', {"method": method})
            return
        handler(rid, params)

    def on_initialize(self, rid, params) -> None:
        self.reply(rid, {"protocolVersion": 1, "agentCapabilities": {
            "loadSession": True, "mcpCapabilities": {"http": True, "sse": True},
            "promptCapabilities": {"embeddedContext": True, "image": True},
            "sessionCapabilities": {"close": {}, "fork": {}, "list": {}, "resume": {}}},
            "authMethods": [{"id": "opencode-login", "name": "Login with opencode"}],
            "agentInfo": {"name": "OpenCode", "version": "1.18.33-standin"}})

    def on_session_new(self, rid, params) -> None:
        session_id = "ses_" + os.urandom(12).hex()
        self.store[session_id] = {"cwd": params.get("cwd", ""), "title": f"New session - {time.time()}",
                                  "history": []}
        save_store(self.store)
        self.reply(rid, {"sessionId": session_id, "configOptions": CONFIG_OPTIONS})
        self.update(session_id, {"sessionUpdate": "available_commands_update", "availableCommands": []})

    def on_session_load(self, rid, params, replay: bool = True) -> None:
        session = self.store.get(params.get("sessionId", ""))
        if session is None:
            return self.error(rid, -32603, "Internal error: OpenCode service failure", {"service": "session"})
        for kind, text in session["history"] if replay else []:
            self.update(params["sessionId"], {"sessionUpdate": kind, "content": {"type": "text", "text": text}})
        self.reply(rid, {"configOptions": CONFIG_OPTIONS})

    def on_session_resume(self, rid, params) -> None:
        self.on_session_load(rid, params, replay=False)

    def on_session_list(self, rid, params) -> None:
        self.reply(rid, {"sessions": [{"sessionId": k, "cwd": v["cwd"], "title": v["title"]}
                                      for k, v in self.store.items()]})

    def on_session_prompt(self, rid, params) -> None:
        session_id = params.get("sessionId", "")
        session = self.store.get(session_id)
        if session is None:
            return self.error(rid, -32603, "Internal error: OpenCode service failure", {"service": "session"})
        text = " ".join(p.get("text", "") for p in params.get("prompt") or [] if isinstance(p, dict))
        session["history"].append(["user_message_chunk", text])
        save_store(self.store)
        mode = turn_mode()
        if mode == "ok":
            session["history"].append(["agent_message_chunk", "hi from fake"])
            save_store(self.store)
            self.update(session_id, {"sessionUpdate": "agent_message_chunk",
                                     "content": {"type": "text", "text": "hi from fake"}})
            self.reply(rid, {"stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 1}})
        elif mode == "hang":
            self.prompts[session_id] = rid
        else:
            delay = int(os.environ.get("FAKE_HARNESS_OPENCODE_ERROR_MS", "0") or 0) / 1000
            self.prompts[session_id] = rid
            threading.Timer(delay, self.fail_prompt, (session_id, rid)).start()

    def fail_prompt(self, session_id: str, rid) -> None:
        if self.prompts.get(session_id) != rid:
            return  # cancelled meanwhile
        del self.prompts[session_id]
        self.update(session_id, {"sessionUpdate": "usage_update", "used": 0, "size": 200000})
        self.error(rid, -32603, "Internal error: Cannot connect to API: Unable to connect.",
                   {"service": "session", "errorName": "APIError"})

    def on_session_cancel(self, rid, params) -> None:
        session_id = params.get("sessionId", "")
        pending = self.prompts.pop(session_id, None)
        if pending is not None:
            self.update(session_id, {"sessionUpdate": "usage_update", "used": 0, "size": 200000})
            self.reply(pending, {"stopReason": "end_turn", "usage": {"inputTokens": 0, "outputTokens": 0}})


def main(argv: list[str]) -> int:
    install_sigterm(None)  # opencode dies by the signal
    startup_delay()
    agent = OpenCode()
    for line in input_lines():
        try:
            record = parse(line)
        except ValueError as exc:
            log(f"Failed to parse JSON message: {line.decode(errors='replace')} {exc}")
            continue
        trace(record)
        agent.handle(record)
    return 0
