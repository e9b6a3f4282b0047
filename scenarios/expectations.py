"""What ``expect`` checks: the session as GET renders it, its public journal, its process.

Journal items are written ``type`` or ``type:reason`` (``attempt.exited:crashed``,
``session.backoff:250ms``); a plain ``type`` matches whatever the reason.
"""
from __future__ import annotations

import base64
import signal as signals

from session_supervisor.api.schemas import render_session
from session_supervisor.domain.model.errors import SessionNotFoundError

from .world import World

# expect key -> how to read it from the rendered session
FIELDS = {
    "phase": lambda s: s["phase"],
    "attempt": lambda s: s.get("attempt", {}).get("number"),
    "restart_count": lambda s: s["restart_count"],
    "generation": lambda s: s["runtime_generation"],
    "desired_state": lambda s: s["spec"]["lifecycle"]["desired_state"],
    "spec_version": lambda s: s["spec_version"],
    "attempt_reason": lambda s: s.get("attempt", {}).get("reason", ""),
    "exit_code": lambda s: s.get("attempt", {}).get("exit_code"),
    "live": lambda s: "pid" in s.get("attempt", {}),
}


def signal_number(name: str) -> int:
    name = name.upper().removeprefix("SIG")
    try:
        return int(getattr(signals, "SIG" + name))
    except AttributeError:
        raise AssertionError(f"unknown signal {name!r}") from None


def label(record: dict) -> str:
    return f"{record['type']}:{record['reason']}" if record.get("reason") else record["type"]


def matches(item: str, record: dict) -> bool:
    return item == record["type"] or item == label(record)


def is_subsequence(items: list[str], records: list[dict]) -> bool:
    position = 0
    for record in records:
        if position < len(items) and matches(items[position], record):
            position += 1
    return position == len(items)


def rendered(world: World, name: str) -> dict | None:
    try:
        session = world.session(name)
    except SessionNotFoundError:
        return None
    return render_session(session, world.runtime.journal.cursor(session))


async def check(world: World, name: str, step: dict) -> list[str]:
    problems: list[str] = []
    view = rendered(world, name)
    if "gone" in step:
        if step["gone"] != (view is None):
            problems.append(f"gone: expected {step['gone']}, got {view is None}")
        if view is None:
            return problems
    if view is None:
        return [f"session {name!r} does not exist (deleted?)"]
    for key, read in FIELDS.items():
        value = read(view)
        value = str(value) if isinstance(value, str) else value  # a StrEnum reads as its value
        if key in step and value != step[key]:
            problems.append(f"{key}: expected {step[key]!r}, got {value!r}")
    if "in_flight" in step and len(world.unfinished_calls()) != step["in_flight"]:
        problems.append(f"in_flight: expected {step['in_flight']}, got {len(world.unfinished_calls())}")
    problems += await _check_journal(world, name, step)
    problems += _check_process(world, name, step)
    return problems


async def _check_journal(world: World, name: str, step: dict) -> list[str]:
    wanted = ("journal_contains", "journal_ends_with", "journal_lacks", "journal_count",
              "output_contains", "start_reason")
    if not any(key in step for key in wanted):
        return []
    journal = await world.journal(name)
    problems = []
    if "journal_contains" in step and not is_subsequence(step["journal_contains"], journal):
        problems.append(f"journal_contains: {step['journal_contains']} not found in this order")
    if "journal_ends_with" in step:
        items = step["journal_ends_with"]
        tail = journal[-len(items):] if items else []
        if len(tail) != len(items) or not all(matches(i, r) for i, r in zip(items, tail)):
            problems.append(f"journal_ends_with: expected {items}, got {[label(r) for r in tail]}")
    for item in step.get("journal_lacks", []):
        if any(matches(item, r) for r in journal):
            problems.append(f"journal_lacks: {item!r} is in the journal")
    for item, count in step.get("journal_count", {}).items():
        seen = sum(matches(item, r) for r in journal)
        if seen != count:
            problems.append(f"journal_count: {item!r} expected {count}, got {seen}")
    if "output_contains" in step:
        text = b"".join(base64.b64decode(r["data_base64"]) for r in journal if r["type"] == "output")
        if step["output_contains"].encode() not in text:
            problems.append(f"output_contains: {step['output_contains']!r} not in {text[-200:]!r}")
    if "start_reason" in step:
        starts = [r.get("reason", "") for r in journal if r["type"] == "attempt.starting"]
        if not starts or starts[-1] != step["start_reason"]:
            problems.append(f"start_reason: expected {step['start_reason']!r}, got {starts[-1:]}")
    return problems


def _check_process(world: World, name: str, step: dict) -> list[str]:
    problems = []
    if "processes_started" in step and len(world.runner.processes) != step["processes_started"]:
        problems.append(f"processes_started: expected {step['processes_started']}, "
                        f"got {len(world.runner.processes)}")
    if not {"stdin", "signals_received", "argv"} & step.keys():
        return problems
    process = world.latest_process(name)
    if process is None:
        return [*problems, "no process was ever started for this session"]
    if "argv" in step and process.argv != step["argv"]:
        problems.append(f"argv: expected {step['argv']}, got {process.argv}")
    if "stdin" in step and process.stdin.decode(errors="replace") != step["stdin"]:
        problems.append(f"stdin: expected {step['stdin']!r}, got {bytes(process.stdin)!r}")
    if "signals_received" in step:
        expected = [signal_number(s) for s in step["signals_received"]]
        if process.signals != expected:
            problems.append(f"signals_received: expected {step['signals_received']}, got {process.signals}")
    return problems


async def describe(world: World, name: str) -> str:
    """The session and its journal tail, so a failure reads as a bug report."""
    view = rendered(world, name)
    if view is None:
        return f"  (session {name!r} is gone)"
    attempt = view.get("attempt", {})
    lines = [f"  session: phase={view['phase']} attempt={attempt.get('number')} "
             f"reason={attempt.get('reason', '')!r} restart_count={view['restart_count']} "
             f"generation={view['runtime_generation']} desired={view['spec']['lifecycle']['desired_state']}",
             "  journal tail:"]
    for record in (await world.journal(name))[-15:]:
        lines.append(f"    #{record['seq']} {label(record)}")
    return "\n".join(lines)
