"""How ``sessionctl`` prints results: a table by default, or exactly the API's ``data`` as JSON."""
from __future__ import annotations

import json
import sys

from .models import Event, Listing, Sandbox, Session


def print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(c) if c not in (None, "") else "-" for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines) + "\n"


def fields(pairs: list[tuple[str, object]]) -> str:
    width = max(len(k) for k, _ in pairs)
    return "".join(f"{k.ljust(width)}  {'-' if v in (None, '') else v}\n" for k, v in pairs)


def command_text(spec: dict) -> str:
    argv = spec.get("command") or []
    text = " ".join(a if a and " " not in a else json.dumps(a) for a in argv)
    return text if len(text) <= 60 else text[:57] + "..."


def session_rows(sessions: list[Session]) -> str:
    return table(["ID", "NAME", "PHASE", "DESIRED", "ATTEMPT", "GEN", "RESTARTS", "COMMAND"],
                 [[s.id, s.name, s.phase, s.desired_state, s.attempt.number if s.attempt else None,
                   s.runtime_generation, s.restart_count, command_text(s.spec)] for s in sessions])


def session_detail(s: Session) -> str:
    a = s.attempt
    pairs = [("id", s.id), ("name", s.name), ("phase", s.phase), ("desired state", s.desired_state),
             ("runtime generation", s.runtime_generation), ("spec version", s.spec_version),
             ("restarts", s.restart_count), ("command", command_text(s.spec)),
             ("io", s.spec.get("io", {}).get("mode")),
             ("cursor", f"{s.cursor.earliest}..{s.cursor.latest}")]
    if a is not None:
        exit_text = a.exit_code if a.signal is None else f"{a.exit_code} ({a.signal})"
        pairs += [("attempt", f"{a.id} #{a.number} gen {a.runtime_generation}"), ("pid", a.pid),
                  ("started", a.started_at), ("finished", a.finished_at), ("exit code", exit_text),
                  ("reason", a.reason)]
    return fields(pairs + [("created", s.created_at), ("last activity", s.last_activity_at)])


def sandbox_rows(sandboxes: list[Sandbox]) -> str:
    return table(["ID", "TEMPLATE", "STATUS", "GEN", "CREATED"],
                 [[b.id, b.template_id, b.status, b.runtime_generation, b.created_at] for b in sandboxes])


def sandbox_detail(b: Sandbox) -> str:
    return fields([("id", b.id), ("template", b.template_id), ("status", b.status), ("paused", b.paused),
                   ("auto resume", b.auto_resume), ("runtime", b.runtime_id),
                   ("runtime generation", b.runtime_generation), ("created", b.created_at),
                   ("expires", b.expires_at), ("hard expires", b.hard_expires_at)])


def generic(data) -> str:
    if isinstance(data, dict) and data and all(not isinstance(v, (dict, list)) for v in data.values()):
        return fields([(k.replace("_", " "), v) for k, v in data.items()])
    return json.dumps(data, indent=2) + "\n"


def render(result) -> str:
    """The table form of any result object the client returns."""
    if isinstance(result, Listing):
        # The API's own key says what an empty list is a list of.
        if "sandboxes" in result.raw or (result and all(isinstance(x, Sandbox) for x in result)):
            return sandbox_rows(list(result))
        if "sessions" in result.raw or (result and all(isinstance(x, Session) for x in result)):
            return session_rows(list(result))
    if isinstance(result, Session):
        return session_detail(result)
    if isinstance(result, Sandbox):
        return sandbox_detail(result)
    return generic(getattr(result, "raw", result))


def event_line(event: Event) -> str:
    """seq, time, type, attempt, then the decoded output or the event's facts."""
    if event.type == "output":
        text = event.data.decode("utf-8", errors="replace")
        detail = f"{event.stream} {json.dumps(text, ensure_ascii=False)}"
    else:
        facts = [(k, getattr(event, k)) for k in ("reason", "exit_code", "signal")]
        detail = " ".join(f"{k}={v}" for k, v in facts if v is not None)
    return f"{event.seq:>6}  {event.occurred_at:<30}  {event.type:<21} {event.attempt_id or '-':<16} {detail}".rstrip() + "\n"
