"""``GET /metrics``: Prometheus text format, behind the same auth as the API.

prometheus_client writes the exposition format (escaping, histogram buckets, HELP/TYPE)
so we do not hand-roll it. Counters are fed from committed journal events through the
Container's observer hook (the domain never imports this); gauges are read from the
live objects at scrape time, so they cannot drift from the truth.
"""
from __future__ import annotations

import os

from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram,
                               disable_created_metrics, generate_latest)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from sanic import HTTPResponse, Request

from session_supervisor.domain.commit_routing import CommitObserver
from session_supervisor.domain.model.journal import PUBLIC_TYPE

# A commit is one fsync (synchronous=FULL): sub-millisecond when idle, tens of ms under load.
COMMIT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
OOM_REASONS = frozenset({"oom", "oom_killed"})


class JournalCounters(CommitObserver):
    """What the journal says happened, counted as it is committed."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.events = Counter("sessiond_events_committed", "Journal events committed", ["type"],
                              registry=registry)
        self.output_bytes = Counter("sessiond_output_bytes_committed", "Output bytes committed to journals",
                                    ["stream"], registry=registry)
        self.started = Counter("sessiond_attempts_started", "Attempts whose process started", ["reason"],
                               registry=registry)
        self.exited = Counter("sessiond_attempts_exited", "Attempts that ended, by reason", ["reason"],
                              registry=registry)
        self.oom_kills = Counter("sessiond_oom_kills", "Attempts ended by the out-of-memory killer",
                                 registry=registry)
        self.commit_seconds = Histogram("sessiond_commit_seconds", "Journal commit latency (submit to durable)",
                                        buckets=COMMIT_BUCKETS, registry=registry)
        self._start_reasons: dict[str, str] = {}  # attempt id -> why it was started

    def committed(self, events: list) -> None:
        for event in events:
            kind = PUBLIC_TYPE.get(getattr(event, "TOPIC", ""), "other")
            self.events.labels(kind).inc()
            if kind == "output":
                self.output_bytes.labels(event.stream).inc(len(event.data))
            elif kind == "attempt.starting":
                self._start_reasons[event.attempt_id] = getattr(event, "reason", "")
            elif kind == "attempt.started":
                self.started.labels(self._start_reasons.pop(event.attempt_id, "")).inc()
            elif kind == "attempt.exited":
                self._start_reasons.pop(event.attempt_id, None)
                self.exited.labels(event.reason).inc()
                if event.reason in OOM_REASONS:
                    self.oom_kills.inc()

    def tick_committed(self, seconds: float) -> None:
        self.commit_seconds.observe(seconds)


class LiveState:
    """Gauges read from the running server at each scrape. ``visible_to`` (a team's key) keeps
    only the series of that team's sandboxes: the server-wide ones count other tenants' too."""

    def __init__(self, container, visible_to=None) -> None:
        self.container = container
        self.visible_to = visible_to

    def describe(self):
        return []  # collected lazily: the registry must not scrape at registration

    def collect(self):
        manager = self.container.manager
        phases = GaugeMetricFamily("sessiond_sessions", "Sessions by phase", labels=["phase"])
        queued = GaugeMetricFamily("sessiond_input_queue_depth", "Input operations queued for processes",
                                   labels=["sandbox"])
        store = GaugeMetricFamily("sessiond_store_bytes", "Journal store size on disk", labels=["sandbox"])
        counts: dict[str, int] = {}
        for sandbox_id, runtime in (dict(manager.registry.running) if manager else {}).items():
            if self.visible_to is not None and not self.visible_to.sees(runtime.store.sandbox.team_id):
                continue
            for session in runtime.list_sessions():
                counts[session.phase] = counts.get(session.phase, 0) + 1
            depth = sum(live.attempt.ops.qsize() for live in runtime.store.live.values() if live.attempt is not None)
            queued.add_metric([sandbox_id], depth)
            store.add_metric([sandbox_id], _dir_bytes(manager.files.state_dir(sandbox_id)))
        for phase, count in sorted(counts.items()):
            phases.add_metric([phase], count)
        if self.visible_to is not None:
            return [phases, queued, store]
        hub = self.container.hub
        subscribers = GaugeMetricFamily("sessiond_subscribers", "Live SSE and WebSocket subscribers",
                                        value=hub.subscriber_count())
        detaches = CounterMetricFamily("sessiond_subscriber_detaches", "Subscribers closed by the server, "
                                     "by reason (slow: could not keep up)", labels=["reason"])
        for reason, count in sorted(hub.detaches.items()):
            detaches.add_metric([reason], count)
        return [phases, queued, store, subscribers, detaches, *warm_pool_metrics(self.container)]


def warm_pool_metrics(container) -> list:
    """Each stock of the warm pool (infra/warm_pool.py), by part: directory, cgroups, network."""
    pool = getattr(container, "warm_pool", None)
    if pool is None or not pool.enabled:
        return []
    ready = GaugeMetricFamily("sessiond_warm_pool_ready", "Sandbox parts made ahead, ready for a claim",
                              labels=["part"])
    target = GaugeMetricFamily("sessiond_warm_pool_target", "Sandbox parts the pool keeps ready (its size "
                               "times the templates in use)", labels=["part"])
    counters = {name: CounterMetricFamily(f"sessiond_warm_pool_{name}", text, labels=["part"]) for name, text in (
        ("made", "Sandbox parts the pool made"),
        ("taken", "Claims that took a part from the pool"),
        ("missed", "Claims that found no part of their shape in the pool and made their own"),
        ("discarded", "Parts the pool made and removed unused (a template no longer claimed, a stop)"),
        ("failed", "Parts the pool failed to make"))}
    for part, counts in sorted(pool.counts().items()):
        ready.add_metric([part], counts.ready)
        target.add_metric([part], counts.target)
        for name, family in counters.items():
            family.add_metric([part], getattr(counts, name))
    return [ready, target, *counters.values()]


def _dir_bytes(path) -> int:
    """Bytes of the files under ``path``, subdirectories too (the output segments)."""
    total = 0
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
                elif entry.is_dir(follow_symlinks=False):
                    total += _dir_bytes(entry.path)
    except OSError:
        pass  # deleted between the listing and the scan
    return total


def install_metrics(app, container) -> None:
    disable_created_metrics()  # the *_created series double the output and nobody graphs them
    registry = CollectorRegistry(auto_describe=False)
    container.observers.append(JournalCounters(registry))
    registry.register(LiveState(container))
    responses = Counter("sessiond_http_responses", "HTTP responses by status", ["status"], registry=registry)
    expired = Counter("sessiond_cursor_expired", "410 answers: a cursor older than the retained journal",
                      registry=registry)

    @app.on_response
    async def count_response(request: Request, response):
        status = getattr(response, "status", 0)
        responses.labels(str(status)).inc()
        if status == 410:
            expired.inc()

    @app.get("/metrics", name="metrics")
    async def metrics(request: Request):
        principal = getattr(request.ctx, "principal", None)
        if principal is not None and not principal.all_teams:  # a team's key: its sandboxes only
            team_view = CollectorRegistry(auto_describe=False)
            team_view.register(LiveState(container, visible_to=principal))
            return HTTPResponse(generate_latest(team_view), content_type=CONTENT_TYPE_LATEST)
        return HTTPResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
