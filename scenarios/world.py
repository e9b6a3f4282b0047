"""The world a scenario runs in: one data dir, one server (Container), one sandbox.

The server is built by ``infra.bootstrap.Container`` exactly as ``sessiond serve`` builds
it: a real SQLite store per sandbox, the real writer thread, the real commit pipeline.
Only the clock and the process runner differ in ``fake`` mode (FakeClock and
ScriptedRunner); ``real`` mode keeps the system clock and real processes.

Verbs drive it through the runtime's public methods (what the API routes call) and read
back the public journal. ``drop`` and ``rebuild`` throw the server away and build a new
one over the same data dir, with the same clock and runner, which is what pause/resume,
crash and restart stories need.
"""
from __future__ import annotations

import asyncio
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from session_supervisor.api.journal_wire import json_rows
from session_supervisor.infra.bootstrap import Container
from session_supervisor.infra.clock import SystemClock
from session_supervisor.infra.fakes import FakeClock, ScriptedProcess, ScriptedRunner
from session_supervisor.infra.settings import Settings

CALL_TIMEOUT_S = 30.0  # real mode: the longest a lifecycle call may take (grace + 5 s)


class CountingExecutor(ThreadPoolExecutor):
    """The loop's default executor, counting jobs in flight so ``settle`` knows when all is quiet."""

    def __init__(self) -> None:
        super().__init__(max_workers=4, thread_name_prefix="scenario")
        self._lock = threading.Lock()
        self.in_flight = 0

    def submit(self, fn, /, *args, **kwargs):
        with self._lock:
            self.in_flight += 1
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._done)
        return future

    def _done(self, _future) -> None:
        with self._lock:
            self.in_flight -= 1


@dataclass
class Call:
    """A lifecycle call started by a step; in fake mode it may still be waiting on the clock."""

    label: str
    task: asyncio.Task
    expected_error: str = ""
    reported: bool = False


@dataclass
class World:
    data_dir: Path
    mode: str  # "fake" or "real"
    base_spec: dict
    clock: FakeClock | SystemClock = field(init=False)
    runner: ScriptedRunner | None = field(init=False)
    container: Container | None = None
    sandbox_id: str = ""
    names: dict[str, str] = field(default_factory=dict)  # story name -> session id
    calls: list[Call] = field(default_factory=list)
    reaped: list[tuple[int, int]] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)  # session id -> last journal seq shown
    retired: list[int] = field(default_factory=list)  # pids of runtimes released (runtime_verbs)

    def __post_init__(self) -> None:
        fake = self.mode == "fake"
        self.clock = FakeClock() if fake else SystemClock()
        self.runner = ScriptedRunner() if fake else None
        self._ids = itertools.count(1)
        self._executor: CountingExecutor | None = None
        self._pids: dict[str, int] = {}  # session id -> pid of its latest scripted process

    # ---- building and dropping the server -------------------------------------------------
    @classmethod
    async def open(cls, data_dir: Path, mode: str, base_spec: dict) -> "World":
        world = cls(data_dir=data_dir, mode=mode, base_spec=base_spec)
        if world.is_fake:
            world._executor = CountingExecutor()
            asyncio.get_running_loop().set_default_executor(world._executor)
        await world.rebuild()
        world.sandbox_id = (await world.manager.claim("default", {})).id
        return world

    @property
    def is_fake(self) -> bool:
        return self.mode == "fake"

    def _new_uuid_hex(self) -> str:
        # Deterministic ids keep transcripts stable: ses-00000002-002, att-00000003-003, ...
        n = next(self._ids)
        return f"{n:08x}{n % 4096:03x}".ljust(32, "0")

    def _reap(self, pid: int, start_time: int) -> bool:
        # Scripted pids are not real processes: record instead of killing.
        self.reaped.append((pid, start_time))
        return False

    async def rebuild(self) -> None:
        """Start a server over ``data_dir``, as ``sessiond serve`` would after a restart."""
        kwargs = {}
        if self.is_fake:
            kwargs = dict(pipe_runner=self.runner, pty_runner=self.runner, reap=self._reap)
        self.container = Container(Settings(data_dir=self.data_dir, runtime="host"), clock=self.clock,
                                   new_uuid_hex=self._new_uuid_hex, **kwargs)
        await self.container.start()

    async def drop(self, clean: bool = True) -> None:
        """Throw the server away. ``clean``: the orderly shutdown. Otherwise a crash: every
        task dies where it stands, nothing staged is committed, processes are left behind."""
        container, self.container = self.container, None
        if container is None:
            return
        if clean:
            await container.stop()
            return
        me = asyncio.current_task()
        victims = [t for t in asyncio.all_tasks() if t is not me]
        for task in victims:
            task.cancel()
        await asyncio.gather(*victims, return_exceptions=True)
        if container.warm_pool is not None:  # a thread, which the process's death would have ended
            await asyncio.to_thread(container.warm_pool.halt)
        # The writer goes first: it finishes what it already holds, and only then are the
        # stores closed (closing a connection the writer is using can crash the process).
        await asyncio.to_thread(container.writer.close)
        for runtime in container.manager.registry.running.values():
            await asyncio.to_thread(runtime.store.close)

    async def close(self) -> None:
        for call in self.calls:
            if not call.task.done():
                call.task.cancel()
        await self.drop(clean=True)

    # ---- what verbs use -----------------------------------------------------------------------
    @property
    def manager(self):
        return self.container.manager

    @property
    def runtime(self):
        return self.manager.registry.runtime_for(self.sandbox_id)

    def session_id(self, name: str) -> str:
        try:
            return self.names[name]
        except KeyError:
            raise AssertionError(f"no session called {name!r} was created in this story") from None

    def session(self, name: str):
        return self.runtime.session(self.session_id(name))

    def process(self, name: str) -> ScriptedProcess:
        """The scripted process of the session's live attempt (found by its public pid)."""
        attempt = self.session(name).attempt
        if not attempt or "pid" not in attempt or "finished_ns" in attempt:
            raise AssertionError(f"session {name!r} has no live process")
        return self.runner.by_pid(attempt["pid"])

    def latest_process(self, name: str) -> ScriptedProcess | None:
        """The session's most recent scripted process, alive or not."""
        pid = self._pids.get(self.session_id(name))
        return None if pid is None else self.runner.by_pid(pid)

    def _note_pids(self) -> None:
        # A pid is public only while its process lives; remember it for later expectations.
        for runtime in self.manager.registry.running.values():
            for session_id, session in runtime.store.sessions.items():
                attempt = session.attempt
                if attempt and "pid" in attempt and "finished_ns" not in attempt:
                    self._pids[session_id] = attempt["pid"]

    async def journal(self, name: str, after: int = 0) -> list[dict]:
        (events, _last), _cursor = await self.runtime.journal.events_page(self.session_id(name), after, 1_000_000,
                                                                          json_rows)
        return [orjson.loads(json) for _seq, _kind, json in events]  # what a client of the API reads

    @property
    def elapsed(self) -> str:
        return f"t=+{self.clock.elapsed_s:g}s" if self.is_fake else ""

    # ---- time and quiescence ----------------------------------------------------------------
    async def settle(self) -> None:
        """Return once nothing more happens without outside help (fake mode), or once
        everything staged is committed (real mode)."""
        if not self.is_fake:
            await self.container.pipeline.flush()
            return
        stable = 0
        for _ in range(500):
            before = self._signature()
            for _ in range(10):
                await asyncio.sleep(0)
            if self._executor.in_flight or self._lifecycle_busy():
                stable = 0
                await asyncio.sleep(0.001)
                continue
            await self.container.pipeline.flush()
            for _ in range(10):
                await asyncio.sleep(0)
            self._note_pids()
            stable = stable + 1 if self._signature() == before else 0
            if stable >= 2:
                return
        raise AssertionError("the world never settled (a busy loop in the runtime?)")

    def _lifecycle_busy(self) -> bool:
        # A pause or resume (e.g. started by the ttl sweep) waits on the writer thread, not the clock.
        manager = self.container.manager if self.container is not None else None
        return manager is not None and any(g.lock.locked() for g in manager.registry.gates.values())

    def _signature(self) -> tuple:
        sessions = []
        if self.container is not None and self.container.manager is not None:
            for runtime in self.manager.registry.running.values():
                sessions.extend((sid, live.aggregate.version, live.committed_seq, live.aggregate.phase)
                                for sid, live in runtime.store.live.items())
        processes = tuple((p.pid, p.alive, len(p.signals)) for p in self.runner.processes)
        calls = tuple(c.task.done() for c in self.calls)
        return tuple(sessions), processes, calls, tuple(self.clock.pending()), self._executor.in_flight

    async def advance(self, seconds: float) -> None:
        # What is ready now (an exit the runner reported) happens at this instant, before time moves.
        await self.settle()
        await self.clock.advance(seconds, settle=self.settle)

    # ---- lifecycle calls ----------------------------------------------------------------------
    async def call(self, label: str, coro, expected_error: str = "") -> Call:
        """Run a runtime call. In fake mode a call waiting on the clock (a stop in its grace
        period) stays in flight; later steps (``advance``) let it finish."""
        call = Call(label, asyncio.ensure_future(coro), expected_error)
        self.calls.append(call)
        if self.is_fake:
            await self.settle()
        else:
            await asyncio.wait({call.task}, timeout=CALL_TIMEOUT_S)
            await self.settle()
        return call

    def finished_calls(self) -> list[Call]:
        """Calls that ended since last asked, each checked against what the story expected."""
        done = [c for c in self.calls if c.task.done() and not c.reported]
        for call in done:
            call.reported = True
            check_outcome(call)
        return done

    def unfinished_calls(self) -> list[Call]:
        return [c for c in self.calls if not c.task.done()]


def outcome(call: Call) -> str:
    if not call.task.done():
        return "in progress"
    error = call.task.exception()
    return "ok" if error is None else f"{type(error).__name__}: {error}"


def check_outcome(call: Call) -> None:
    error = call.task.exception()
    name = type(error).__name__ if error is not None else ""
    if call.expected_error and name != call.expected_error:
        raise AssertionError(f"{call.label}: expected {call.expected_error}, got {outcome(call)}")
    if not call.expected_error and error is not None:
        raise AssertionError(f"{call.label} failed: {outcome(call)}") from error
