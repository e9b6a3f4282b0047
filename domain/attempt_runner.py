"""The async side of one sandbox: attempts, their processes, input pumps and timers.

It owns *when* to start and stop; runners own *how*. Every aggregate mutation goes
through ``record`` so that buffered output lands before the lifecycle event and the
session is staged for the next commit.
"""
from __future__ import annotations

import asyncio
import logging
import signal as signals

from .live_attempt import LiveAttempt
from .model.errors import OperationFailedError, UnavailableError
from .model.phases import Phase
from .model.session import READINESS_TIMEOUT, START_FAILED, Session
from .ports import AttemptHost, ExitStatus, StartFailedError, TerminalSize

log = logging.getLogger(__name__)
KILL_WAIT_S = 5.0  # a stop routine's wait after its SIGKILL
SETTLE_S = 5.0  # an attempt whose process is being started when a freeze comes


class AttemptRunner:
    def __init__(self, host: AttemptHost) -> None:
        self.host = host  # its sandbox's runtime, seen through the AttemptHost port
        self.live: dict[str, LiveAttempt] = {}
        self.timers: dict[str, asyncio.Task] = {}  # backoff timers per session
        self._tasks: set[asyncio.Task] = set()

    # ---- helpers --------------------------------------------------------------------------
    def _spawn(self, coro, owner: set | None = None) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        bucket = self._tasks if owner is None else owner
        bucket.add(task)
        task.add_done_callback(bucket.discard)
        task.add_done_callback(_log_failure)
        return task

    def record(self, session: Session, command, *args, **kwargs):
        if self.host.store.released:  # sealed by the pause hook: nothing may be acknowledged now
            raise UnavailableError("sandbox lifecycle barrier is active")
        self.host.pipeline.materialize(session)
        result = command(*args, **kwargs)
        self.host.pipeline.stage(self.host.store, session)
        return result

    # ---- starting -------------------------------------------------------------------------
    async def start_attempt(self, session: Session, reason: str,
                            requested: bool = False) -> StartFailedError | None:
        """Launch a new attempt. A launch failure is recorded (start_failed) and returned."""
        self.cancel_timer(session.id)
        host = self.host
        host.check_fence()  # before anything is recorded: a node without the lease records nothing
        attempt_id = host.new_attempt_id()
        now = host.clock.now_ns()
        self.record(session, session.begin_attempt, attempt_id, reason, host.generation, now,
                     requested=requested)
        live = LiveAttempt(attempt_id)
        self.live[session.id] = live
        try:
            launch = host.launch_for(session)
            runner = host.pty_runner if launch.terminal else host.pipe_runner
            handle = await runner.start(launch, lambda stream, data: self._on_output(session, live, stream, data))
        except StartFailedError as exc:
            log.info("session %s attempt %s failed to start: %s", session.id, attempt_id, exc)
            self.live.pop(session.id, None)
            live.exited.set()
            decision = self.record(session, session.record_exit, None, None, host.clock.now_ns(),
                                    reason=START_FAILED)
            self._after_exit(session, decision)
            return exc
        live.handle = handle
        self.record(session, session.record_started, handle.pid, handle.start_time, host.clock.now_ns())
        self._arm_readiness(session, live)
        self._spawn(live.pump_input(session.id), live.tasks)
        self._spawn(self._watch_exit(session, live))
        return None

    def _arm_readiness(self, session: Session, live: LiveAttempt) -> None:
        readiness = session.spec["readiness"]
        if readiness["type"] == "process":
            self.record(session, session.record_ready, self.host.clock.now_ns())
            return
        if readiness["type"] == "delay":
            self._spawn(self._ready_after_delay(session, live, readiness.get("delay_ms", 0)), live.tasks)
        self._spawn(self._readiness_timeout(session, live, readiness["timeout_ms"]), live.tasks)

    async def _ready_after_delay(self, session: Session, live: LiveAttempt, delay_ms: int) -> None:
        await self.host.clock.sleep(delay_ms / 1000)
        if self.live.get(session.id) is live and not live.exited.is_set():
            self.record(session, session.record_ready, self.host.clock.now_ns())

    async def _readiness_timeout(self, session: Session, live: LiveAttempt, timeout_ms: int) -> None:
        await self.host.clock.sleep(timeout_ms / 1000)
        if self.live.get(session.id) is live and session.phase == "starting" and live.handle:
            live.exit_reason = READINESS_TIMEOUT  # a readiness timeout is an exit: the restart policy applies
            self._spawn(self._terminate(session, live))

    def _on_output(self, session: Session, live: LiveAttempt, stream: str, data: bytes) -> None:
        host = self.host
        host.pipeline.add_output(host.store, session, stream, data, live.handle)
        if session.phase == "starting" and session.spec["readiness"]["type"] == "output":
            token = session.spec["readiness"]["output"].encode()
            window = live.token_tail + data
            if token in window:
                self.record(session, session.record_ready, host.clock.now_ns())
            else:  # keep len(token)-1 bytes so a token split across reads is still found
                live.token_tail = window[-(len(token) - 1):] if len(token) > 1 else b""

    # ---- input ------------------------------------------------------------------------------
    def queue_input(self, live: LiveAttempt, data: bytes, eof: bool) -> asyncio.Future | None:
        return live.queue(data, eof)

    # ---- exits ------------------------------------------------------------------------------
    async def _watch_exit(self, session: Session, live: LiveAttempt) -> None:
        status: ExitStatus = await live.handle.wait_exited()
        status = self.host.translate_exit(status, live.attempt_id)
        if live.abandoned:
            for task in list(live.tasks):
                task.cancel()
            live.exited.set()
            return
        # An in-flight input request finishes first, so its input.accepted precedes the exit.
        async with live.input_lock:
            for task in list(live.tasks):
                task.cancel()
            if self.live.get(session.id) is live:
                del self.live[session.id]
            decision = self.record(session, session.record_exit, status.exit_code, status.signal,
                                    self.host.clock.now_ns(), reason=live.exit_reason or status.reason)
            live.exited.set()
        self._after_exit(session, decision)

    def _after_exit(self, session: Session, decision) -> None:
        if decision.restart:
            self.timers[session.id] = self._spawn(self._restart_after(session, decision.delay_ms))

    async def _restart_after(self, session: Session, delay_ms: int) -> None:
        await self.host.clock.sleep(delay_ms / 1000)
        # Lifecycle calls on this session go one at a time; one that takes the lock first
        # cancels this timer (cancel_timer) or changes what it finds below.
        async with self.host.lifecycle_lock(session.id):
            if self.timers.get(session.id) is asyncio.current_task():
                del self.timers[session.id]
            if session.phase == "backoff" and session.desired_state == "running" \
                    and session.id in self.host.store.sessions:
                await self.start_attempt(session, "restart_policy")  # BACKOFF -> STARTING
                await self.host.pipeline.flush(self.host.store)

    def cancel_timer(self, session_id: str) -> None:
        timer = self.timers.pop(session_id, None)
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    # ---- stopping ---------------------------------------------------------------------------
    async def stop_attempt(self, session: Session, reason: str) -> None:
        """The one stop routine: attempt.stopping, TERM to the group, grace, KILL, reaped."""
        self.cancel_timer(session.id)
        live = self.live.get(session.id)
        if live is None or live.handle is None:
            return
        self.record(session, session.begin_stop, reason, self.host.clock.now_ns())
        await self._terminate(session, live)

    async def _terminate(self, session: Session, live: LiveAttempt) -> None:
        """The stop: TERM to the group, grace, KILL, 5 s more, else the call fails."""
        grace_s = session.spec["lifecycle"]["stop_grace_period_seconds"]
        live.handle.send_signal(signals.SIGTERM)
        # A stopped process (paused, or sent SIGSTOP by a client) cannot act on TERM until it
        # runs again: as service managers do, CONT follows, so the grace period is its own.
        live.handle.send_signal(signals.SIGCONT)
        if await self._exited_within(live, grace_s):
            return
        live.handle.send_signal(signals.SIGKILL)
        if not await self._exited_within(live, KILL_WAIT_S):
            raise OperationFailedError("timed out waiting for session process to stop")

    async def _exited_within(self, live: LiveAttempt, seconds: float) -> bool:
        """Wait for the attempt's end on the injected clock, so a fake clock drives grace periods."""
        if live.exited.is_set():
            return True
        exited = asyncio.ensure_future(live.exited.wait())
        timer = asyncio.ensure_future(self.host.clock.sleep(seconds))
        try:
            await asyncio.wait((exited, timer), return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
            timer.cancel()
        return live.exited.is_set()

    def end_all(self) -> list[LiveAttempt]:
        """The runtime is being released: no timer left, every attempt abandoned (its exit is
        not a fact to record) and SIGKILLed with its group. SIGCONT follows so a stopped
        process acts on it; a frozen cgroup's tasks die once the runtime's release thaws them.
        Returns the attempts, for one bounded wait on all of them together."""
        for session_id in list(self.timers):
            self.cancel_timer(session_id)
        lives = list(self.live.values())
        for live in lives:
            live.abandoned = True
            if live.handle is not None:
                live.handle.send_signal(signals.SIGKILL)
                live.handle.send_signal(signals.SIGCONT)
        return lives

    # ---- the runtime's pause: freeze, thaw, abandon ---------------------------------------------
    async def settle(self) -> None:
        """Wait for attempts whose process is still being started, so none escapes a freeze."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_S
        while any(live.handle is None and not live.exited.is_set() for live in self.live.values()):
            if loop.time() >= deadline:
                log.warning("attempts still starting after %.0f s; pausing anyway", SETTLE_S)
                return
            await asyncio.sleep(0.005)

    def freeze_all(self, at_ns: int) -> list:
        """SIGSTOP every running attempt and record ``session.paused``; no restart may begin."""
        for session_id in list(self.timers):
            self.cancel_timer(session_id)
        frozen = []
        for session in self.host.list_sessions():
            live = self.live.get(session.id)
            if live is None or live.handle is None or live.exited.is_set() \
                    or session.phase not in (Phase.STARTING, Phase.RUNNING):
                continue
            live.handle.send_signal(signals.SIGSTOP)
            self.record(session, session.freeze, at_ns)
            frozen.append((session, live))
        return frozen

    async def thaw_all(self, frozen: list, at_ns: int) -> None:
        """Undo ``freeze_all``: SIGCONT, ``session.resumed``, restarts the freeze cancelled re-armed."""
        for session, live in frozen:
            live.handle.send_signal(signals.SIGCONT)
            self.record(session, session.thaw, at_ns)
        for session in self.host.list_sessions():
            if session.phase == Phase.BACKOFF and session.desired_state == "running" \
                    and session.id not in self.timers:
                await self.start_attempt(session, "restart_policy")

    def abandon_all(self, abandoned: bool) -> None:
        """From a pause's point of no return on, nothing this runtime's processes do is a fact
        to record (no timers either); ``False`` takes that back when the checkpoint failed."""
        if abandoned:
            for session_id in list(self.timers):  # an exit racing the freeze may have armed one
                self.cancel_timer(session_id)
        for live in self.live.values():
            live.abandoned = abandoned

    def terminal_for(self, session: Session) -> TerminalSize | None:
        if not session.is_pty:
            return None
        rows, cols = session.terminal_size or (session.spec["io"]["terminal"]["rows"],
                                               session.spec["io"]["terminal"]["cols"])
        return TerminalSize(rows, cols)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("background task failed", exc_info=task.exception())
