"""SandboxStore: one sandbox's aggregates, live in memory, over its journal store (one store per sandbox).

It owns the live aggregates (a dict: never a store read on the hot path), the committed
seq of each session, and the idempotency keys of its creates. The events themselves live
in a ``JournalStore`` (``domain.ports``): this module never sees SQL, rows or the codec.
Journal pages are read back through the port and rendered by ``model.journal``.
"""
from __future__ import annotations

from typing import Callable

from .model.journal import LIFECYCLE_TOPICS, OUTPUT_TOPIC, PUBLIC_TYPE, JournalEntry, public_record
from .model.sandbox import Sandbox
from .model.session import Session, SessionView
from .model.timefmt import rfc3339
from .ports import JournalStore, PublicJson

OUTPUT_ONLY = frozenset((OUTPUT_TOPIC,))
TAIL_PAGE = 256


class SandboxStore:
    released = False  # set by the pause hook before sealing: nothing more is committed here

    def __init__(self, journal: JournalStore) -> None:
        self.journal = journal
        self.sessions: dict[str, Session] = {}
        self.sandbox: Sandbox | None = None
        self.committed_seq: dict[str, int] = {}
        self.views: dict[str, SessionView] = {}  # what the API shows: the committed state
        self.creation_keys: dict[str, str] = {}
        # called with a session after its events are committed (retention)
        self.on_commit: Callable[[Session], None] | None = None

    # ---- loading ------------------------------------------------------------------------
    def load(self, sandbox_id: str) -> None:
        """Rebuild every aggregate of this store from its snapshot plus tail (sync: run in a thread)."""
        for aggregate in self.journal.load():
            if aggregate.id == sandbox_id:
                self.sandbox = aggregate
            elif isinstance(aggregate, Session):
                self.adopt(aggregate)

    def restore(self, live, stored) -> None:
        """Roll a live aggregate back to its stored state, in place: the attempt runner, the
        runners' callbacks and the pipeline keep the same object."""
        if stored is None:
            if isinstance(live, Session):
                self.forget(live)
            return
        live.__dict__.clear()
        live.__dict__.update(stored.__dict__)
        if isinstance(live, Session):
            self.committed_seq[live.id] = live.version
            self.views[live.id] = live.view()

    def show_committed(self, views: dict, rolled_back) -> None:
        """A commit landed: its sessions are shown as they were after its events."""
        for session_id, view in views.items():
            if session_id in self.sessions and session_id not in rolled_back:
                self.views[session_id] = view

    def view(self, session: Session) -> SessionView | None:
        """The session as the API shows it: as of its last committed event (None until its
        creation is committed)."""
        return self.views.get(session.id)

    def free_bytes(self) -> int | None:
        return self.journal.free_bytes()

    def close(self) -> None:
        self.journal.close()

    def adopt(self, session: Session, committed: bool = True) -> None:
        """A session loaded from the store (committed) or just created (shown once committed)."""
        self.sessions[session.id] = session
        self.committed_seq[session.id] = session.version if committed else 0
        if committed:
            self.views[session.id] = session.view()
        if session.creation_key:
            self.creation_keys[session.creation_key] = session.id

    def forget(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        self.committed_seq.pop(session.id, None)
        self.views.pop(session.id, None)
        if session.creation_key and self.creation_keys.get(session.creation_key) == session.id:
            del self.creation_keys[session.creation_key]

    # ---- journal reads (sync: called through asyncio.to_thread) -------------------------
    def read_records(self, session_id: str, after: int, upto: int, limit: int,
                     lifecycle_only: bool = False) -> list[dict]:
        """Public records (seq in (after, upto]), rendered by the one renderer."""
        rows = self.journal.read_rows(session_id, after, upto, limit,
                                      LIFECYCLE_TOPICS if lifecycle_only else None)
        return [public_record(session_id, row.seq, row.topic, row.state, rfc3339(row.occurred_ns))
                for row in rows if row.topic in PUBLIC_TYPE]

    def read_public_json(self, session_id: str, after: int, upto: int, limit: int,
                         lifecycle_only: bool = False) -> tuple[list[PublicJson], int]:
        """The same events as JSON for pages and SSE, and the seq of the last row read."""
        return self.journal.read_public_json(session_id, after, upto, limit,
                                             LIFECYCLE_TOPICS if lifecycle_only else None)

    def read_output_tail(self, session_id: str, floor: int, upto: int,
                         min_bytes: int) -> list[tuple[str, bytes]]:
        """Whole output events, newest backwards from ``upto`` until ``min_bytes``, oldest first."""
        chunks: list[tuple[str, bytes]] = []
        total, lte = 0, upto
        while total < min_bytes and lte > floor:
            page = self.journal.read_rows(session_id, floor, lte, TAIL_PAGE, OUTPUT_ONLY, desc=True)
            if not page:
                break
            for row in page:
                lte = row.seq - 1
                chunks.append((row.state["stream"], row.state["data"]))
                total += len(row.state["data"])
                if total >= min_bytes:
                    break
            if len(page) < TAIL_PAGE:
                break
        chunks.reverse()
        return chunks

    def delete_journal(self, session_id: str) -> None:
        self.journal.delete_stream(session_id)


def live_entry(session_id: str, event) -> JournalEntry:
    """A committed domain event as the hub carries it to subscribers: bytes stay bytes; it is
    rendered (base64, RFC 3339) only by whoever sends it on."""
    return JournalEntry(event.originator_version, session_id, event.TOPIC, vars(event), event.timestamp)
