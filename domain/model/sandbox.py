"""The Sandbox aggregate: identity, template, runtime generation and lifecycle status.

It lives in the sandbox's own store (one store per sandbox), next to its sessions, so a checkpoint of the
rootfs carries the generation with the journals.
"""
from __future__ import annotations

from eventsourcing.domain import BaseAggregate

from . import events as ev


class SandboxEvent(ev.CanMutateAggregate[str], ev.StrDomainEvent):
    TOPIC = "supervisor.Sandbox.Event"


class Claimed(ev.CanInitAggregate[str], SandboxEvent):
    TOPIC = "supervisor.Sandbox.Claimed"
    class_version = 2
    originator_topic: str
    template: str
    config: dict
    team_id: str  # v2: the team of the key that claimed it ("": the server's own token, no team)

    @staticmethod
    def upcast_v1_v2(state: dict) -> None:
        state["team_id"] = ""  # claimed before teams existed: the platform's own

    def apply(self, sb) -> None:
        at_ns = ev.ns_of(self.timestamp)
        sb.template = self.template
        sb.team_id = self.team_id
        sb.config = self.config
        sb.runtime_generation = 1
        sb.status = "running"
        sb.claimed_ns = sb.created_ns = sb.updated_ns = at_ns
        sb.expires_ns = _deadline(at_ns, self.config.get("ttl", 0))
        sb.hard_expires_ns = _deadline(at_ns, self.config.get("hard_ttl", 0))


class Reconfigured(SandboxEvent):
    TOPIC = "supervisor.Sandbox.Reconfigured"
    config: dict
    expires_ns: int
    hard_expires_ns: int

    def apply(self, sb) -> None:
        sb.config = self.config
        sb.expires_ns = self.expires_ns
        sb.hard_expires_ns = self.hard_expires_ns
        sb.updated_ns = ev.ns_of(self.timestamp)


class PausedSandbox(SandboxEvent):
    TOPIC = "supervisor.Sandbox.Paused"
    by_user: bool  # a user pause stays paused across server restarts; a shutdown one does not

    def apply(self, sb) -> None:
        sb.status = "paused"
        sb.paused_by_user = self.by_user
        sb.updated_ns = ev.ns_of(self.timestamp)


class RuntimeStarted(SandboxEvent):
    """A new runtime generation: resume after a pause, or a start over unclean state."""

    TOPIC = "supervisor.Sandbox.RuntimeStarted"
    generation: int
    expires_ns: int

    def apply(self, sb) -> None:
        sb.runtime_generation = self.generation
        sb.status = "running"
        sb.paused_by_user = False
        sb.expires_ns = self.expires_ns
        sb.updated_ns = ev.ns_of(self.timestamp)


def _deadline(at_ns: int, seconds: int) -> int:
    return at_ns + seconds * 1_000_000_000 if seconds and seconds > 0 else 0


class Sandbox(BaseAggregate[str]):
    TOPIC = "supervisor.Sandbox"
    team_id = ""  # what a snapshot written before teams restores to (its state has no team_id)

    def __init__(self) -> None:
        self.paused_by_user = False

    @classmethod
    def claim(cls, sandbox_id: str, template: str, config: dict, at_ns: int, team_id: str = "") -> "Sandbox":
        return cls._create(Claimed, id=sandbox_id, template=template, config=config, team_id=team_id,
                           timestamp=ev.timestamp_of(at_ns))

    @property
    def auto_resume(self) -> bool:
        return bool(self.config.get("auto_resume", True))

    def reconfigure(self, changes: dict, at_ns: int) -> None:
        config = {**self.config, **changes}
        expires = _deadline(at_ns, changes["ttl"]) if "ttl" in changes else self.expires_ns
        hard = _deadline(at_ns, changes["hard_ttl"]) if "hard_ttl" in changes else self.hard_expires_ns
        self.trigger_event(Reconfigured, timestamp=ev.timestamp_of(at_ns), config=config,
                           expires_ns=expires, hard_expires_ns=hard)

    def refresh(self, duration_s: int, at_ns: int) -> None:
        ttl = duration_s or self.config.get("ttl", 0)
        self.trigger_event(Reconfigured, timestamp=ev.timestamp_of(at_ns), config=self.config,
                           expires_ns=_deadline(at_ns, ttl),
                           hard_expires_ns=_deadline(at_ns, self.config.get("hard_ttl", 0)))

    def mark_paused(self, by_user: bool, at_ns: int) -> None:
        self.trigger_event(PausedSandbox, timestamp=ev.timestamp_of(at_ns), by_user=by_user)

    def start_new_runtime(self, at_ns: int) -> int:
        generation = self.runtime_generation + 1
        self.trigger_event(RuntimeStarted, timestamp=ev.timestamp_of(at_ns), generation=generation,
                           expires_ns=_deadline(at_ns, self.config.get("ttl", 0)))
        return generation


ev.register_topics(Claimed, Reconfigured, PausedSandbox, RuntimeStarted)


class FailedSandbox:
    """A sandbox found on disk whose store could not be opened: listed with ``status: failed``
    and its reason, refused for everything but get, list, resume (which tries again) and delete,
    so nothing of it stays on disk unreachable. Not an aggregate: nothing is recorded for it."""

    status = "failed"
    auto_resume = False
    paused_by_user = False

    def __init__(self, sandbox_id: str, reason: str, known: Sandbox | None = None) -> None:
        self.id = sandbox_id
        self.failure_reason = reason
        self.template = getattr(known, "template", "")
        self.config = getattr(known, "config", {})
        self.runtime_generation = getattr(known, "runtime_generation", 0)
        self.team_id = getattr(known, "team_id", "")  # unreadable: only the platform key sees it
        for name in ("claimed_ns", "created_ns", "updated_ns", "expires_ns", "hard_expires_ns"):
            setattr(self, name, getattr(known, name, 0))
