"""The sandbox itself says whether it can start a command, just before it execs it.

Whether a command or a cwd exists is a question about the sandbox's view of the world (its
read-only system, /workspace bound from somewhere else, the session's own PATH), not the
server's. Without asking the sandbox, the server saw its launcher (unshare, bwrap, env)
start fine, answered ``running`` and ``session.ready``, and then the attempt crashed with
exit 127 and the launcher's own message (``/usr/bin/env: 'x': No such file or directory``,
``bwrap: Can't chdir to ...``); with ``restart: on_failure`` that was a crash loop.

So the last step inside the sandbox is a POSIX ``sh`` (``EXEC_SCRIPT``) that changes to the
cwd, looks argv[0] up in the session's PATH as exec will, and writes one NUL-terminated
report to fd ``REPORT_FD``: ``ok`` right before it closes that fd and execs the command, or
``error <why>`` naming the cwd or the command (Go's wording, as the reference reports it)
and exits. The launch chain moves the runner's pipe onto that fd (``REPORT_FD_VAR`` names
the runner's descriptor); the runner waits for the report (``StartReport``) and turns an
error, or a pipe closed with no report at all (the launcher died before the check), into a
``StartFailedError``. Output read before the report is held back (``HeldOutput``): on a
failure it is the launcher's and is dropped, otherwise it is handed on in order.

What the check cannot see: an exec that fails after ``ok`` (a script whose ``#!``
interpreter is missing, a binary for another machine) still ends as an exit 126/127.

Trust: the report is written inside the sandbox, where the tenant's other processes run as
the same uid, so it is believed only about this one launch of that sandbox: at most 16 KiB,
read without blocking, taken as text, and a wrong word costs that tenant its own start. The
tenant's command never holds the pipe (it is closed before the exec).
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal

from session_supervisor.domain.ports import OutputCallback, StartFailedError

REPORT_FD = 9  # dash takes single-digit descriptors only
REPORT_FD_VAR = "SESSIOND_START_REPORT_FD"
SHELL = "/bin/sh"
REPORT_TIMEOUT_S = 30.0  # a frozen or starved sandbox; then the process counts as started
_MAX_REPORT = 16384      # a cwd and an argv[0] of 4096 bytes each, and the words around them
OK = "ok"
NO_REPORT = "the sandbox could not start the process (it ended before its command ran)"
_LOGGED_BYTES = 2048  # of the launcher's own words, for the operator
log = logging.getLogger(__name__)

# $1: the cwd as the sandbox sees it, then argv. No variable is assigned on the way to the
# exec (the PATH search runs in a subshell): an assignment to a name the session's
# environment exports would change the command's environment.
EXEC_SCRIPT = r"""
fail() { printf 'error %s\000' "$1" 2>/dev/null >&9; printf 'sessiond: %s\n' "$1" >&2; exit 127; }
cd -- "$1" 2>/dev/null || {
  if [ ! -e "$1" ]; then fail "chdir $1: no such file or directory"
  elif [ ! -d "$1" ]; then fail "chdir $1: not a directory"
  else fail "chdir $1: permission denied"; fi
}
shift
(
  case $1 in
    */*) [ -e "$1" ] || exit 2; [ -d "$1" ] && exit 3; [ -x "$1" ] || exit 3; exit 0 ;;
    '') exit 4 ;;
  esac
  p=${PATH-/usr/local/bin:/usr/bin:/bin}
  while :; do
    d=${p%%:*}
    [ -f "${d:-.}/$1" ] && [ -x "${d:-.}/$1" ] && exit 0
    case $p in *:*) p=${p#*:} ;; *) exit 4 ;; esac
  done
)
case $? in
  0) ;;
  2) fail "exec: \"$1\": no such file or directory" ;;
  3) fail "exec: \"$1\": permission denied" ;;
  *) fail "exec: \"$1\": executable file not found in \$PATH" ;;
esac
printf 'ok\000' 2>/dev/null >&9
exec 9>&-
exec "$@"
"""


def exec_argv(cwd: str, argv: list[str]) -> list[str]:
    """What runs last inside the sandbox: the check, then ``argv`` in place of the shell."""
    return [SHELL, "-c", EXEC_SCRIPT, "sessiond-start", cwd, *argv]


class StartReport:
    """The runner's end of the report pipe: ``child_fd`` goes to the launch, we read the other."""

    def __init__(self) -> None:
        self._read, self.child_fd = os.pipe2(os.O_CLOEXEC)
        self._data = bytearray()

    def child_started(self) -> None:
        """The child has its copy now: ours must go, or the pipe never reports EOF."""
        if self.child_fd >= 0:
            os.close(self.child_fd)
            self.child_fd = -1

    def close(self) -> None:
        self.child_started()
        if self._read >= 0:
            os.close(self._read)
            self._read = -1

    async def outcome(self, timeout: float = REPORT_TIMEOUT_S) -> str | None:
        """None once the sandbox execs the command; else why it could not (no report at all:
        the launch failed before the check). After ``timeout`` without a report the process
        is taken as started: a sandbox frozen mid-launch is not a failure to start."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()

        def readable() -> None:
            try:
                chunk = os.read(self._read, _MAX_REPORT)
            except BlockingIOError:
                return
            except OSError as exc:
                chunk = b""
                self._data += f"error report pipe: {exc}".encode() + b"\0"
            self._data += chunk
            if (not chunk or b"\0" in self._data or len(self._data) >= _MAX_REPORT) and not done.done():
                done.set_result(None)

        os.set_blocking(self._read, False)
        loop.add_reader(self._read, readable)
        try:
            await asyncio.wait_for(done, timeout)
        except TimeoutError:
            return None
        finally:
            loop.remove_reader(self._read)
            self.close()
        return _judge(bytes(self._data))


def _judge(data: bytes) -> str | None:
    report = data.split(b"\0", 1)[0].decode(errors="replace")
    if report == OK:
        return None
    if report.startswith("error "):
        return report[len("error "):]
    return NO_REPORT


class HeldOutput:
    """Output delivered before the start report: held, then handed on or dropped.

    Only a few reads can arrive in between (the command writes only after the ``ok``), so
    nothing bounds the list but that.
    """

    def __init__(self, on_output: OutputCallback) -> None:
        self._on_output = on_output
        self._held: list[tuple[str, bytes]] | None = []

    def __call__(self, stream: str, data: bytes) -> None:
        if self._held is None:
            self._on_output(stream, data)
        else:
            self._held.append((stream, data))

    def release(self) -> None:
        held, self._held = self._held or [], None
        for stream, data in held:
            self._on_output(stream, data)

    def drop(self) -> bytes:
        """Forget what was held; returns it (the launcher's words, for the log)."""
        held, self._held = self._held or [], []
        return b"".join(data for _, data in held)


def report_env(env: dict[str, str], report: StartReport | None) -> dict[str, str]:
    """The launcher's environment, naming the report pipe for the launch chain."""
    return env if report is None else {**env, REPORT_FD_VAR: str(report.child_fd)}


async def settle(report: StartReport | None, held: HeldOutput, handle) -> None:
    """Wait for the sandbox's report; on a failure end the process and raise StartFailedError."""
    if report is None:
        held.release()
        return
    try:
        failure = await report.outcome()
    except BaseException:
        handle.discard()
        raise
    if failure is None:
        held.release()
        return
    words = held.drop()  # the launcher's words, or the check's: the failure says it better
    if failure == NO_REPORT:  # not the tenant's doing as far as we know: the operator needs the why
        log.warning("a launch ended before its start report; the launcher said: %r", words[-_LOGGED_BYTES:])
    handle.send_signal(signal.SIGKILL)  # it exits by itself (127): only to be sure
    try:
        await asyncio.wait_for(handle.wait_exited(), 10)
    except TimeoutError:
        handle.discard()
    raise StartFailedError(failure)
