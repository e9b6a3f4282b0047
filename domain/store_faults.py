"""What the write path knows about stores that refuse writes (a full disk, a read-only store).

One ``StoreBatch`` is what one store owes in one tick. When the writer cannot commit it
(disk full, read-only, I/O error) the batch is *held*: kept whole and in order, with
whatever the loop stages for that store meanwhile appended behind it, and offered
again at its retry time. Nothing is skipped, so a restart after a full disk finds a
journal without gaps; nothing is dropped, because the store's output sources stay
paused while it is held. Other stores never wait for it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .model.errors import InsufficientStorageError, StoreUnavailableError, UnencodableEventError

if TYPE_CHECKING:
    from .sandbox_store import SandboxStore


class StoreBatch:
    """The events and snapshots one store owes, with who staged them, in commit order."""

    __slots__ = ("store", "events", "snapshots", "committed", "output", "views")

    def __init__(self, store: SandboxStore) -> None:
        self.store = store
        self.events: list = []
        self.snapshots: list = []
        self.committed: list[tuple[object, list]] = []  # (aggregate, its events)
        self.output: dict[int, int] = {}  # id(session) -> output bytes carried
        self.views: dict[str, object] = {}  # session id -> its state right after these events

    def add(self, aggregate, events: list, snapshots: list, output_bytes: int) -> None:
        self.events.extend(events)
        self.snapshots.extend(snapshots)
        if events:
            self.committed.append((aggregate, events))
            view = getattr(aggregate, "view", None)
            if view is not None:  # taken now: the aggregate is exactly at its last event here
                self.views[aggregate.id] = view()
        if output_bytes:
            self.output[id(aggregate)] = self.output.get(id(aggregate), 0) + output_bytes

    def extend(self, later: "StoreBatch") -> None:
        self.events.extend(later.events)
        self.snapshots.extend(later.snapshots)
        self.committed.extend(later.committed)
        self.views.update(later.views)
        for key, size in later.output.items():
            self.output[key] = self.output.get(key, 0) + size


def unencodable() -> UnencodableEventError:
    return UnencodableEventError("the journal refused a value it cannot encode; nothing was recorded")


def store_error(exc: BaseException) -> BaseException:
    """The domain error a refused write becomes: 507 when the disk is full or read-only."""
    text = str(exc).lower()
    errno = getattr(exc, "errno", None) or getattr(exc.__cause__, "errno", None)
    if errno in (28, 30, 122) or "full" in text or "readonly" in text or "read-only" in text:
        return InsufficientStorageError(f"the sandbox's journal store cannot write: {exc}")
    return StoreUnavailableError(f"the sandbox's journal store cannot write: {exc}")


class StoreFaults:
    """Stores whose last write was refused, and the batches held for their retry."""

    def __init__(self) -> None:
        self._errors: dict[object, BaseException] = {}
        self._held: dict[object, tuple[StoreBatch, float]] = {}

    def __contains__(self, store) -> bool:
        return store in self._errors

    def __bool__(self) -> bool:
        return bool(self._errors)

    @property
    def held(self) -> bool:
        return bool(self._held)

    def error(self, store) -> BaseException:
        return self._errors[store]

    def check(self, store) -> None:
        error = self._errors.get(store)
        if error is not None:
            raise type(error)(error.message)

    def reasons(self) -> dict[str, str]:
        """Sandbox id -> why its store cannot write (for /healthz)."""
        out = {}
        for store, error in self._errors.items():
            sandbox = getattr(store, "sandbox", None)
            out[getattr(sandbox, "id", "?")] = getattr(error, "message", str(error))
        return out

    def hold(self, batch: StoreBatch, error: BaseException, retry_at: float) -> None:
        self._errors[batch.store] = error
        self._held[batch.store] = (batch, retry_at)

    def clear(self, store) -> None:
        self._errors.pop(store, None)

    def forget(self, store) -> None:
        """The store is gone (sandbox deleted): what it owed can never be written."""
        self._errors.pop(store, None)
        self._held.pop(store, None)

    def merge_backlogs(self, batches: dict, now: float) -> set:
        """Put each held batch in front of what its store owes now; a store whose retry is
        due goes into this tick, the others stay held. Returns the stores still held."""
        held = set()
        for store, (backlog, retry_at) in list(self._held.items()):
            later = batches.pop(store, None)
            if later is not None:
                backlog.extend(later)
            if now >= retry_at or getattr(store, "released", False):  # released: dropped by the tick
                del self._held[store]
                batches[store] = backlog
            else:
                self._held[store] = (backlog, retry_at)
                held.add(store)
        return held

    def next_retry(self, now: float) -> float:
        if not self._held:
            return 0.25
        return max(0.005, min(at for _, at in self._held.values()) - now)
