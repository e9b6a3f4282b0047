"""Stand-in for ``codex app-server --stdio`` (harness-protocols.md §3, §9 "Codex")."""
from __future__ import annotations

import glob
import os
import time

from common import (trace, append_jsonl, emit, home, input_lines, install_sigterm, log, new_id, parse,
                    read_jsonl, startup_delay, turn_mode)

METHODS = ("initialize", "thread/start", "thread/resume", "thread/read", "thread/list",
           "thread/inject_items", "turn/start", "turn/interrupt", "account/read", "model/list")


class Codex:
    def __init__(self) -> None:
        self.codex_home = os.environ.get("CODEX_HOME") or os.path.join(home(), ".codex")
        self.initialized = False
        self.threads: dict[str, dict] = {}
        self.turns: dict[str, str] = {}  # turn id -> thread id of turns still in progress

    def error(self, rid, message: str, code: int = -32600) -> None:
        emit({"error": {"code": code, "message": message}, "id": rid})

    def rollout(self, thread_id: str) -> str | None:
        found = glob.glob(os.path.join(self.codex_home, "sessions", "*", "*", "*", f"rollout-*-{thread_id}.jsonl"))
        return found[0] if found else None

    def thread(self, thread_id: str, cwd: str) -> dict:
        day = time.strftime("%Y/%m/%d")
        path = os.path.join(self.codex_home, "sessions", day,
                            f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S')}-{thread_id}.jsonl")
        return {"id": thread_id, "sessionId": thread_id, "preview": "", "ephemeral": False, "cwd": cwd,
                "path": path, "status": {"type": "idle"}, "turns": [], "modelProvider": "openai"}

    def persist(self, thread: dict, *items: dict) -> None:
        if not thread.get("ephemeral"):
            append_jsonl(self.rollout(thread["id"]) or thread["path"], *items)

    def handle(self, record: dict) -> None:
        method, rid, params = record.get("method"), record.get("id"), record.get("params") or {}
        if rid is None:
            return  # notifications ("initialized", …) get no reply
        if method not in METHODS:
            self.error(rid, f"Invalid request: unknown variant `{method}`, expected one of "
                            + ", ".join(f"`{m}`" for m in METHODS))
        elif method == "initialize":
            self.initialize(rid, params)
        elif not self.initialized:
            self.error(rid, "Not initialized")
        else:
            getattr(self, method.replace("/", "_"))(rid, params)

    def initialize(self, rid, params) -> None:
        if self.initialized:
            return self.error(rid, "Already initialized")
        if "clientInfo" not in params:
            return self.error(rid, "Invalid request: missing field `clientInfo`")
        self.initialized = True
        name = params["clientInfo"].get("name", "client")
        emit({"id": rid, "result": {"userAgent": f"{name}/0.171.0-standin", "codexHome": self.codex_home,
                                    "platformFamily": "unix", "platformOs": "linux"}})

    def account_read(self, rid, params) -> None:
        emit({"id": rid, "result": {"account": None, "requiresOpenaiAuth": True}})

    def model_list(self, rid, params) -> None:
        emit({"id": rid, "result": {"data": [{"id": "gpt-standin", "isDefault": True}]}})

    def thread_start(self, rid, params) -> None:
        thread = self.thread(new_id(), params.get("cwd") or os.getcwd())
        thread["ephemeral"] = bool(params.get("ephemeral"))
        self.threads[thread["id"]] = thread
        emit({"id": rid, "result": {"thread": thread, "model": "gpt-standin", "modelProvider": "openai",
                                    "cwd": thread["cwd"], "approvalPolicy": "on-request",
                                    "sandbox": {"type": "readOnly", "networkAccess": False}}})
        emit({"method": "thread/started", "params": {"thread": thread}})

    def thread_resume(self, rid, params) -> None:
        thread_id = params.get("threadId", "")
        path = self.rollout(thread_id)
        if path is None:
            return self.error(rid, f"no rollout found for thread id {thread_id}")
        thread = self.threads.get(thread_id) or {**self.thread(thread_id, os.getcwd()), "path": path}
        self.threads[thread_id] = thread
        thread = {**thread, "turns": [r for r in read_jsonl(path) if r.get("type") == "turn"]}
        emit({"id": rid, "result": {"thread": thread, "model": "gpt-standin", "turnsBackwardsCursor": None}})
        emit({"method": "thread/status/changed", "params": {"threadId": thread_id, "status": {"type": "idle"}}})

    def thread_read(self, rid, params) -> None:
        thread = self.threads.get(params.get("threadId", ""))
        if thread is None:
            return self.error(rid, f"thread not found: {params.get('threadId')}")
        emit({"id": rid, "result": {"thread": thread}})

    def thread_list(self, rid, params) -> None:
        emit({"id": rid, "result": {"data": list(self.threads.values())}})

    def thread_inject_items(self, rid, params) -> None:
        thread = self.threads.get(params.get("threadId", ""))
        if thread is None:
            return self.error(rid, f"thread not found: {params.get('threadId')}")
        self.persist(thread, *({"type": "item", "item": i} for i in params.get("items") or [{}]))
        emit({"id": rid, "result": {}})

    def turn_start(self, rid, params) -> None:
        thread = self.threads.get(params.get("threadId", ""))
        if thread is None:
            return self.error(rid, f"thread not found: {params.get('threadId')}")
        tid, turn_id = thread["id"], new_id()
        turn = {"id": turn_id, "items": [], "status": "inProgress", "error": None}
        self.persist(thread, {"type": "turn", "id": turn_id, "input": params.get("input")})
        emit({"id": rid, "result": {"turn": turn}})
        emit({"method": "thread/status/changed", "params": {"threadId": tid, "status": {"type": "active"}}})
        emit({"method": "turn/started", "params": {"threadId": tid, "turn": turn}})
        item = {"type": "userMessage", "id": new_id(), "content": params.get("input") or []}
        for kind in ("item/started", "item/completed"):
            emit({"method": kind, "params": {"item": item, "threadId": tid, "turnId": turn_id}})
        self.turns[turn_id] = tid
        mode = turn_mode()
        if mode == "ok":
            self.finish_ok(tid, turn_id)
        elif mode == "auth_error":
            emit({"method": "error", "params": {"error": {"message": "Reconnecting... 1/5"}, "willRetry": True,
                                                "threadId": tid, "turnId": turn_id}})

    def finish_ok(self, tid: str, turn_id: str) -> None:
        item = {"type": "agentMessage", "id": new_id(), "text": "hi from fake"}
        emit({"method": "item/started", "params": {"item": {**item, "text": ""}, "threadId": tid, "turnId": turn_id}})
        emit({"method": "item/agentMessage/delta", "params": {"delta": "hi from fake", "itemId": item["id"],
                                                              "threadId": tid, "turnId": turn_id}})
        emit({"method": "item/completed", "params": {"item": item, "threadId": tid, "turnId": turn_id}})
        self.complete(tid, turn_id, "completed")

    def complete(self, tid: str, turn_id: str, status: str) -> None:
        self.turns.pop(turn_id, None)
        emit({"method": "thread/status/changed", "params": {"threadId": tid, "status": {"type": "idle"}}})
        emit({"method": "turn/completed", "params": {"threadId": tid, "turn": {"id": turn_id, "items": [],
                                                                               "status": status, "error": None}}})

    def turn_interrupt(self, rid, params) -> None:
        emit({"id": rid, "result": {}})
        turn_id = params.get("turnId", "")
        if turn_id in self.turns:
            self.complete(self.turns[turn_id], turn_id, "interrupted")


def main(argv: list[str]) -> int:
    install_sigterm(0)  # the wrapper forwards SIGTERM; rc 0
    startup_delay()
    codex_home = os.environ.get("CODEX_HOME")
    if codex_home and not os.path.isdir(codex_home):
        log(f'Error: CODEX_HOME points to "{codex_home}", but that path does not exist')
        return 1
    server = Codex()
    for line in input_lines():
        try:
            record = parse(line)
        except ValueError as exc:
            log(f"Failed to deserialize JSONRPCMessage: {exc}")
            continue
        trace(record)
        server.handle(record)
    return 0
