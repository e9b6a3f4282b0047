"""Load, validate and run scenario files (TOML, read with ``tomllib``).

A file is ``title``, ``why``, ``runner`` ("fake" by default, or "real"), a ``[session]``
table (the spec ``create`` sends) and ``[[step]]`` tables, each ``do = "<verb>"`` plus the
verb's keys. ``validate`` rejects unknown verbs, unknown or missing keys, wrong types and
verbs the runner mode cannot do, all before the first step runs.
"""
from __future__ import annotations

import asyncio
import base64
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from session_supervisor.domain.model.errors import NotFoundError, UnavailableError

from .expectations import label
from .verbs import VERBS
from .world import World, outcome

TOP_LEVEL = {"title": str, "why": str, "runner": str, "session": dict, "step": list}
REQUIRED = ("title", "why", "step")
RUNNERS = ("fake", "real")
SCENARIO_TIMEOUT_S = 120.0

Emit = Callable[[str], None]


class ScenarioError(ValueError):
    """The file is not a valid scenario; nothing was run."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        super().__init__(f"{path}: invalid scenario\n  " + "\n  ".join(problems))
        self.problems = problems


class ScenarioFailed(AssertionError):
    """A step's expectation did not hold (the transcript so far was emitted)."""


@dataclass(frozen=True)
class Scenario:
    path: Path
    title: str
    why: str
    runner: str
    session: dict
    steps: list[dict]


def load(path: Path | str) -> Scenario:
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(path, [f"not valid TOML: {exc}"]) from None
    problems = validate(doc)
    if problems:
        raise ScenarioError(path, problems)
    return Scenario(path, doc["title"], doc["why"], doc.get("runner", "fake"),
                    doc.get("session", {}), doc["step"])


def _type_ok(value, spec) -> bool:
    types = spec if isinstance(spec, tuple) else (spec,)
    if isinstance(value, bool) and bool not in types:
        return False  # TOML true is not an integer here
    return isinstance(value, types)


def _type_name(spec) -> str:
    types = spec if isinstance(spec, tuple) else (spec,)
    return " or ".join(t.__name__ for t in types)


def validate(doc: dict) -> list[str]:
    problems = [f"unknown top-level key {k!r}" for k in doc if k not in TOP_LEVEL]
    problems += [f"missing {k!r}" for k in REQUIRED if k not in doc]
    problems += [f"{k!r} must be a {_type_name(TOP_LEVEL[k])}" for k in doc
                 if k in TOP_LEVEL and not _type_ok(doc[k], TOP_LEVEL[k])]
    mode = doc.get("runner", "fake")
    if mode not in RUNNERS:
        problems.append(f"runner must be one of {RUNNERS}, not {mode!r}")
    steps = doc.get("step", [])
    if isinstance(steps, list) and not steps:
        problems.append("a scenario needs at least one [[step]]")
    created: set[str] = set()
    for number, step in enumerate(steps if isinstance(steps, list) else [], 1):
        problems += [f"step {number}: {p}" for p in _validate_step(step, mode, created)]
    return problems


def _validate_step(step, mode: str, created: set[str]) -> list[str]:
    if not isinstance(step, dict) or not isinstance(step.get("do"), str):
        return ["each step needs do = \"<verb>\""]
    verb = VERBS.get(step["do"])
    if verb is None:
        return [f"unknown verb {step['do']!r} (known: {', '.join(sorted(VERBS))})"]
    problems = [f"{verb.name}: unknown key {k!r} (allowed: {', '.join(sorted(verb.keys))})"
                for k in step if k not in verb.keys]
    problems += [f"{verb.name}: missing {k!r}" for k in verb.required if k not in step]
    problems += [f"{verb.name}: {k!r} must be a {_type_name(verb.keys[k])}" for k in step
                 if k in verb.keys and not _type_ok(step[k], verb.keys[k])]
    if mode not in verb.modes:
        problems.append(f"{verb.name} needs runner = {' or '.join(repr(m) for m in verb.modes)}")
    if mode != "fake":
        problems += [f"{verb.name}: {k!r} needs runner = 'fake'" for k in step if k in verb.fake_keys]
    if "session" in verb.keys:
        name = step.get("session", "main")
        if verb.name == "create":
            created.add(name)
        elif name not in created:
            problems.append(f"{verb.name}: session {name!r} is used before it is created")
    return problems


# ---- running ----------------------------------------------------------------------------------
async def run(scenario: Scenario, data_dir: Path, emit: Emit = print) -> None:
    emit(f"== {scenario.path.name}: {scenario.title}")
    emit(f"   why: {' '.join(scenario.why.split())}")
    emit(f"   runner: {scenario.runner}")
    world = await World.open(data_dir, scenario.runner, scenario.session)
    try:
        for number, step in enumerate(scenario.steps, 1):
            if "note" in step:
                emit(f"     # {step['note']}")
            try:
                lines = await VERBS[step["do"]].run(world, step)
                finished = world.finished_calls()
            except AssertionError as exc:
                emit(f"{number:>3}. {step['do']} FAILED")
                raise ScenarioFailed(f"{scenario.path.name} step {number} ({step['do']}): {exc}") from None
            events = [f"       {line}" for line in await journal_lines(world)]
            if step["do"] == "expect":  # what happened leads up to the check
                for line in events:
                    emit(line)
                events = []
            stamp = f"[{world.elapsed}] " if world.elapsed else ""
            emit(f"{number:>3}. {stamp}{lines[0]}")
            for line in lines[1:]:
                emit(f"       {line}")
            for call in finished:
                emit(f"       -> {call.label}: {outcome(call)}")
            for line in events:
                emit(line)
        unfinished = world.unfinished_calls()
        if unfinished:
            raise ScenarioFailed(f"{scenario.path.name}: still in progress at the end: "
                                 f"{', '.join(c.label for c in unfinished)}")
    finally:
        await world.close()


async def journal_lines(world: World) -> list[str]:
    """The journal events committed since the previous step, for every session of the story."""
    if world.container is None:
        return []
    lines = []
    for name, session_id in world.names.items():
        try:
            records = await world.journal(name, world.seen.get(session_id, 0))
        except (NotFoundError, UnavailableError):  # deleted, or its sandbox is paused: shown later
            continue
        for record in records:
            world.seen[session_id] = record["seq"]
            lines.append(f"{name} #{record['seq']} {describe_record(record)}")
    return lines


def describe_record(record: dict) -> str:
    text = label(record)
    if record["type"] == "output":
        data = base64.b64decode(record["data_base64"])
        text += f" {record['stream']} {data[:60]!r}"
    if "exit_code" in record:
        text += f" exit_code={record['exit_code']}"
    if "signal" in record:
        text += f" signal={record['signal']}"
    return text


def run_file(path: Path | str, data_dir: Path | None = None, emit: Emit = print) -> None:
    """Validate then run one file in a fresh event loop (and a temporary data dir if none)."""
    scenario = load(path)

    async def bounded(directory: Path) -> None:
        async with asyncio.timeout(SCENARIO_TIMEOUT_S):
            await run(scenario, directory, emit)

    if data_dir is not None:
        asyncio.run(bounded(data_dir))
        return
    with tempfile.TemporaryDirectory(prefix="scenario-") as tmp:
        asyncio.run(bounded(Path(tmp)))
