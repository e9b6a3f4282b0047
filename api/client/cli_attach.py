"""``sessionctl session attach``: an interactive terminal on a PTY session over ``…/ws``.

The local terminal goes raw (so Ctrl-C and friends reach the remote PTY), the
retained output is replayed first, the remote size follows SIGWINCH, and
Ctrl-] detaches. Detaching only closes the WebSocket: it never sends EOF and
never stops the session. The terminal is restored on every way out (detach,
the session deleted, an error, SIGTERM/SIGHUP). A dropped connection (server
restart, slow-subscriber detach) is re-opened from the last seq shown.

``--no-replay`` starts at the journal's latest seq; ``--tail N`` prints only the last N
bytes of the retained output (from the first line start within them), then follows from
the seq it read up to.

It ends with the attempt: when the attempt it shows exits, ``attach`` exits too, with the
attempt's exit code (128+N for a signal N), and attaching to a session with no attempt
running replays and ends at once with the last one's code. ``--stay`` keeps it attached
(across restarts) until Ctrl-].
"""
from __future__ import annotations

import base64
import os
import select
import shutil
import signal
import sys
import termios
import threading
import time
import tty
from contextlib import contextmanager

from .errors import ClientError
from .events import Backoff

DETACH_KEY = b"\x1d"  # Ctrl-]
DETACH_NAME = "Ctrl-]"
RESTING = ("exited", "failed", "stopped", "pending")  # no attempt is running
# Exits that do not end an attachment: a new attempt follows at once (a replaced attempt or
# spec, a replaced runtime after a server restart or a resume), or the socket's own end
# says it (a deleted session: 1000, exit status 0).
CARRIED_ON = frozenset(("attempt_replaced", "spec_replaced", "runtime_replaced", "session_deleted"))
RECONNECT_BUDGET_S = 30.0
READER_JOIN_S = 2.0
DELETED = 1000


@contextmanager
def raw_terminal(fd: int):
    saved = termios.tcgetattr(fd)

    def leave(signum, _frame):
        # Restore the terminal and go now: unwinding could block on a WebSocket close
        # handshake with a server that is gone; a client close never implies EOF anyway.
        termios.tcsetattr(fd, termios.TCSAFLUSH, saved)
        os._exit(128 + signum)

    previous = {s: signal.signal(s, leave) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        tty.setraw(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSAFLUSH, saved)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def note(text: str) -> None:
    """A status line that reads well in raw mode (CR LF) and never mixes into stdout's bytes."""
    try:
        os.write(sys.stderr.fileno(), f"\r\n[sessionctl: {text}]\r\n".encode())
    except OSError:
        pass  # the terminal is gone: nobody to tell


def exit_status(exit_code, signal_name) -> int:
    """An attempt's end as a shell's exit status: its code, or 128+N for signal N."""
    if signal_name:
        try:
            return 128 + signal.Signals[f"SIG{signal_name}"].value
        except KeyError:
            return 128 + 9
    if exit_code is None:
        return 1  # it never ran (start_failed) or its runtime was replaced
    return exit_code if exit_code >= 0 else 128 + 9


class Attachment:
    def __init__(self, client, sandbox_id: str, session_id: str, after: int, *, stay: bool = False,
                 attempt_id: str | None = None, live_after: int = 0) -> None:
        self.client = client
        self.sandbox_id = sandbox_id
        self.session_id = session_id
        self.last_seq = after
        self.stay = stay
        self.ended: int | None = None  # the exit status once the attempt shown has exited
        # The replay may hold earlier attempts' exits: only the running one's, or a later
        # one's, ends the attachment.
        self.attempt_id = attempt_id
        self.live_after = live_after
        self.socket = None
        self.readers: list[threading.Thread] = []
        self.wake_r, self.wake_w = os.pipe()
        # Set before the main loop closes the socket and the wake pipe: a reader thread that
        # is still running then ends quietly instead of writing to a closed (or reused) fd.
        self.leaving = threading.Event()
        self.wake_lock = threading.Lock()

    # ---- the reader thread: events out to the terminal ---------------------------------------
    def _read(self, socket) -> None:
        out = sys.stdout.fileno()
        try:
            for message in socket:
                if self.leaving.is_set():
                    return
                kind = message.get("type")
                event = message.get("event") if isinstance(message.get("event"), dict) else {}
                if kind == "event" and event.get("seq", 0) > self.last_seq:
                    self.last_seq = event["seq"]
                    self._show(out, event)
                    if event.get("type") == "attempt.exited" and not self.stay \
                            and event.get("reason") not in CARRIED_ON and (
                            event.get("attempt_id") == self.attempt_id or event["seq"] > self.live_after):
                        self.ended = exit_status(event.get("exit_code"), event.get("signal"))
                        self._wake()
                        return
                elif kind == "error":
                    note(f"error: {message.get('error')}")
        except Exception as error:  # a connection torn down under us
            if self.leaving.is_set():
                return
            note(f"connection error: {error}")
        self._wake()  # the connection ended: tell the main loop

    def _wake(self) -> None:
        with self.wake_lock:
            if not self.leaving.is_set():
                os.write(self.wake_w, b"c")

    @staticmethod
    def _show(out: int, event: dict) -> None:
        if event.get("type") == "output" and event.get("data_base64"):
            os.write(out, base64.b64decode(event["data_base64"]))
        elif event.get("type") == "attempt.exited":
            note(f"attempt {event.get('attempt_id')} exited ({event.get('reason', '')})")
        elif event.get("type") == "attempt.started":
            note(f"attempt {event.get('attempt_id')} started")

    def _connect(self) -> None:
        self.socket = self.client.connect(self.sandbox_id, self.session_id, after=self.last_seq)
        reader = threading.Thread(target=self._read, args=(self.socket,), daemon=True)
        self.readers.append(reader)
        reader.start()
        self._resize()

    def _resize(self) -> None:
        size = shutil.get_terminal_size(fallback=(80, 24))
        try:
            self.socket.resize(size.lines, size.columns)
        except Exception:
            pass  # the reader notices a dead connection

    # ---- the main loop: keys in, resizes, reconnects -------------------------------------------
    def run(self) -> int:
        winch_r, winch_w = os.pipe()
        previous = signal.signal(signal.SIGWINCH, lambda *_: os.write(winch_w, b"w"))
        try:
            self._connect()
            return self._loop(sys.stdin.fileno(), winch_r)
        finally:
            signal.signal(signal.SIGWINCH, previous)
            with self.wake_lock:
                self.leaving.set()
            if self.socket is not None:
                self.socket.close()
            for reader in self.readers:
                reader.join(READER_JOIN_S)  # bounded: the fds below are closed only after this
            for fd in (winch_r, winch_w, self.wake_r, self.wake_w):
                os.close(fd)

    def _loop(self, stdin: int, winch: int) -> int:
        while True:
            ready, _, _ = select.select([stdin, winch, self.wake_r], [], [])
            if winch in ready:
                os.read(winch, 64)
                self._resize()
            if self.wake_r in ready:
                os.read(self.wake_r, 64)
                if self.ended is not None:
                    return self.ended
                code = self.socket.close_code
                if code == DELETED:
                    note("the session was deleted")
                    return 0
                self._reconnect(code)
            if stdin in ready:
                data = os.read(stdin, 4096)
                if not data:
                    return 0  # our own stdin ended: detach, the session keeps its stdin open
                head, key, _ = data.partition(DETACH_KEY)
                if head:
                    self._send(head)
                if key:
                    note("detached")
                    return 0

    def _send(self, data: bytes) -> None:
        try:
            self.socket.send_input(data)
        except Exception:
            note("not sent: the connection is down")  # the reader wakes the loop to reconnect

    def _reconnect(self, code) -> None:
        backoff = Backoff(RECONNECT_BUDGET_S)
        note(f"connection closed ({code}); reconnecting after seq {self.last_seq}")
        while True:
            try:
                self._connect()
                return
            except ClientError as error:
                time.sleep(backoff.next_delay(str(error)))


def retained_tail(client, sandbox_id: str, session_id: str, after: int, size: int) -> tuple[bytes, int]:
    """The last ``size`` bytes of the retained output, and the seq they were read up to; cut
    at a line start when there is one in them (a screen starting mid-line or mid-escape
    sequence shows garbage)."""
    kept, last_seq = b"", after  # one byte more than the tail: is the cut at a line start?
    for event in client.iter_events(sandbox_id, session_id, after=after, follow=False, skip_gap=True):
        last_seq = event.seq
        if event.type == "output" and size:
            kept = (kept + event.data)[-(size + 1):]
    if len(kept) <= size:
        return kept, last_seq  # all of it
    before, tail = kept[:1], kept[1:]
    newline = tail.find(b"\n")
    if before != b"\n" and newline >= 0:
        tail = tail[newline + 1:]
    return tail, last_seq


def attach(client, sandbox_id: str, session_id: str, *, replay: str = "all",
           tail_bytes: int | None = None, stay: bool = False) -> int:
    """``replay``: "all" the retained output, or "none"; ``tail_bytes`` keeps only its last N bytes."""
    if not os.isatty(sys.stdin.fileno()):
        raise ClientError("attach needs a terminal on stdin")
    session = client.get_session(sandbox_id, session_id)
    if session.spec.get("io", {}).get("mode") != "pty":
        sys.stderr.write("sessionctl: note: a pipes session has no terminal; keys go to its stdin\n")
    after = max(0, session.cursor.earliest - 1)  # replay everything still retained
    shown = b""
    resting = session.phase in RESTING and not stay
    if replay == "none":
        after = session.cursor.latest
    elif tail_bytes is not None or resting:
        shown, after = retained_tail(client, sandbox_id, session_id, after,
                                     tail_bytes if tail_bytes is not None else 1 << 62)
    if resting:  # nothing runs: what it printed, then its end, and no terminal games
        os.write(sys.stdout.fileno(), shown)
        attempt = session.attempt
        status = exit_status(attempt.exit_code, attempt.signal) if attempt else 0
        sys.stderr.write(f"\r\n[sessionctl: session {session_id} is {session.phase}"
                         f"{f' (exit status {status})' if attempt else ''}; nothing to attach to]\r\n")
        return status
    sys.stderr.write(f"[sessionctl: attached to {session_id}; detach with {DETACH_NAME}, "
                     f"which leaves it running]\r\n")
    with raw_terminal(sys.stdin.fileno()):
        if shown:
            os.write(sys.stdout.fileno(), shown)
        return Attachment(client, sandbox_id, session_id, after, stay=stay, live_after=session.cursor.latest,
                          attempt_id=session.attempt.id if session.attempt else None).run()
