"""The one way to stop a process, plus in-runtime freeze/thaw.

Kill discipline lives only here (architecture rule 8): TERM to the group,
wait the grace period, KILL, always reap. Name/number mapping is pure and
lives in ``domain.model.signals``; it is re-exported for infra callers.
"""
from __future__ import annotations

import asyncio
import signal

from session_supervisor.domain.model.signals import parse_signal, signal_description, signal_short_name
from session_supervisor.domain.ports import AttemptHandle, ExitStatus

__all__ = [
    "freeze",
    "parse_signal",
    "signal_description",
    "signal_short_name",
    "stop_gracefully",
    "thaw",
]

KILL_WAIT_S = 5.0  # contract: SIGKILL, then +5 s before giving up


async def stop_gracefully(
    handle: AttemptHandle, grace_s: float, kill_wait_s: float = KILL_WAIT_S
) -> ExitStatus:
    """TERM the group, give it ``grace_s``, then KILL and reap.

    Raises ``TimeoutError`` only if the process survives SIGKILL for
    ``kill_wait_s`` (uninterruptible sleep, or a stuck pipe writer).
    """
    handle.send_signal(signal.SIGTERM)
    # A stopped group would sit on TERM until the grace runs out.
    handle.send_signal(signal.SIGCONT)
    try:
        async with asyncio.timeout(grace_s):
            return await handle.wait_exited()
    except TimeoutError:
        pass
    handle.send_signal(signal.SIGKILL)
    # Shielded so that a caller cancelled while we wait (daemon shutdown)
    # still leaves a task behind that reaps the process.
    reap = asyncio.ensure_future(handle.wait_exited())
    try:
        async with asyncio.timeout(kill_wait_s):
            return await asyncio.shield(reap)
    except TimeoutError:
        reap.cancel()
        raise TimeoutError(
            f"process group {handle.pid} still running {kill_wait_s}s after SIGKILL"
        ) from None


def freeze(handle: AttemptHandle) -> None:
    """In-runtime pause: the attempt stays the same, it just stops running."""
    handle.send_signal(signal.SIGSTOP)


def thaw(handle: AttemptHandle) -> None:
    handle.send_signal(signal.SIGCONT)
