"""The async side of one sandbox: attempts, their processes, input pumps and timers.

It owns *when* to start and stop; runners own *how*. Every aggregate mutation goes
through ``record`` so that buffered output lands before the lifecycle event and the
session is staged for the next commit.
"""
from __future__ import annotations

import asyncio
import logging
import signal as signals
from functools import partial

from .live_attempt import LiveAttempt
from .live_session import LiveSession
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

    # ---- helpers --------------------------------------------------------------------------
    def _spawn(self, coro, name: str, bucket: set | None = None) -> asyncio.Task:
        """A task of the runtime (ended with it); ``bucket``: also an attempt's own, ended with it."""
        task = self.host.tasks.spawn(coro, name)
        if bucket is not None:
            bucket.add(task)
            task.add_done_callback(bucket.discard)
        return task

    def _live(self, session_id: str) -> LiveSession | None:
        return self.host.live_session(session_id)

    def live_attempt(self, session_id: str) -> LiveAttempt | None:
        live = self._live(session_id)
        return live.attempt if live is not None else None

    def _attempts(self) -> list[LiveAttempt]:
        return [live.attempt for live in self.host.live_sessions() if live.attempt is not None]

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
        owner = self._live(session.id)
        live = LiveAttempt(attempt_id)
        owner.attempt = live
        try:
            launch = host.launch_for(session)
            runner = host.pty_runner if launch.terminal else host.pipe_runner
            handle = await runner.start(launch, partial(self.take_output, session, live))
        except StartFailedError as exc:
            log.info("session %s attempt %s failed to start: %s", session.id, attempt_id, exc)
            if owner.attempt is live:
                owner.attempt = None
            live.exited.set()
            decision = self.record(session, session.record_exit, None, None, host.clock.now_ns(),
                                    reason=START_FAILED)
            self._after_exit(session, decision)
            return exc
        if host.ended:  # the runtime was killed while this process started: it must not outlive it
            live.abandoned = True
            handle.discard()
            if owner.attempt is live:
                owner.attempt = None
            live.exited.set()  # nothing of the runtime waits for it: its runner reaps it
            raise UnavailableError("sandbox runtime is not available")
        live.handle = handle
        self.record(session, session.record_started, handle.pid, handle.start_time, host.clock.now_ns())
        self._arm_readiness(session, live)
        self._spawn(live.pump_input(session.id), f"input pump of {attempt_id}", live.tasks)
        self._spawn(self._watch_exit(session, live), f"exit watcher of {attempt_id}")
        return None

    def _arm_readiness(self, session: Session, live: LiveAttempt) -> None:
        readiness = session.settings.readiness
        if readiness.type == "process":
            self.record(session, session.record_ready, self.host.clock.now_ns())
            return
        if readiness.type == "delay":
            self._spawn(self._ready_after_delay(session, live, readiness.delay_ms),
                        f"readiness delay of {live.attempt_id}", live.tasks)
        self._spawn(self._readiness_timeout(session, live, readiness.timeout_ms),
                    f"readiness timeout of {live.attempt_id}", live.tasks)

    async def _ready_after_delay(self, session: Session, live: LiveAttempt, delay_ms: int) -> None:
        await self.host.clock.sleep(delay_ms / 1000)
        if self.live_attempt(session.id) is live and not live.exited.is_set():
            self.record(session, session.record_ready, self.host.clock.now_ns())

    async def _readiness_timeout(self, session: Session, live: LiveAttempt, timeout_ms: int) -> None:
        await self.host.clock.sleep(timeout_ms / 1000)
        if self.live_attempt(session.id) is live and session.phase == "starting" and live.handle:
            live.exit_reason = READINESS_TIMEOUT  # a readiness timeout is an exit: the restart policy applies
            self._spawn(self._terminate(session, live), f"readiness stop of {live.attempt_id}")

    def take_output(self, session: Session, live: LiveAttempt, stream: str, data: bytes) -> None:
        """The runner's output callback (on the loop): the bytes are owed to the writer, which
        coalesces them into ``output`` events; an output readiness token is looked for here."""
        host = self.host
        host.pipeline.add_output(host.store, session, stream, data, live.handle)
        if session.phase == "starting" and session.settings.readiness.type == "output":
            token = session.settings.readiness.token
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
            owner = self._live(session.id)
            if owner is not None and owner.attempt is live:
                owner.attempt = None
            decision = self.record(session, session.record_exit, status.exit_code, status.signal,
                                    self.host.clock.now_ns(), reason=live.exit_reason or status.reason)
            live.exited.set()
        self._after_exit(session, decision)

    def _after_exit(self, session: Session, decision) -> None:
        owner = self._live(session.id)
        if decision.restart and owner is not None:
            owner.restart_timer = self._spawn(self._restart_after(session, owner, decision.delay_ms),
                                              f"restart of {session.id}")

    async def _restart_after(self, session: Session, owner: LiveSession, delay_ms: int) -> None:
        await self.host.clock.sleep(delay_ms / 1000)
        # Lifecycle calls on this session go one at a time; one that takes the lock first
        # cancels this timer (cancel_timer) or changes what it finds below.
        async with owner.lock:
            if owner.restart_timer is asyncio.current_task():
                owner.restart_timer = None
            if session.phase == "backoff" and session.desired_state == "running" \
                    and self._live(session.id) is owner:
                await self.start_attempt(session, "restart_policy")  # BACKOFF -> STARTING
                await self.host.pipeline.flush(self.host.store)

    def cancel_timer(self, session_id: str) -> None:
        owner = self._live(session_id)
        if owner is not None:
            owner.cancel_restart()

    # ---- stopping ---------------------------------------------------------------------------
    async def stop_attempt(self, session: Session, reason: str) -> None:
        """The one stop routine: attempt.stopping, TERM to the group, grace, KILL, reaped."""
        self.cancel_timer(session.id)
        live = self.live_attempt(session.id)
        if live is None or live.handle is None:
            return
        self.record(session, session.begin_stop, reason, self.host.clock.now_ns())
        await self._terminate(session, live)

    async def _terminate(self, session: Session, live: LiveAttempt) -> None:
        """The stop: TERM to the group, grace, KILL, 5 s more, else the call fails."""
        grace_s = session.settings.lifecycle.stop_grace_period_seconds
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
        self._cancel_timers()
        lives = self._attempts()
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
        while any(live.handle is None and not live.exited.is_set() for live in self._attempts()):
            if loop.time() >= deadline:
                log.warning("attempts still starting after %.0f s; pausing anyway", SETTLE_S)
                return
            await asyncio.sleep(0.005)

    def freeze_all(self, at_ns: int) -> list:
        """SIGSTOP every running attempt and record ``session.paused``; no restart may begin."""
        self._cancel_timers()
        frozen = []
        for session in self.host.list_sessions():
            live = self.live_attempt(session.id)
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
        for owner in list(self.host.live_sessions()):
            session = owner.aggregate
            if session.phase == Phase.BACKOFF and session.desired_state == "running" \
                    and owner.restart_timer is None:
                await self.start_attempt(session, "restart_policy")

    def abandon_all(self, abandoned: bool) -> None:
        """From a pause's point of no return on, nothing this runtime's processes do is a fact
        to record (no timers either); ``False`` takes that back when the checkpoint failed."""
        if abandoned:
            self._cancel_timers()  # an exit racing the freeze may have armed one
        for live in self._attempts():
            live.abandoned = abandoned

    def _cancel_timers(self) -> None:
        for owner in self.host.live_sessions():
            owner.cancel_restart()

    def terminal_for(self, session: Session) -> TerminalSize | None:
        if not session.is_pty:
            return None
        terminal = session.settings.terminal
        rows, cols = session.terminal_size or (terminal.rows, terminal.cols)
        return TerminalSize(rows, cols)
