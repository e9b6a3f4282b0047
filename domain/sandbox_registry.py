"""SandboxRegistry: the one holder of a node's sandboxes, and the one way a runtime ends.

A sandbox here is *running* (a ``SandboxRuntime``: an open store, sessions in memory, processes),
*parked* (paused: only its ``Sandbox`` record; its rootfs holds the sealed store), or *failed*
(its store could not be opened: listed, deletable). Each has one ``RuntimeGate`` (the lifecycle
lock and pause barrier) while it is known. Nothing else writes these tables: a new runtime is
``activate``d, a paused record ``park``ed, and every end of a runtime, whatever caused it, is
``retire(sandbox_id, how)``, whose table (``Retirement``) says what each cause tears down.

A delete answers once the sandbox is durably gone from the node's books (its journal removed,
its lease forgotten, its volumes unbound) and its processes are SIGKILLed; waiting for them to be
reaped, removing the cgroups, the network namespace, the disk and the directory happen after the
answer, in a task the registry owns (``settle`` waits for them; shutdown does). The id
is refused from the first moment. A server killed meanwhile finds a directory without a journal
at its next start and removes it as an unfinished claim, and sweeps the namespaces and cgroups of
its data dir: an answered delete is never undone.
"""
from __future__ import annotations

import asyncio
import bisect
import enum
import logging
from types import MappingProxyType
from typing import TYPE_CHECKING, Awaitable, Callable, Mapping

from .model.errors import SandboxNotFoundError, UnavailableError
from .model.sandbox import FailedSandbox, Sandbox
from .ports import SandboxOwnership
from .runtime_gate import RuntimeGate
from .task_owner import TaskOwner

if TYPE_CHECKING:
    from .commits import CommitPipeline
    from .hub import Hub
    from .sandbox_networking import SandboxNetworking
    from .sandbox_runtime import SandboxRuntime

log = logging.getLogger(__name__)

SETTLE_S = 10.0  # shutdown waits this long for deletes answered before it to finish


class Retirement(enum.Enum):
    """Why a runtime (or a whole sandbox) ends, and so what goes with it.

    | how          | streams end | processes | last events   | store   | network | files, volumes | lease    | gate |
    | DELETED      | "deleted"   | killed    | committed     | removed | removed | removed (*)    | forgot   | gone |
    | PAUSED       | (the hook)  | (the hook)| (sealed)      | sealed  | removed (*)| kept          | released | kept |
    | SHUTDOWN     | "shutdown"  | killed    | + snapshots   | closed  | removed | kept           | kept     | kept |
    | HANDED_OVER  | "shutdown"  | killed    | none (fenced) | closed  | removed | kept           | kept     | gone |
    | FAILED_START | "shutdown"  | killed    | none          | closed  | removed | kept           | kept     | kept |
    | FAILED_CLAIM | —           | killed    | none          | removed | removed | removed        | forgot   | gone |

    (*) after the answer: a delete unbinds volumes before it and removes the rest after it; a
    pause releases the network's name before it and removes the rest after it.
    """

    DELETED = "deleted"
    PAUSED = "paused"
    SHUTDOWN = "shutdown"
    HANDED_OVER = "handed_over"
    FAILED_START = "failed_start"
    FAILED_CLAIM = "failed_claim"

    @property
    def removes_sandbox(self) -> bool:
        return self in (Retirement.DELETED, Retirement.FAILED_CLAIM)

    @property
    def records_nothing(self) -> bool:
        return self in (Retirement.HANDED_OVER, Retirement.FAILED_START, Retirement.FAILED_CLAIM)

    @property
    def stream_reason(self) -> str:
        return "deleted" if self is Retirement.DELETED else "shutdown"


class SandboxRegistry:
    def __init__(self, *, hub: Hub, pipeline: CommitPipeline, network: SandboxNetworking,
                 ownership: SandboxOwnership, forget_journal: Callable[[str], None],
                 remove_files: Callable[[str], None], unbind_volumes: Callable[[str], Awaitable[None]]) -> None:
        self._hub = hub
        self._pipeline = pipeline
        self._network = network
        self._ownership = ownership
        self._forget_journal = forget_journal  # the journal gone: from now on the sandbox never comes back
        self._remove_files = remove_files      # its directory, disk and checkpoint
        self._unbind_volumes = unbind_volumes
        self._running: dict[str, SandboxRuntime] = {}
        self._parked: dict[str, Sandbox] = {}
        self._failed: dict[str, FailedSandbox] = {}
        self._gates: dict[str, RuntimeGate] = {}
        self._retiring: dict[str, asyncio.Task] = {}  # deletes answered, their tear-down still running
        self._order: list[tuple[int, str]] = []  # (-created_ns, id) of every sandbox above, sorted
        self._team_order: dict[str, list[tuple[int, str]]] = {}  # the same, per team
        self._in_order: dict[str, tuple[tuple[int, str], str]] = {}  # id -> its key and team, as listed
        self._tasks = TaskOwner("sandbox registry")
        # Read-only views: only this class changes the tables (tests/test_layering.py checks it).
        self.running: Mapping[str, SandboxRuntime] = MappingProxyType(self._running)
        self.parked: Mapping[str, Sandbox] = MappingProxyType(self._parked)
        self.failed: Mapping[str, FailedSandbox] = MappingProxyType(self._failed)
        self.gates: Mapping[str, RuntimeGate] = MappingProxyType(self._gates)

    # ---- queries ----------------------------------------------------------------------------------
    def knows(self, sandbox_id: str) -> bool:
        return sandbox_id in self._running or sandbox_id in self._parked or sandbox_id in self._failed

    def is_running(self, sandbox_id: str) -> bool:
        return sandbox_id in self._running

    def sandbox(self, sandbox_id: str) -> Sandbox:
        runtime = self._running.get(sandbox_id)
        if runtime is not None:
            return runtime.store.sandbox
        parked = self._parked.get(sandbox_id) or self._failed.get(sandbox_id)
        if parked is None:
            raise SandboxNotFoundError()
        return parked

    def runtime_for(self, sandbox_id: str) -> SandboxRuntime:
        runtime = self._running.get(sandbox_id)
        if runtime is None:
            if sandbox_id in self._parked:  # session calls are admitted (resumed) first: api/gate.py
                raise UnavailableError("sandbox is not running")
            if sandbox_id in self._failed:
                raise UnavailableError(f"sandbox has failed: {self._failed[sandbox_id].failure_reason}")
            raise SandboxNotFoundError()
        return runtime

    def list(self) -> list[Sandbox]:
        """Every sandbox known here, newest first (kept in that order as they come and go: a list
        costs no sort however many there are)."""
        return [self.sandbox(sandbox_id) for _key, sandbox_id in self._order]

    def page(self, team_id: str | None, offset: int, limit: int) -> tuple[list[Sandbox], int]:
        """A page of the sandboxes of one team (None: of every team), newest first, and how many
        there are: the cost of the page, however many sandboxes the node holds."""
        order = self._order if team_id is None else self._team_order.get(team_id, [])
        return [self.sandbox(sandbox_id) for _key, sandbox_id in order[offset:offset + limit]], len(order)

    def _listed(self, sandbox: Sandbox | FailedSandbox) -> None:
        if sandbox.id not in self._in_order:
            key = (-sandbox.created_ns, sandbox.id)
            self._in_order[sandbox.id] = (key, sandbox.team_id)
            bisect.insort(self._order, key)
            bisect.insort(self._team_order.setdefault(sandbox.team_id, []), key)

    def _unlisted(self, sandbox_id: str) -> None:
        listed = self._in_order.pop(sandbox_id, None)
        if listed is not None:  # removed by the key it was listed under, whatever its record says now
            key, team_id = listed
            del self._order[bisect.bisect_left(self._order, key)]
            team = self._team_order[team_id]
            del team[bisect.bisect_left(team, key)]
            if not team:
                del self._team_order[team_id]

    def gate(self, sandbox_id: str) -> RuntimeGate:
        """The sandbox's gate (made on first use: callers check ``knows`` first)."""
        gate = self._gates.get(sandbox_id)
        if gate is None:
            gate = self._gates[sandbox_id] = RuntimeGate()
        return gate

    # ---- entries ------------------------------------------------------------------------------------
    def activate(self, runtime: SandboxRuntime) -> None:
        """A runtime that now serves its sandbox (a claim, a resume, a start, a take-over)."""
        sandbox_id = runtime.sandbox_id
        self._parked.pop(sandbox_id, None)
        self._failed.pop(sandbox_id, None)
        self._running[sandbox_id] = runtime
        self._listed(runtime.store.sandbox)

    def park(self, sandbox: Sandbox) -> None:
        """A sandbox known here with no runtime: paused, or a fork's child, or found paused at start."""
        self._failed.pop(sandbox.id, None)
        self._parked[sandbox.id] = sandbox
        self._listed(sandbox)

    def replace_record(self, sandbox: Sandbox, expected: Sandbox) -> None:
        """A parked sandbox's record after a committed change (only if it is still ``expected``)."""
        if self._parked.get(sandbox.id) is expected:
            self._parked[sandbox.id] = sandbox

    def fail(self, failed: FailedSandbox) -> None:
        self._failed[failed.id] = failed
        self._listed(failed)

    def recover(self, sandbox_id: str) -> None:
        """A failed sandbox whose store opened after all."""
        self._failed.pop(sandbox_id, None)

    def forget_stale(self, sandbox_id: str) -> None:
        """What this node knew of a parked sandbox is stale (another node has it, or it is gone)."""
        stale = self._parked.pop(sandbox_id, None)
        if stale is not None and sandbox_id not in self._running:
            self._unlisted(sandbox_id)

    # ---- the one tear-down ---------------------------------------------------------------------------
    async def retire(self, sandbox_id: str, how: Retirement, *, runtime: SandboxRuntime | None = None,
                     record: Sandbox | None = None) -> None:
        """End the sandbox's runtime (and with ``DELETED`` / ``FAILED_CLAIM`` the sandbox) as the
        ``Retirement`` table says. ``runtime``: one not activated yet (a claim or a resume that
        failed half-way); ``record``: the paused record a ``PAUSED`` retirement parks."""
        registered = self._running.pop(sandbox_id, None)
        runtime = runtime or registered
        known = registered.store.sandbox if registered is not None else \
            self._parked.get(sandbox_id) or self._failed.get(sandbox_id)
        if how is Retirement.PAUSED:
            self._parked[sandbox_id] = record
        else:
            if how.removes_sandbox:
                self._parked.pop(sandbox_id, None)
                self._failed.pop(sandbox_id, None)
            if not self.knows(sandbox_id):
                self._unlisted(sandbox_id)
        if runtime is not None:
            if how.records_nothing:
                runtime.store.released = True  # the lease or the claim is gone: nothing more is committed
            for session_id in runtime.session_ids():
                self._hub.close_session(session_id, how.stream_reason)
            runtime.kill()
        if how is Retirement.DELETED:
            await self._retire_deleted(sandbox_id, runtime)
            return
        if runtime is not None:
            await self._close_runtime(runtime, how)
        if how is Retirement.PAUSED:
            # Any node may resume it now; a shutdown's pause is meant to come back running.
            await asyncio.to_thread(self._ownership.release, sandbox_id, not record.paused_by_user)
        elif how is Retirement.FAILED_CLAIM:
            await self._remove(sandbox_id)
        elif how is Retirement.HANDED_OVER:
            self._gates.pop(sandbox_id, None)  # another node's now: a call here is forwarded there

    async def _close_runtime(self, runtime: SandboxRuntime, how: Retirement) -> None:
        await runtime.reap()
        if how is Retirement.SHUTDOWN:
            runtime.stage_snapshots()  # the next start replays no tail
            try:
                await self._pipeline.flush(runtime.store)
            except Exception:
                log.exception("sandbox %s: the final commit failed", runtime.sandbox_id)
        await runtime.close()
        if how is Retirement.PAUSED:  # its processes are gone: the namespace goes after the answer
            await self._network.detach_later(runtime.sandbox_id)
        else:
            await self._network.detach(runtime.sandbox_id)

    async def _retire_deleted(self, sandbox_id: str, runtime: SandboxRuntime | None) -> None:
        """Gone from the books now (journal and lease); the rest after the answer."""
        if runtime is not None:
            try:
                await self._pipeline.flush(runtime.store)  # calls waiting on a commit get their answer
            except Exception as exc:  # a full disk must not keep a sandbox alive: it goes anyway
                log.warning("sandbox %s: deleting without its last events: %s", sandbox_id, exc)
            runtime.store.released = True  # nothing more is staged: its journal is going
        # The journal's files are unlinked while its store may still be open (SQLite closes an
        # unlinked database cleanly, and writes nothing by name): the store closes after the answer.
        await asyncio.to_thread(self._forget, sandbox_id)
        # Its volumes are free at once (a claim on this node or another may bind them next): its
        # processes are SIGKILLed already, so none of them writes to a volume again.
        await self._unbind_volumes(sandbox_id)
        self._retiring[sandbox_id] = self._tasks.spawn(self._finish_delete(sandbox_id, runtime),
                                                       f"tear-down of {sandbox_id}")

    def _forget(self, sandbox_id: str) -> None:
        self._forget_journal(sandbox_id)
        self._ownership.forget(sandbox_id)

    async def _finish_delete(self, sandbox_id: str, runtime: SandboxRuntime | None) -> None:
        try:
            if runtime is not None:
                await runtime.close()
                await runtime.reap()
                await self._network.detach(sandbox_id)
            await self._remove(sandbox_id, unbind=False)
        finally:
            self._retiring.pop(sandbox_id, None)

    async def _remove(self, sandbox_id: str, unbind: bool = True) -> None:
        await asyncio.to_thread(self._remove_files, sandbox_id)
        if unbind:
            await self._unbind_volumes(sandbox_id)  # after its files: nothing of it uses them any more
        await asyncio.to_thread(self._ownership.forget, sandbox_id)
        self._gates.pop(sandbox_id, None)

    async def settle(self, timeout_s: float = SETTLE_S) -> None:
        """Wait (bounded) for the tear-downs of answered deletes."""
        pending = list(self._retiring.values())
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)

    async def close(self) -> None:
        await self.settle()
        await self._tasks.close()
