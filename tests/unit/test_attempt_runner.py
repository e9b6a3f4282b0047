"""The attempt runner (domain/attempts.py) on the fakes, through its AttemptHost port only:
a fake host with a scripted runner, a fake clock, an instant commit sink and no store. It
launches what the host says, records the process's facts in order, writes queued input in
order and then EOF, and stops with TERM, the grace period on the injected clock, then KILL."""
from __future__ import annotations

import asyncio
import signal
from contextlib import asynccontextmanager

from session_supervisor.domain.commits import CommitPipeline
from session_supervisor.domain.model.errors import UnavailableError
from session_supervisor.domain.model.session import Session
from session_supervisor.domain.model.spec import normalize_spec
from session_supervisor.domain.ports import CommitOutcome, ExitStatus, Launch
from session_supervisor.domain.attempt_runner import AttemptRunner
from session_supervisor.domain.live_session import LiveSession
from session_supervisor.domain.task_owner import TaskOwner
from session_supervisor.infra.fakes import FakeClock, ScriptedRunner


class InstantSink:
    def __init__(self) -> None:
        self.events: list = []

    def submit(self, tick, done) -> None:
        for _app, events, _snapshots in tick:
            self.events.extend(events)
        asyncio.get_running_loop().call_soon(done, [CommitOutcome() for _ in tick])

    def run_in_writer(self, fn, done) -> None:
        done(fn(), None)


class Store:
    released = False
    journal = None  # the writer is a fake: nothing reaches a journal store

    def show_committed(self, views: dict, rolled_back) -> None:
        pass
    sessions: dict = {}


class Isolation:
    name = "fake"
    released = False

    def translate_exit(self, status: ExitStatus, attempt_id: str = "") -> ExitStatus:
        return status

    def release(self) -> None:
        self.released = True



class FakeHost:
    """Exactly the AttemptHost port, nothing of a SandboxRuntime."""

    def __init__(self) -> None:
        self.sink = InstantSink()
        self.clock = FakeClock()
        self.pipeline = CommitPipeline(self.sink, self.clock.now_ns, lambda *_: None)
        self.store = Store()
        self.pipe_runner = ScriptedRunner()
        self.pty_runner = ScriptedRunner(first_pid=50_001)
        self.isolation = Isolation()
        self.tasks = TaskOwner("the fake host")
        self._ids = iter(f"att-{n}" for n in range(1, 100))
        self._live: dict[str, LiveSession] = {}
        self.sessions: list[Session] = []

    @property
    def generation(self) -> int:
        return 1

    ended = False  # the fake host's runtime is never torn down under a start

    def new_attempt_id(self) -> str:
        return next(self._ids)

    def list_sessions(self) -> list[Session]:
        return self.sessions

    def check_fence(self) -> None:
        pass  # one node: always its own

    def launch_for(self, session: Session) -> Launch:
        return Launch(argv=session.spec["command"], cwd="/workspace", env={"A": "1"})

    def translate_exit(self, status: ExitStatus, attempt_id: str = "") -> ExitStatus:
        return self.isolation.translate_exit(status, attempt_id)

    def live_session(self, session_id: str) -> LiveSession:
        return self._live[session_id]

    def live_sessions(self) -> list[LiveSession]:
        return list(self._live.values())

    def adopt(self, session: Session) -> Session:
        self._live[session.id] = LiveSession(session, committed=True)
        return session

    def journal(self) -> list[str]:
        return [type(e).__name__ for e in self.sink.events]


def new_session(**spec) -> Session:
    return Session.create("ses-1", "sb-1", normalize_spec({"command": ["worker"], **spec}), "", 1, FakeClock().now_ns())


@asynccontextmanager
async def runner():
    host = FakeHost()
    attempts = AttemptRunner(host)
    try:
        yield host, attempts
    finally:
        await release(host, attempts)


async def release(host: "FakeHost", attempts: AttemptRunner) -> None:
    """What a runtime's release does with its attempts: end them all, one wait, the isolation."""
    lives = attempts.end_all()
    await asyncio.wait_for(asyncio.gather(*(live.exited.wait() for live in lives)), 5)
    host.isolation.release()


async def settle(host: FakeHost) -> None:
    for _ in range(10):
        await asyncio.sleep(0)
    await host.pipeline.flush()


def run(story):
    async def bounded():
        async with asyncio.timeout(10):
            await story()
    asyncio.run(bounded())


def test_an_attempt_launches_what_its_host_says_and_records_start_output_and_exit_in_order():
    async def story():
        async with runner() as (host, attempts):
            session = host.adopt(new_session())
            assert await attempts.start_attempt(session, "initial") is None
            process, = host.pipe_runner.processes
            assert process.argv == ["worker"] and process.launch.env == {"A": "1"}
            process.emit(b"hello\n")
            process.exit(3)
            await settle(host)
            assert host.journal() == ["Created", "AttemptStarting", "AttemptStarted", "Ready", "Output",
                                      "AttemptExited"]
            assert session.attempt["exit_code"] == 3 and attempts.live_attempt("ses-1") is None
    run(story)


def test_queued_input_reaches_the_process_in_order_and_eof_closes_it_after_everything_before():
    async def story():
        async with runner() as (host, attempts):
            session = host.adopt(new_session())
            await attempts.start_attempt(session, "initial")
            live = attempts.live_attempt(session.id)
            attempts.queue_input(live, b"one ", False)
            closed = attempts.queue_input(live, b"two", True)
            await closed
            process, = host.pipe_runner.processes
            assert bytes(process.stdin) == b"one two" and process.stdin_closed and live.queued_bytes == 0
    run(story)


def test_a_stop_sends_term_then_kill_after_the_grace_period_on_the_injected_clock():
    async def story():
        async with runner() as (host, attempts):
            session = host.adopt(new_session(lifecycle={"stop_grace_period_seconds": 3}))
            await attempts.start_attempt(session, "initial")
            process, = host.pipe_runner.processes
            process.ignore(signal.SIGTERM)
            stopping = asyncio.ensure_future(attempts.stop_attempt(session, "requested"))
            await settle(host)
            # CONT follows TERM: a stopped process could not act on TERM in its grace period
            assert process.signals == [signal.SIGTERM, signal.SIGCONT] and not stopping.done()
            await host.clock.advance(2.9)
            assert process.signals == [signal.SIGTERM, signal.SIGCONT]  # still within its grace period
            await host.clock.advance(0.2)
            await stopping
            assert process.signals == [signal.SIGTERM, signal.SIGCONT, signal.SIGKILL]
            await settle(host)
            assert host.journal()[-2:] == ["AttemptStopping", "AttemptExited"]
            assert session.attempt["signal"] == signal.SIGKILL
    run(story)


def test_a_launch_that_fails_is_recorded_as_start_failed_and_returned():
    async def story():
        async with runner() as (host, attempts):
            host.pipe_runner.fail_next()
            session = host.adopt(new_session())
            failure = await attempts.start_attempt(session, "initial")
            await settle(host)
            assert failure is not None and "no such file" in str(failure)
            assert host.journal()[-1] == "AttemptExited" and session.attempt["reason"] == "start_failed"
    run(story)


def test_releasing_the_runtime_kills_every_attempt_and_releases_the_isolation_without_recording_it():
    async def story():
        host = FakeHost()
        attempts = AttemptRunner(host)
        session = host.adopt(new_session())
        await attempts.start_attempt(session, "initial")
        await settle(host)
        before = host.journal()
        await release(host, attempts)
        await settle(host)
        process, = host.pipe_runner.processes
        assert not process.alive and signal.SIGKILL in process.signals
        assert host.isolation.released and host.journal() == before  # abandoned: not a fact to record
    run(story)


def test_a_freeze_stops_running_attempts_and_records_it_and_a_thaw_takes_it_back():
    async def story():
        async with runner() as (host, attempts):
            session = host.adopt(new_session())
            host.sessions.append(session)
            await attempts.start_attempt(session, "initial")
            await settle(host)
            frozen = attempts.freeze_all(host.clock.now_ns())
            await settle(host)
            process, = host.pipe_runner.processes
            assert process.signals == [signal.SIGSTOP] and session.phase == "paused"
            assert host.journal()[-1] == "Paused"
            await attempts.thaw_all(frozen, host.clock.now_ns())
            await settle(host)
            assert process.signals == [signal.SIGSTOP, signal.SIGCONT] and session.phase == "running"
            assert host.journal()[-1] == "Resumed" and len(host.pipe_runner.processes) == 1
    run(story)


def test_an_abandoned_attempt_exits_without_a_recorded_fact_and_its_restart_timer_is_gone():
    async def story():
        async with runner() as (host, attempts):
            session = host.adopt(new_session(lifecycle={"restart": {"policy": "always"}}))
            host.sessions.append(session)
            await attempts.start_attempt(session, "initial")
            await settle(host)
            attempts.abandon_all(True)
            before = host.journal()
            process, = host.pipe_runner.processes
            process.exit(1)
            await settle(host)
            assert host.journal() == before and host.live_session(session.id).restart_timer is None
    run(story)


def test_a_process_whose_start_ends_after_its_runtime_was_killed_is_killed_and_not_recorded():
    async def story():
        async with runner() as (host, attempts):
            session = host.adopt(new_session())
            started = asyncio.ensure_future(attempts.start_attempt(session, "initial"))
            host.ended = True  # the runtime's kill runs while the runner starts the process
            try:
                await started
            except UnavailableError:
                pass
            else:
                raise AssertionError("a start under a killed runtime must fail")
            process, = host.pipe_runner.processes
            assert signal.SIGKILL in process.signals and "AttemptStarted" not in host.journal()
    run(story)
