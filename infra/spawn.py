"""Starting a child without forking the server, and seeing it exit without reaping it early.

uvloop's ``subprocess_exec`` (libuv's ``uv_spawn``) and ptyprocess both ``fork`` the server
on the event loop: copying the page tables of an 80 MiB process took 2.5-6 ms per start
(py-spy, 16 concurrent creates: 42-45% of the create path). ``subprocess.Popen`` without a
``preexec_fn`` starts the child with ``vfork``, the parent waiting only until the exec:
0.15-0.6 ms. It also closes every inherited descriptor (``close_range``), starts the new
session, restores the signals Python ignores (SIGPIPE, SIGXFSZ), and reports a failed
chdir or exec (and an env that exec cannot express) as an exception before it returns.

It runs on one thread of its own: CPython drops the GIL while it waits for the vfork child's
exec (gh-104372; on 3.11.7 another thread measurably runs meanwhile), so the loop goes on
serving (the exec is the long part under load, when the child waits for a CPU). One thread
is plenty (0.15-0.6 ms a start) and keeps starts in order; an exec that hangs (a binary on
a stuck network filesystem) holds up the starts behind it, where a fork on the loop had
held up the whole server.

The exit is seen through a pidfd (Linux 5.3+) watched by the loop, which does not reap:
the runner reaps (``reap``) once it is done with the process, so until then the pid, and
with it the process group id, cannot be reused and a late ``killpg`` reaches no stranger.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import subprocess
import threading
from typing import Callable, Sequence

from session_supervisor.domain.ports import StartFailedError

_POLL_S = 0.05  # without pidfds (Linux < 5.3): how often to look for the exit


def _unblock_all_signals() -> None:
    """The spawn thread's mask is what every child starts with: empty, whatever the server's."""
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawn",
                                                 initializer=_unblock_all_signals)
# Popen restores these two itself (restore_signals); SIGKILL and SIGSTOP cannot be changed.
_LEFT_TO_POPEN = {signal.SIGPIPE, signal.SIGXFSZ, signal.SIGKILL, signal.SIGSTOP}
_dispositions_reset = False


def _ignore_quietly(signum, frame) -> None:
    """Stands in for an inherited SIG_IGN: the server still ignores the signal, but a handler,
    unlike SIG_IGN, is reset to the default by exec."""


def reset_inherited_ignores() -> None:
    """A server started under ``nohup`` (or any parent that ignores HUP, QUIT, INT) passes
    SIG_IGN on to every child: a PTY shell would survive its hang-up. Each ignored signal gets a
    handler that ignores it instead, so children start with default dispositions and no fork
    (a ``preexec_fn``) is needed per start. Signals can be set from the main thread only: the
    loop runs there in the server and in tests; elsewhere this waits for a later call."""
    global _dispositions_reset
    if _dispositions_reset or threading.current_thread() is not threading.main_thread():
        return
    for signum in signal.valid_signals() - _LEFT_TO_POPEN:
        try:
            if signal.getsignal(signum) == signal.SIG_IGN:
                signal.signal(signum, _ignore_quietly)
        except (OSError, ValueError, RuntimeError):
            pass  # a real-time signal the interpreter does not manage
    _dispositions_reset = True


async def spawn(argv: Sequence[str], cwd: str | None, env: dict[str, str], stdio: tuple[int, int, int],
                *, new_session: bool = True, preexec_fn: Callable[[], None] | None = None,
                pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    """Start ``argv`` with ``stdio`` as its fds 0-2, on the spawn thread.

    ``stdio`` becomes this call's: those descriptors are closed once the child has its
    copies, whatever happens (``pass_fds``, inherited at their own numbers, stay the
    caller's). Any failure to start is a StartFailedError. Cancelled meanwhile, the child
    (if it started) is killed and reaped on the spawn thread, which does not need the
    loop to be still running then.
    """
    reset_inherited_ignores()
    job = _SPAWNER.submit(_popen, list(argv), cwd, env, stdio, new_session, preexec_fn, pass_fds)
    try:
        return await asyncio.shield(asyncio.wrap_future(job))
    except asyncio.CancelledError:
        job.add_done_callback(_kill_orphan)
        raise


async def idle() -> None:
    """Once every spawn submitted so far has finished (its orphan, if any, reaped)."""
    await asyncio.wrap_future(_SPAWNER.submit(lambda: None))


def _popen(argv: list[str], cwd: str | None, env: dict[str, str], stdio: tuple[int, int, int],
           new_session: bool, preexec_fn: Callable[[], None] | None,
           pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    try:
        if not argv:
            raise StartFailedError("empty argv")
        return subprocess.Popen(argv, cwd=cwd or None, env=env, stdin=stdio[0], stdout=stdio[1],
                                stderr=stdio[2], close_fds=True, start_new_session=new_session,
                                preexec_fn=preexec_fn, pass_fds=pass_fds)
    except (OSError, ValueError, TypeError, subprocess.SubprocessError) as exc:
        # OSError: missing/non-executable argv[0] or cwd (named in the message);
        # ValueError: NUL bytes or '=' in env names, which exec cannot express.
        raise StartFailedError(str(exc) or type(exc).__name__) from exc
    finally:
        for fd in set(stdio):
            os.close(fd)


def _kill_orphan(job: concurrent.futures.Future) -> None:
    """Runs on the spawn thread (or where the cancel landed, if the start was done by then)."""
    if job.cancelled() or job.exception() is not None:
        return
    proc = job.result()
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # its group: it may have started children already
    except ProcessLookupError:
        proc.kill()  # not yet a group leader (setsid still to come)
    proc.wait()  # SIGKILL: a moment


class ExitWatch:
    """Calls ``on_exit`` on the loop once the child has exited (it is left unreaped)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, proc: subprocess.Popen,
                 on_exit: Callable[[], None]) -> None:
        self._loop = loop
        self._proc = proc
        self._on_exit = on_exit
        self._timer: asyncio.TimerHandle | None = None
        self.exited = False
        try:
            self._pidfd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self._pidfd = None
            self._poll()
            return
        loop.add_reader(self._pidfd, self._fire)

    def _poll(self) -> None:
        try:
            # WNOWAIT: look without reaping.
            info = os.waitid(os.P_PID, self._proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped already: it has exited all the same
            info = True
        if info is not None:
            self._fire()
        else:
            self._timer = self._loop.call_later(_POLL_S, self._poll)

    def _fire(self) -> None:
        if self.exited:
            return
        self.exited = True
        self.close()
        self._on_exit()

    def close(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def reap(proc: subprocess.Popen) -> int:
    """Reap a child its ExitWatch saw exit; its returncode (-N: killed by signal N)."""
    returncode = proc.poll()
    if returncode is None:  # only if called before the exit was seen; then it waits
        returncode = proc.wait()
    return returncode
