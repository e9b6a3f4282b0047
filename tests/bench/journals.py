"""Long journals built offline, straight into a data dir the server then opens.

Producing hundreds of thousands of events through a live server would take as many
commit ticks (output is coalesced per tick), so the replay and restart benchmarks
write them with the server's own domain objects and store: the same aggregate, events,
codec, retention marks and snapshot policy (``domain.retention``: a snapshot every
SNAPSHOT_EVENTS events). What the server finds on disk is what it would have written.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path

from session_supervisor.domain.model.ids import attempt_id_from, sandbox_id_from, session_id_from
from session_supervisor.domain.model.sandbox import Sandbox
from session_supervisor.domain.model.session import Session
from session_supervisor.domain.model.spec import normalize_spec
from session_supervisor.domain.retention import SNAPSHOT_EVENTS, take_snapshot
from session_supervisor.infra.event_store import SqliteJournal
from session_supervisor.infra.sandbox_dirs import SandboxDirectories

SAVE_EVERY = 250  # events per save (collect_events() is quadratic in pending events)


def build(data_dir: Path, sessions: int, events: int, payload: int, snapshots: bool = True,
          max_bytes: int = 0) -> tuple[str, list[str]]:
    """One sandbox with ``sessions`` exited sessions of ``events`` output events each."""
    dirs = SandboxDirectories(data_dir)
    sandbox_id = sandbox_id_from(uuid.uuid4().hex)
    dirs.create(sandbox_id)
    journal = SqliteJournal(dirs.state_dir(sandbox_id))
    now = time.time_ns() - 3600 * 10**9
    save(journal, Sandbox.claim(sandbox_id, "default", {}, now))
    spec = {"command": ["true"]}
    if max_bytes:
        spec["event_retention"] = {"max_bytes": max_bytes}
    spec = normalize_spec(spec)
    data = (b"0123456789abcdef" * (payload // 16 + 1))[:payload]
    ids = []
    try:
        for _ in range(sessions):
            session_id = session_id_from(uuid.uuid4().hex)
            session = Session.create(session_id, sandbox_id, spec, "", 1, now)
            session.begin_attempt(attempt_id_from(uuid.uuid4().hex), "created", 1, now)
            session.record_started(1, 1, now)
            session.record_ready(now)
            snapped = 0
            for i in range(events):
                now += 1000
                session.record_output("stdout", data, now)
                if (i + 1) % SAVE_EVERY == 0:
                    save(journal, session)
                    if snapshots and session.version - snapped >= SNAPSHOT_EVENTS:
                        save(journal, snapshot=take_snapshot(session))
                        snapped = session.version
            session.record_exit(0, None, now)
            save(journal, session)
            if snapshots and session.version - snapped >= SNAPSHOT_EVENTS:
                save(journal, snapshot=take_snapshot(session))
            ids.append(session_id)
    finally:
        journal.close()
    return sandbox_id, ids


def save(journal: SqliteJournal, aggregate=None, snapshot=None) -> None:
    """What the writer thread does with a tick: the store's own commit."""
    outcome = journal.commit(aggregate.collect_events() if aggregate is not None else [],
                             [snapshot] if snapshot is not None else [])
    if outcome.store_error is not None or outcome.rolled_back:
        raise RuntimeError(f"journal refused the commit: {outcome}")


def store_path(data_dir: Path, sandbox_id: str) -> Path:
    return data_dir / "sandboxes" / sandbox_id / "state" / "journal.sqlite"
