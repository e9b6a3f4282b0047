"""SessionSupervisor: one eventsourcing application (one store) per sandbox (D5).

It owns the live aggregates (a dict: never ``repository.get`` on the hot path), reads
journal pages straight from the recorder as public records, and rebuilds aggregates
from their latest snapshot plus the tail on open. It never names SQLite.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

from eventsourcing.application import AggregateNotFoundError, Application

from .model import events as ev
from .model.errors import UnavailableError
from .model.journal import LIFECYCLE_TOPICS, OUTPUT_TOPIC, PUBLIC_TYPE, public_record
from .model.sandbox import Sandbox
from .model.session import Session
from .model.timefmt import rfc3339


def _project(initial, events):
    # The library's default projector asserts a runtime Protocol on every event (x2.2 slower).
    aggregate = initial
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


class SessionSupervisor(Application[str]):
    name = "supervisor"
    snapshot_class = ev.Snapshot
    released = False  # set by the pause hook before sealing: nothing more is committed here

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(env=env)
        self.sessions: dict[str, Session] = {}
        self.sandbox: Sandbox | None = None
        self.committed_seq: dict[str, int] = {}
        self.creation_keys: dict[str, str] = {}
        self.on_commit = None  # called with a session after its events are committed (retention)
        self._readers = 0
        self._closed = False
        self._reads_done = threading.Condition()

    @contextmanager
    def reading(self):
        """Reads run in worker threads; ``close`` waits for them, because closing a SQLite
        connection while another thread uses it can crash the process."""
        with self._reads_done:
            if self._closed:
                raise UnavailableError("sandbox store is closed")
            self._readers += 1
        try:
            yield
        finally:
            with self._reads_done:
                self._readers -= 1
                self._reads_done.notify_all()

    def close(self) -> None:
        with self._reads_done:
            self._closed = True
            self._reads_done.wait_for(lambda: self._readers == 0, timeout=30)
        super().close()

    # ---- loading ------------------------------------------------------------------------
    def load(self, sandbox_id: str) -> None:
        """Rebuild every aggregate of this store from its snapshot plus tail (sync: run in a thread)."""
        for originator_id in self._originator_ids():
            aggregate = self.repository.get(originator_id, projector_func=_project)
            if originator_id == sandbox_id:
                self.sandbox = aggregate
            else:
                self.adopt(aggregate)

    def _originator_ids(self) -> list[str]:
        if hasattr(self.factory, "originator_ids"):  # one index seek per aggregate
            return self.factory.originator_ids()
        with self.factory.datastore.transaction(commit=False) as cursor:
            cursor.execute("SELECT DISTINCT originator_id FROM stored_events")
            return [row[0] for row in cursor.fetchall()]

    def stored_copy(self, originator_id: str):
        """The aggregate as its store holds it, or None if nothing of it was ever stored
        (sync: the writer thread calls it after a refused commit)."""
        try:
            return self.repository.get(originator_id, projector_func=_project)
        except AggregateNotFoundError:
            return None

    def restore(self, live, stored) -> None:
        """Roll a live aggregate back to its stored state, in place: the reconciler, the
        runners' callbacks and the pipeline keep the same object."""
        if stored is None:
            if isinstance(live, Session):
                self.forget(live)
            return
        live.__dict__.clear()
        live.__dict__.update(stored.__dict__)
        if isinstance(live, Session):
            self.committed_seq[live.id] = live.version

    def free_bytes(self) -> int | None:
        """Free space on the store's filesystem (None when the store has no file)."""
        free = getattr(self.factory, "free_bytes", None)
        return free() if free is not None else None

    def adopt(self, session: Session) -> None:
        self.sessions[session.id] = session
        self.committed_seq[session.id] = session.version
        if session.creation_key:
            self.creation_keys[session.creation_key] = session.id

    def forget(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        self.committed_seq.pop(session.id, None)
        if session.creation_key and self.creation_keys.get(session.creation_key) == session.id:
            del self.creation_keys[session.creation_key]

    # ---- journal reads (sync: called through asyncio.to_thread) -------------------------
    def read_records(self, session_id: str, after: int, upto: int, limit: int,
                     lifecycle_only: bool = False) -> list[dict]:
        with self.reading():
            return self._read_records(session_id, after, upto, limit, lifecycle_only)

    def _read_records(self, session_id: str, after: int, upto: int, limit: int,
                      lifecycle_only: bool) -> list[dict]:
        decode = self.mapper.transcoder.decode
        if hasattr(self.factory, "select_topics"):  # plain rows; lifecycle filtered in SQL
            rows = self.factory.select_topics(session_id, after, upto,
                                              LIFECYCLE_TOPICS if lifecycle_only else None, limit)
            fields = getattr(self.mapper.transcoder, "decode_record", None)
            if fields is None:
                return [_render(session_id, version, topic, decode(state))
                        for version, topic, state in rows if topic in PUBLIC_TYPE]
            return [public_record(session_id, version, topic, state, rfc3339(state["__ts"] * 1000))
                    for version, topic, state in ((v, t, fields(s)) for v, t, s in rows)
                    if topic in PUBLIC_TYPE]
        records = []
        gt = after
        while len(records) < limit and gt < upto:
            page = self.recorder.select_events(session_id, gt=gt, lte=upto, limit=min(limit, 1000))
            if not page:
                break
            for stored in page:
                gt = stored.originator_version
                if lifecycle_only and stored.topic not in LIFECYCLE_TOPICS:
                    continue
                if stored.topic not in PUBLIC_TYPE:
                    continue
                state = decode(stored.state)
                records.append(public_record(session_id, stored.originator_version, stored.topic,
                                             state, rfc3339(state["timestamp"])))
                if len(records) >= limit:
                    break
        return records

    def read_output_tail(self, session_id: str, floor: int, upto: int,
                         min_bytes: int) -> list[tuple[str, bytes]]:
        """Whole output events, newest backwards from ``upto`` until ``min_bytes``, oldest first."""
        decode = self.mapper.transcoder.decode
        chunks: list[tuple[str, bytes]] = []
        total, lte = 0, upto
        with self.reading():
            while total < min_bytes and lte > floor:
                page = self.recorder.select_events(session_id, gt=floor, lte=lte, desc=True, limit=256)
                if not page:
                    break
                for stored in page:
                    lte = stored.originator_version - 1
                    if stored.topic == OUTPUT_TOPIC:
                        state = decode(stored.state)
                        chunks.append((state["stream"], state["data"]))
                        total += len(state["data"])
                        if total >= min_bytes:
                            break
        chunks.reverse()
        return chunks

    def delete_journal(self, session_id: str) -> None:
        with self.reading(), self.factory.datastore.transaction(commit=True) as cursor:
            cursor.execute("DELETE FROM stored_events WHERE originator_id=?", (session_id,))
            cursor.execute("DELETE FROM stored_snapshots WHERE originator_id=?", (session_id,))


def _render(session_id: str, seq: int, topic: str, state: dict) -> dict:
    return public_record(session_id, seq, topic, state, rfc3339(state["timestamp"]))


def live_record(session_id: str, event) -> dict:
    state = vars(event)
    return public_record(session_id, event.originator_version, event.TOPIC, state,
                         rfc3339(event.timestamp))
