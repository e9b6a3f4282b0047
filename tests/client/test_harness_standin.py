"""Sanity checks of the stand-in harness (harness-protocols.md §9, "should be checked with")."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading

import pytest

from tests.client.conftest import standin

WAIT_S = 10


class Harness:
    """One stand-in process with line-oriented stdin/stdout and bounded reads."""

    def __init__(self, harness: str, argv: list[str], home, env=None, cwd=None) -> None:
        environment = {**os.environ, "HOME": str(home), **(env or {})}
        self.proc = subprocess.Popen(standin(harness) + argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=environment, cwd=cwd or str(home),
                                     start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def send(self, record) -> None:
        text = record if isinstance(record, str) else json.dumps(record)
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def until(self, predicate) -> dict:
        while True:
            record = self.lines.get(timeout=WAIT_S)
            assert record is not None, "the stand-in closed stdout"
            if predicate(record):
                return record

    def eof(self) -> int:
        self.proc.stdin.close()
        return self.proc.wait(WAIT_S)

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(WAIT_S)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(WAIT_S)


@pytest.fixture
def run(tmp_path):
    started = []

    def start(harness, argv, env=None):
        started.append(Harness(harness, argv, tmp_path, env))
        return started[-1]
    yield start
    for harness in started:
        harness.close()


def test_codex_gates_on_initialize_interrupts_turns_and_exits_0_on_sigterm(run):
    codex = run("codex", ["app-server", "--stdio"], {"FAKE_HARNESS_TURN": "hang"})
    codex.send({"method": "thread/start", "id": 1, "params": {}})
    assert codex.until(lambda r: r.get("id") == 1)["error"]["message"] == "Not initialized"
    codex.send({"method": "initialize", "id": 2, "params": {"clientInfo": {"name": "t"}}})
    codex.send({"method": "thread/start", "id": 3, "params": {}})
    thread = codex.until(lambda r: r.get("id") == 3)["result"]["thread"]["id"]
    codex.send({"method": "turn/start", "id": 4, "params": {"threadId": thread, "input": []}})
    turn = codex.until(lambda r: r.get("id") == 4)["result"]["turn"]["id"]
    codex.send({"method": "turn/interrupt", "id": 5, "params": {"threadId": thread, "turnId": turn}})
    done = codex.until(lambda r: r.get("method") == "turn/completed")
    assert done["params"]["turn"]["status"] == "interrupted"
    codex.send({"method": "bogus/method", "id": 6, "params": {}})
    assert "unknown variant" in codex.until(lambda r: r.get("id") == 6)["error"]["message"]
    assert codex.terminate() == 0


def test_claude_exits_1_on_a_non_json_line(run):
    claude = run("claude", ["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"])
    claude.send({"type": "control_request", "request_id": "req_1", "request": {"subtype": "initialize"}})
    assert claude.until(lambda r: r["type"] == "control_response")["response"]["subtype"] == "success"
    claude.send("not json")
    assert claude.proc.wait(WAIT_S) == 1


def test_opencode_cancel_ends_a_hanging_prompt_and_sigterm_kills_it(run):
    opencode = run("opencode", ["acp", "--cwd", "/w"], {"FAKE_HARNESS_TURN": "hang"})
    opencode.send({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}})
    session = opencode.until(lambda r: r.get("id") == 1)["result"]["sessionId"]
    opencode.send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                   "params": {"sessionId": session, "prompt": [{"type": "text", "text": "x"}]}})
    opencode.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}})
    assert opencode.until(lambda r: r.get("id") == 2)["result"]["stopReason"] == "end_turn"
    assert opencode.terminate() == -signal.SIGTERM


def test_pi_persists_after_an_answer_resumes_by_file_and_reports_parse_errors(run, tmp_path):
    pi = run("pi", ["--mode", "rpc"], {"FAKE_HARNESS_TURN": "ok"})
    pi.send({"id": "r1", "type": "prompt", "message": "hi"})
    pi.until(lambda r: r.get("type") == "agent_settled")
    pi.send({"id": "r2", "type": "get_state"})
    session_file = pi.until(lambda r: r.get("id") == "r2")["data"]["sessionFile"]
    pi.send("not json")
    assert pi.until(lambda r: r.get("command") == "parse")["success"] is False
    assert pi.eof() == 0
    resumed = run("pi", ["--mode", "rpc", "--session", session_file])
    resumed.send({"id": "r1", "type": "get_messages"})
    assert len(resumed.until(lambda r: r.get("id") == "r1")["data"]["messages"]) == 2
    assert resumed.terminate() == 143
    rejecting = run("pi", ["--mode", "rpc", "--approve"], {"FAKE_HARNESS_PI_REJECT_APPROVE": "1"})
    assert rejecting.proc.wait(WAIT_S) == 1
    assert b"Unknown option: --approve" in rejecting.proc.stderr.read()
