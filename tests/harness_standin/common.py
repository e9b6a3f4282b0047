"""What the four stand-ins share (harness-protocols.md §9, "Common to all four").

Framing: stdin split on LF only (a trailing CR stripped), one compact JSON
object per stdout line, flushed; logs go to stderr. Knobs come from the
environment: FAKE_HARNESS_STARTUP_MS, FAKE_HARNESS_TURN (auth_error|ok|hang),
FAKE_HARNESS_IGNORE_SIGTERM, FAKE_HARNESS_EXIT_AFTER_LINES, FAKE_HARNESS_TRACE.
"""
from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import uuid

_write_lock = threading.Lock()


def emit(record: dict) -> None:
    line = json.dumps(record, separators=(",", ":")) + "\n"
    with _write_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def log(message: str) -> None:
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()


def turn_mode() -> str:
    return os.environ.get("FAKE_HARNESS_TURN", "auth_error")


def new_id() -> str:
    return str(uuid.uuid4())


def home() -> str:
    return os.environ.get("HOME") or os.path.expanduser("~")


def cwd_slug(cwd: str, keep: str = "") -> str:
    return re.sub(r"[^A-Za-z0-9" + keep + "]", "-", cwd)


def install_sigterm(exit_code: int | None) -> None:
    """``exit_code`` None keeps the default action (die by the signal, as opencode does)."""
    if os.environ.get("FAKE_HARNESS_IGNORE_SIGTERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif exit_code is not None:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(exit_code))


def startup_delay() -> None:
    delay_ms = int(os.environ.get("FAKE_HARNESS_STARTUP_MS", "0") or 0)
    if delay_ms > 0:
        time.sleep(delay_ms / 1000)


def input_lines():
    """Lines of stdin as bytes; exits with 3 after FAKE_HARNESS_EXIT_AFTER_LINES lines (a crash)."""
    limit = int(os.environ.get("FAKE_HARNESS_EXIT_AFTER_LINES", "0") or 0)
    count = 0
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        count += 1
        line = line[:-1] if line.endswith(b"\n") else line
        yield line[:-1] if line.endswith(b"\r") else line
        if limit and count >= limit:
            log(f"stand-in: exiting after {count} lines (FAKE_HARNESS_EXIT_AFTER_LINES)")
            sys.stdout.flush()
            os._exit(3)


def trace(record: dict) -> None:
    """FAKE_HARNESS_TRACE=1: log each request's verb to stderr, so tests can see what arrived."""
    if os.environ.get("FAKE_HARNESS_TRACE") == "1":
        verb = record.get("method") or record.get("type")
        if verb == "control_request":
            verb = "control:" + str((record.get("request") or {}).get("subtype"))
        log(f"trace {verb} {json.dumps(record.get('params') or {}, separators=(',', ':'))}")


def parse(line: bytes):
    """The JSON object on a line, or raise ValueError."""
    record = json.loads(line.decode("utf-8"))
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return record


def option(argv: list[str], name: str) -> str | None:
    if name in argv:
        at = argv.index(name)
        return argv[at + 1] if at + 1 < len(argv) else ""
    return None


def append_jsonl(path: str, *records: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")


def read_jsonl(path: str) -> list[dict]:
    with open(path) as src:
        return [json.loads(line) for line in src if line.strip()]
