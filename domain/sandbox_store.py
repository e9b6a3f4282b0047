"""SandboxStore: one sandbox's aggregates, live in memory, over its journal store (one store per sandbox).

It owns the live sessions (one ``LiveSession`` each, in ``live``: never a store read on the hot
path) and the idempotency keys of its creates. The events themselves live in a ``JournalStore``
(``domain.ports``): this module never sees SQL or the codec. Journal pages are read back through
the port as raw rows the API renders (``api/journal_wire.py``).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Callable

from .live_session import LiveSession
from .model.journal import LIFECYCLE_TOPICS, OUTPUT_TOPIC, JournalEntry
from .model.sandbox import Sandbox
from .model.session import Session, SessionView
from .ports import JournalStore, RawRows
from .page_read_ahead import AheadPage

OUTPUT_ONLY = frozenset((OUTPUT_TOPIC,))
TAIL_PAGE = 256


class LiveView(Mapping):
    """A read-only view of a store's live sessions, each as one of its fields (not a second map)."""

    __slots__ = ("_live", "_field")

    def __init__(self, live: dict[str, LiveSession], field: str) -> None:
        self._live = live
        self._field = field

    def __getitem__(self, session_id: str):
        return getattr(self._live[session_id], self._field)

    def __iter__(self) -> Iterator[str]:
        return iter(self._live)

    def __len__(self) -> int:
        return len(self._live)


class SandboxStore:
    released = False  # set by the pause hook before sealing: nothing more is committed here

    def __init__(self, journal: JournalStore) -> None:
        self.journal = journal
        self.sandbox: Sandbox | None = None
        self.live: dict[str, LiveSession] = {}  # the one map of a sandbox's sessions: id -> its object
        self.sessions: Mapping[str, Session] = LiveView(self.live, "aggregate")  # the same: id -> aggregate
        self.committed_seq: Mapping[str, int] = LiveView(self.live, "committed_seq")  # id -> its last committed seq
        self.creation_keys: dict[str, str] = {}  # Idempotency-Key -> session id (an index of ``sessions``)
        # The owner's rule after a session's events are committed (``SandboxRuntime.after_commit``):
        # None for a store opened without a runtime (a paused sandbox's record changes).
        self.after_commit: Callable[[Session, list], None] | None = None

    # ---- loading ------------------------------------------------------------------------
    def load(self, sandbox_id: str) -> None:
        """Rebuild every aggregate of this store from its snapshot plus tail (sync: run in a thread)."""
        for aggregate in self.journal.load():
            if aggregate.id == sandbox_id:
                self.sandbox = aggregate
            elif isinstance(aggregate, Session):
                self.adopt(aggregate)

    # ---- sessions -----------------------------------------------------------------------
    def adopt(self, session: Session, committed: bool = True) -> LiveSession:
        """A session loaded from the store (committed) or just created (shown once committed)."""
        live = self.live[session.id] = LiveSession(session, committed)
        if session.creation_key:
            self.creation_keys[session.creation_key] = session.id
        return live

    def forget(self, session_id: str) -> LiveSession | None:
        """The session leaves the store (deleted, or its creation rolled back): its one object."""
        live = self.live.pop(session_id, None)
        if live is not None:
            key = live.aggregate.creation_key
            if key and self.creation_keys.get(key) == session_id:
                del self.creation_keys[key]
        return live

    def aggregate(self, session_id: str) -> Session | None:
        live = self.live.get(session_id)
        return live.aggregate if live is not None else None

    def list_sessions(self) -> list[Session]:
        """Every session aggregate, oldest first."""
        return sorted((live.aggregate for live in self.live.values()), key=lambda s: (s.created_ns, s.id))

    # ---- what commits change --------------------------------------------------------------
    def restore(self, aggregate, stored) -> None:
        """Roll a live aggregate back to its stored state, in place: the attempt runner, the
        runners' callbacks and the pipeline keep the same object."""
        if stored is None:
            if isinstance(aggregate, Session):
                self.forget(aggregate.id)
            return
        aggregate.__dict__.clear()
        aggregate.__dict__.update(stored.__dict__)
        live = self.live.get(aggregate.id) if isinstance(aggregate, Session) else None
        if live is not None:
            live.committed_seq = aggregate.version
            live.view = aggregate.view()

    def show_committed(self, views: dict, rolled_back) -> None:
        """A commit landed: its sessions are shown as they were after its events."""
        for session_id, view in views.items():
            live = self.live.get(session_id)
            if live is not None and session_id not in rolled_back:
                live.view = view

    def view(self, session: Session) -> SessionView | None:
        """The session as the API shows it: as of its last committed event (None until its
        creation is committed)."""
        live = self.live.get(session.id)
        return live.view if live is not None else None

    def free_bytes(self) -> int | None:
        return self.journal.free_bytes()

    def close(self) -> None:
        self.journal.close()

    # ---- journal reads (sync: called through asyncio.to_thread) -------------------------
    def read_raw(self, session_id: str, after: int, upto: int, limit: int,
                 lifecycle_only: bool = False) -> RawRows:
        """Stored events with seq in (after, upto], not decoded: the API renders them."""
        return self.journal.read_raw(session_id, after, upto, limit, LIFECYCLE_TOPICS if lifecycle_only else None)

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


class ReadAheadSlots:
    """Each session's page read ahead, kept in its ``LiveSession`` (``read_ahead.Slots``)."""

    def __init__(self, store: SandboxStore) -> None:
        self._sessions = store.live

    def get(self, session_id: str) -> AheadPage | None:
        live = self._sessions.get(session_id)
        return live.read_ahead if live is not None else None

    def pop(self, session_id: str, default: None = None) -> AheadPage | None:
        live = self._sessions.get(session_id)
        if live is None:
            return default
        ahead, live.read_ahead = live.read_ahead, None
        return ahead

    def __setitem__(self, session_id: str, ahead: AheadPage) -> None:
        live = self._sessions.get(session_id)
        if live is None:  # deleted meanwhile: nothing keeps it
            ahead.cancel()
        else:
            live.read_ahead = ahead
