"""Reading a sandbox's logs and events out of its journal, running or paused.

A running sandbox is read through its open store; a paused one through its sealed store, opened
for reading only and closed again (nothing is written, so the checkpoint stays as it was). Rows are
read in worker threads, a page per stream; ``domain.model.observability`` turns them into items and
merges the streams.
"""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .model import observability as obs
from .model.journal import OUTPUT_TOPIC, PUBLIC_TYPE

if TYPE_CHECKING:
    from .context_state import Context
    from .sandbox_store import SandboxStore
    from .sandbox_manager import SandboxManager

LTE_MAX = 2 ** 62
MAX_SCAN_ROWS = 100_000  # rows skipped per stream to reach a start_time, per page
OUTPUT_ONLY = frozenset((OUTPUT_TOPIC,))
EVENT_TOPICS = frozenset(t for t in PUBLIC_TYPE if t != OUTPUT_TOPIC)


@dataclass
class Query:
    positions: obs.Positions
    limit: int
    start_ns: int = 0
    end_ns: int = 0
    keep: Callable[[obs.Item], bool] = lambda item: True


@dataclass
class JournalView:
    sandbox_id: str
    store: SandboxStore
    sessions: dict  # id -> Session
    running: bool
    contexts: list  # running only: contexts end with the runtime


class ObservabilityReader:
    def __init__(self, manager: SandboxManager) -> None:
        self.manager = manager

    @asynccontextmanager
    async def view(self, sandbox_id: str):
        self.manager.registry.sandbox(sandbox_id)  # 404 for an unknown sandbox
        runtime = self.manager.registry.running.get(sandbox_id)
        if runtime is not None:
            yield JournalView(sandbox_id, runtime.store, dict(runtime.store.sessions), True, runtime.contexts.list())
            return
        store = await asyncio.to_thread(self._open_sealed, sandbox_id)
        try:
            yield JournalView(sandbox_id, store, dict(store.sessions), False, [])
        finally:
            await asyncio.to_thread(store.close)

    def _open_sealed(self, sandbox_id: str):
        store = self.manager.factory.open_store(sandbox_id)
        try:
            store.load(sandbox_id)
        except BaseException:
            store.close()
            raise
        return store

    # ---- logs --------------------------------------------------------------------------------------
    async def logs(self, sandbox_id: str, query: Query, context_id: str = "") -> tuple[list[obs.Item], obs.Positions, bool]:
        async with self.view(sandbox_id) as view:
            def read():
                streams, positions = {}, dict(query.positions)
                for session_id, session in view.sessions.items():
                    if context_id and session_id != context_id:
                        continue
                    items, cut, skipped = _read_stream(
                        view.store, session_id, session.earliest_seq, positions.get(session_id), query,
                        OUTPUT_ONLY, lambda r, skip: obs.log_items(session_id, r.seq, r.state, r.occurred_ns, skip))
                    if skipped is not None:
                        positions[session_id] = skipped
                    streams[session_id] = (items, cut)
                return streams, positions
            streams, positions = await asyncio.to_thread(read)
            for context in view.contexts:  # their output is in memory only (no journal)
                if not context_id or context.id == context_id:
                    stream = context.launch_id
                    streams[stream] = (obs.after_position(_context_items(context), positions.get(stream)), False)
            return _pruned(view, *obs.merge_page(streams, positions, query.limit, query.keep))

    # ---- events ------------------------------------------------------------------------------------
    async def events(self, sandbox_id: str, query: Query) -> tuple[list[obs.Item], obs.Positions, bool]:
        async with self.view(sandbox_id) as view:
            def read():
                streams, positions = {}, dict(query.positions)
                rows = view.store.journal.read_rows(sandbox_id, 0, LTE_MAX, MAX_SCAN_ROWS)
                own = obs.after_position(obs.sandbox_events(sandbox_id, rows), positions.get(sandbox_id))
                streams[sandbox_id] = ([i for i in own if not query.start_ns or i.occurred_ns >= query.start_ns],
                                       False)
                for session_id, session in view.sessions.items():
                    items, cut, skipped = _read_stream(
                        view.store, session_id, 0, positions.get(session_id), query, EVENT_TOPICS,
                        lambda r, skip: _event_items(session_id, r))
                    if skipped is not None:
                        positions[session_id] = skipped
                    streams[session_id] = (items, cut)
                return streams, positions
            streams, positions = await asyncio.to_thread(read)
            return _pruned(view, *obs.merge_page(streams, positions, query.limit, query.keep))

    # ---- watching ----------------------------------------------------------------------------------
    def latest_positions(self, sandbox_id: str) -> obs.Positions:
        """Where each stream stands now: a watch without a cursor starts here."""
        runtime = self.manager.registry.running.get(sandbox_id)
        sandbox = self.manager.registry.sandbox(sandbox_id)
        positions: obs.Positions = {sandbox_id: (sandbox.version, 0)}
        if runtime is not None:
            positions.update({sid: (seq, 0) for sid, seq in runtime.store.committed_seq.items()})
        return positions

    def changed_since(self, sandbox_id: str, positions: obs.Positions, seen: dict) -> bool:
        """Cheap (in memory): may a read now find something new? ``seen`` is the caller's record of
        what it last looked at."""
        runtime = self.manager.registry.running.get(sandbox_id)
        sandbox = self.manager.registry.sandbox(sandbox_id)
        now = (sandbox.version, tuple(sorted(runtime.store.committed_seq.items())) if runtime else None,
               tuple((c.launch_id, c.output.count) for c in runtime.contexts.list()) if runtime else None)
        if seen.get("state") == now:
            return False
        seen["state"] = now
        return True


def _pruned(view: JournalView, items, positions: obs.Positions, more: bool):
    """Positions of streams that are gone (deleted sessions, ended contexts) leave the cursor."""
    known = set(view.sessions) | {c.launch_id for c in view.contexts} | {view.sandbox_id}
    return items, {k: v for k, v in positions.items() if k in known}, more


def _context_items(context: Context) -> list[obs.Item]:
    items: list[obs.Item] = []
    for source, text, number, at in context.output.stamped():
        items += obs.log_items(context.launch_id, number + 1, {"data": text.encode(), "stream": source,
                                                              "attempt_id": context.launch_id}, at, 0,
                               context_id=context.id)
    return items


def _event_items(session_id: str, row) -> list[obs.Item]:
    item = obs.session_event(session_id, row.seq, row.topic, row.state, row.occurred_ns)
    return [item] if item is not None else []


def _read_stream(store, stream: str, earliest: int, position, query: Query, topics, to_items):
    """One page of a stream after ``position``: (items, cut short, the position skipped to when
    rows before ``start_ns`` were passed over)."""
    seq, line = position if position is not None else (0, 0)
    gt = seq if line == 0 else seq - 1
    gt = max(gt, earliest - 1, 0)
    skipped, scanned = None, 0
    while True:
        rows = store.journal.read_rows(stream, gt, LTE_MAX, query.limit, topics)
        cut = len(rows) >= query.limit
        if query.start_ns and position is None:
            head = [r for r in rows if r.occurred_ns < query.start_ns]
            if head and len(head) == len(rows) == query.limit and scanned < MAX_SCAN_ROWS:
                gt, skipped, scanned = rows[-1].seq, (rows[-1].seq, 0), scanned + len(rows)
                continue
            if head:
                skipped = (head[-1].seq, 0)
                rows = [r for r in rows if r.occurred_ns >= query.start_ns]
        break
    items = []
    for row in rows:
        skip = line if position is not None and row.seq == seq else 0
        items.extend(to_items(row, skip))
    return obs.after_position(items, position), cut, skipped
