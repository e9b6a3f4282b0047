"""Hosting coding-agent CLIs: presets, and ``HarnessDriver`` with automatic recovery.

    spec = harness_spec("codex")
    session = client.create_session(sb, spec, idempotency_key="agent-1")
    with HarnessDriver(client, sb, session.id, "codex", state_path=Path("agent-1.json")) as agent:
        thread = agent.open_conversation()
        agent.call("turn/start", {"threadId": thread, "input": [{"type": "text", "text": "hi"}]})

The driver follows the session's events (one reconnecting stream), frames
stdout as JSON lines, and writes each request as an input fenced to the
attempt it handshook with, with a fresh ``input_id``. When the attempt or the
runtime generation changes (restart, ``POST …/attempts``, a resume after a
pause) it stops writing, lets the event stream carry on from its last seq,
redoes the native handshake and resumes the saved conversation: codex
``thread/resume``, opencode ``session/load``, claude ``--resume <id>`` and pi
``--session <file>`` (the last two by updating the session's command).
"""
from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import APIError, Conflict, NotFound
from .harness_presets import NAMES, harness_spec, preset
from .harness_protocols import (PROTOCOLS, AttemptEnded, HarnessCallError, HarnessError, HarnessTimeout,
                                WriteRefused as _WriteRefused)
from .harness_state import DriverState, LineBuffer, PendingCall, fail_all

__all__ = ["HarnessDriver", "HarnessError", "HarnessCallError", "HarnessTimeout", "AttemptEnded",
           "harness_spec", "preset", "NAMES"]

DEFAULT_TIMEOUT_S = 60.0
SAVE_EVERY_S = 0.2
CLIENT_INFO = {"name": "sessionctl", "title": "Session supervisor client", "version": "0.1.0"}
_DEAD_PHASES = ("exited", "failed", "stopped", "pending")


class HarnessDriver:
    def __init__(self, client, sandbox_id: str, session_id: str, harness: str, *,
                 state_path: str | Path | None = None, cwd: str = "/workspace",
                 client_info: dict | None = None, start_timeout: float = 30.0) -> None:
        self.client = client
        self.sandbox_id = sandbox_id
        self.session_id = session_id
        self.preset = preset(harness)
        self.protocol = PROTOCOLS[self.preset.protocol](client_info or CLIENT_INFO, cwd)
        self.state_path = Path(state_path) if state_path is not None else None
        self.state = DriverState.load(self.state_path, sandbox_id, session_id, self.preset.name)
        self.start_timeout = start_timeout
        self._lock = threading.RLock()
        self._pending: dict[Any, PendingCall] = {}
        self._notes: queue.Queue = queue.Queue()
        self._lines = LineBuffer(*self.state.partial)
        self._latest_attempt = ""  # the newest attempt the event stream has seen started
        self._bound = self.state.attempt_id if self.state.handshaken else ""
        self._stream = None
        self._thread: threading.Thread | None = None
        self._failure: Exception | None = None
        self._saved_at = 0.0
        self._closed = False
        self.recoveries = 0

    # ---- lifecycle ----------------------------------------------------------------------------
    def start(self) -> "HarnessDriver":
        """Start following the session's events. Every call does this by itself on first use;
        ``with HarnessDriver(...)`` also closes the stream at the end."""
        with self._lock:
            if self._closed:
                raise HarnessError("the driver was closed; create a new HarnessDriver")
            if self._thread is None:
                self._stream = self.client.iter_events(self.sandbox_id, self.session_id,
                                                       after=self.state.last_seq, follow=True, skip_gap=True,
                                                       reconnect_timeout=None)
                self._thread = threading.Thread(target=self._pump, name="harness-events", daemon=True)
                self._thread.start()
        return self

    def close(self) -> None:
        with self._lock:
            self._closed = True
        if self._stream is not None:
            self._stream.close()
        if self._thread is not None:
            self._thread.join(10)
        with self._lock:
            self._save(force=True)

    def __enter__(self) -> "HarnessDriver":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def native(self) -> dict:
        return self.state.native

    def set_native(self, **values) -> None:
        with self._lock:
            self.state.native.update(values)
            self._save(force=True)

    # ---- the public calls -----------------------------------------------------------------------
    def open_conversation(self, timeout: float | None = None, **params) -> Any:
        """Start a native thread/session; its id is saved and resumed after every recovery."""
        deadline = _deadline(timeout)
        self.ensure_ready(deadline)
        return self.protocol.open_conversation(self, deadline, params)

    def call(self, method: str, params: dict | None = None, timeout: float | None = None) -> Any:
        """Send a native request and return the native result (``HarnessCallError`` on a native error).

        Recovers first when the attempt changed. A write the server refused because the
        attempt had just changed never reached the harness, so it is sent again after recovery.
        """
        deadline = _deadline(timeout)
        while True:
            self.ensure_ready(deadline)
            try:
                return self.request(method, params, deadline)
            except _WriteRefused:
                with self._lock:
                    self.state.handshaken = False
                if time.monotonic() >= deadline:
                    raise HarnessTimeout(f"{method}: no writable attempt before the deadline") from None

    def notifications(self, timeout: float | None = None) -> Iterator[dict]:
        """Native notifications of the current attempt, until ``timeout`` passes without one."""
        while (record := self.next_notification(timeout)) is not None:
            yield record

    def next_notification(self, timeout: float | None = None) -> dict | None:
        self.start()
        try:
            return self._notes.get(timeout=timeout)
        except queue.Empty:
            return None

    def wait_notification(self, predicate: Callable[[dict], bool], timeout: float) -> dict:
        """The first notification matching ``predicate``; on timeout, cancel natively and raise."""
        deadline = _deadline(timeout)
        while (left := deadline - time.monotonic()) > 0:
            record = self.next_notification(left)
            if record is not None and predicate(record):
                return record
        self.cancel()
        raise HarnessTimeout("no matching notification before the deadline")

    def cancel(self) -> None:
        """The harness's own cancel: turn/interrupt, session/cancel, abort or control interrupt."""
        try:
            self.protocol.cancel(self)
        except (_WriteRefused, APIError):
            pass  # nothing to cancel on an attempt that is gone

    # ---- recovery ---------------------------------------------------------------------------------
    def ensure_ready(self, deadline: float | None = None) -> None:
        """Handshake (and resume) unless already done on the newest attempt."""
        deadline = deadline or _deadline(None)
        self.start()
        with self._lock:
            if self._failure is not None:
                raise HarnessError(f"event stream ended: {self._failure}") from self._failure
            current = self.state.handshaken and self._bound and self._latest_attempt in ("", self._bound)
        if not current:
            self._recover(deadline)

    def _recover(self, deadline: float) -> None:
        with self._lock:
            self._bound = ""  # stop writing: nothing goes out until the new attempt is handshaken
            self._fail_pending(AttemptEnded("the attempt changed before an answer arrived"))
        session = self._running_attempt(deadline)
        with self._lock:
            if self.state.attempt_id and self.state.attempt_id != session.attempt.id:
                self.recoveries += 1
            self.state.attempt_id = session.attempt.id
            self.state.runtime_generation = session.runtime_generation
            self.state.handshaken = False
            self._bound = session.attempt.id
            self._save(force=True)
        self.protocol.handshake(self, deadline)
        if self.native.get("persisted") or self.native.get("thread_id") or self.native.get("session_id"):
            self.protocol.resume(self, deadline)
        with self._lock:
            self.state.handshaken = True
            self._save(force=True)

    def _running_attempt(self, deadline: float):
        """Wait for a live attempt; first move the session to the command that resumes natively."""
        rewrites = 0
        while True:
            session = self.client.get_session(self.sandbox_id, self.session_id)
            command = self.protocol.resume_command(list(session.spec.get("command", [])), self.native)
            if command and command != session.spec.get("command") and rewrites < 2:
                rewrites += 1
                self.client.update_session(self.sandbox_id, self.session_id, {**session.spec, "command": command})
                continue
            attempt = session.attempt
            if attempt and attempt.started_at and not attempt.finished_at and session.phase in ("running", "starting"):
                return session
            if session.phase in _DEAD_PHASES:  # nothing will start another attempt by itself
                raise HarnessError(f"the harness session is {session.phase}")
            if time.monotonic() >= deadline:
                raise HarnessTimeout(f"no running attempt (phase {session.phase}) before the deadline")
            time.sleep(0.05)

    # ---- requests (also used by the protocols) ------------------------------------------------
    def request(self, method: str, params: dict | None, deadline: float) -> Any:
        with self._lock:
            attempt = self._bound
            if not attempt:
                raise _WriteRefused()
            key, record = self.protocol.encode(method, params, self._next_number())
            pending = self._pending[key] = PendingCall(attempt)
        try:
            self._write(record, attempt)
            if not pending.done.wait(max(0.0, deadline - time.monotonic())):
                with self._lock:  # from now on a late answer is a notification, not this call's
                    self._pending.pop(key, None)
                if not pending.done.is_set():
                    self.cancel()
                    raise HarnessTimeout(f"{method}: no answer before the deadline")
            if pending.error is not None:
                raise pending.error
            return self.protocol.outcome(pending.record)
        finally:
            with self._lock:
                self._pending.pop(key, None)

    def notify(self, method: str, params: dict | None) -> None:
        self._write(self.protocol.notification(method, params), self._bound)

    def send_request_nowait(self, method: str, params: dict | None) -> None:
        with self._lock:
            _key, record = self.protocol.encode(method, params, self._next_number())
        self._write(record, self._bound)

    def _next_number(self) -> int:
        number, self.state.next_request = self.state.next_request, self.state.next_request + 1
        return number

    def _write(self, record: dict, attempt_id: str) -> None:
        if not attempt_id:
            raise _WriteRefused()
        line = json.dumps(record, separators=(",", ":")) + "\n"
        try:
            self.client.send_input(self.sandbox_id, self.session_id, line.encode(), attempt_id=attempt_id)
        except (Conflict, NotFound) as error:
            raise _WriteRefused() from error
        except APIError as error:
            if error.status == 500 and "not running" in error.message:  # stdin already closed
                raise _WriteRefused() from error
            raise

    # ---- the event pump (its own thread) ------------------------------------------------------
    def _pump(self) -> None:
        try:
            for event in self._stream:
                with self._lock:
                    self._on_event(event)
                    self.state.last_seq = event.seq
                    self._save()
        except Exception as error:  # the session was deleted, or the server is gone for good
            with self._lock:
                self._failure = error
                self._fail_pending(HarnessError(f"event stream ended: {error}"))

    def _on_event(self, event) -> None:
        if event.type == "attempt.started" and event.attempt_id:
            self._latest_attempt = event.attempt_id
        elif event.type == "attempt.exited" and event.attempt_id == self._bound:
            self._bound = ""
            self._fail_pending(AttemptEnded("the attempt exited before an answer arrived"))
        elif event.type == "output" and event.stream == "stdout" and event.attempt_id:
            for line in self._lines.feed(event.attempt_id, event.data):
                self._on_line(event.attempt_id, line)
            self.state.set_partial(self._lines.attempt_id, self._lines.pending)

    def _on_line(self, attempt_id: str, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return  # stdout carries protocol records only; anything else is not ours to parse
        if not isinstance(record, dict):
            return
        self.protocol.observe(record, self.state.native)
        candidates = {k: p for k, p in self._pending.items() if p.attempt_id == attempt_id}
        key = self.protocol.match(record, candidates)
        if key is not None:
            pending = candidates[key]
            pending.record = record
            pending.done.set()
        elif attempt_id == self.state.attempt_id:
            self._notes.put(record)

    def _fail_pending(self, error: Exception) -> None:
        fail_all(self._pending.values(), error)

    def _save(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._saved_at >= SAVE_EVERY_S:
            self.state.save(self.state_path)
            self._saved_at = now


def _deadline(timeout: float | None) -> float:
    return time.monotonic() + (DEFAULT_TIMEOUT_S if timeout is None else timeout)
