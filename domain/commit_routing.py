"""Where a commit's events go once they are durable: the runtime that owns the store, then the
observers.

The commit pipeline has one callback for every store. A session's events go to its sandbox
runtime's ``after_commit`` (the committed seq, live subscribers, retention: the rule that nothing
is shown before its commit); a sandbox record's commit to the observers' ``sandbox_committed``.
Observers (metrics, webhook hints) only count: the write path never waits on them.
"""
from __future__ import annotations

from typing import Callable

from .model.sandbox import Sandbox


class CommitObserver:
    """Told about commits; override what is needed."""

    def committed(self, events: list) -> None:  # a session's events, durable
        pass

    def sandbox_committed(self, sandbox_id: str) -> None:  # a sandbox record's change, durable
        pass

    def tick_committed(self, seconds: float) -> None:  # one commit tick, from submit to durable
        pass


def route_commits(observers: list[CommitObserver]) -> Callable[[object, object, list], None]:
    """The pipeline's ``on_committed(store, aggregate, events)``."""
    def on_committed(store, aggregate, events: list) -> None:
        if isinstance(aggregate, Sandbox):
            for observer in observers:
                observer.sandbox_committed(aggregate.id)
            return
        if aggregate.id not in store.live:  # deleted (or its creation rolled back) meanwhile
            return
        if store.after_commit is not None:
            store.after_commit(aggregate, events)
        for observer in observers:
            observer.committed(events)
    return on_committed
