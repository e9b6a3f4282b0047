"""The scenario vocabulary: each verb is a small async function registered with ``@verb``.

A verb receives the World and its step (a dict, already validated against the keys it
declared) and returns transcript lines. Lifecycle verbs call the SandboxRuntime methods
the API routes call; ``exit``/``output``/... tell a scripted process what to do;
``expect`` reads the session as GET does and the public journal as the events page does.

To add a verb (pause, resume, crash, ...): write ``async def`` here, decorate it with
``@verb(name, required=..., optional=..., modes=...)`` and give it a one-line docstring;
the runner validates steps against the declared keys before any step runs.
"""
from __future__ import annotations

import asyncio
import base64
import copy
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from session_supervisor.api import commands

from .expectations import check, describe, signal_number
from .world import World, check_outcome, outcome

KeySpec = dict[str, type | tuple[type, ...]]
COMMON: KeySpec = {"do": str, "note": str}  # ``note``: a comment printed in the transcript
ANY_MODE = ("fake", "real")
FAKE = ("fake",)


@dataclass(frozen=True)
class Verb:
    name: str
    run: Callable[[World, dict], Awaitable[list[str]]]
    required: KeySpec
    optional: KeySpec
    modes: tuple[str, ...]
    summary: str = ""
    keys: KeySpec = field(default_factory=dict)
    fake_keys: frozenset[str] = frozenset()  # keys that only make sense with the scripted runner


VERBS: dict[str, Verb] = {}


def verb(name: str, *, required: KeySpec | None = None, optional: KeySpec | None = None,
         modes: tuple[str, ...] = ANY_MODE, fake_keys: tuple[str, ...] = ()):
    def register(fn):
        req, opt = dict(required or {}), dict(optional or {})
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        VERBS[name] = Verb(name, fn, req, opt, modes, summary, {**COMMON, **req, **opt},
                           frozenset(fake_keys))
        return fn
    return register


SESSION: KeySpec = {"session": str}
CALL: KeySpec = {"session": str, "error": str}  # error: the domain error class the call must raise


def deep_merge(base: dict, changes: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


async def _call(world: World, step: dict, label: str, coro) -> list[str]:
    call = await world.call(label, coro, step.get("error", ""))
    if not call.task.done():
        return [f"{label}: in progress (waiting on the clock)"]
    call.reported = True
    check_outcome(call)
    return [f"{label}: {outcome(call)}"]


# ---- lifecycle calls (what the API routes call) ------------------------------------------------
@verb("create", optional={**CALL, "spec": dict, "key": str})
async def create(world: World, step: dict) -> list[str]:
    """POST /sessions: the story's [session] spec, with ``spec`` merged over it."""
    name = step.get("session", "main")
    spec = deep_merge(world.base_spec, step.get("spec", {}))

    async def run():
        session, created = await commands.create_session(world.runtime, spec, step.get("key", ""))
        world.names[name] = session.id
        return created
    lines = await _call(world, step, f"create {name}", run())
    if name in world.names:
        lines.append(f"  {name} is {world.names[name]}")
    return lines


@verb("set_desired", required={"state": str}, optional=CALL)
async def set_desired(world: World, step: dict) -> list[str]:
    """PUT /desired-state with ``state`` running or stopped."""
    name = step.get("session", "main")
    coro = commands.set_desired_state(world.runtime, world.session_id(name), {"state": step["state"]})
    return await _call(world, step, f"set_desired {name} {step['state']}", coro)


@verb("replace_attempt", optional={**CALL, "replace": bool})
async def replace_attempt(world: World, step: dict) -> list[str]:
    """POST /attempts with replace_current = ``replace`` (default true)."""
    name = step.get("session", "main")
    replace = step.get("replace", True)
    coro = commands.create_attempt(world.runtime, world.session_id(name), {"replace_current": replace})
    return await _call(world, step, f"new attempt for {name} (replace_current={replace})", coro)


@verb("update_spec", required={"spec": dict}, optional=CALL)
async def update_spec(world: World, step: dict) -> list[str]:
    """PUT /sessions/{id}: a full spec, written as changes merged over the story's [session]."""
    name = step.get("session", "main")
    spec = deep_merge(world.base_spec, step["spec"])
    coro = commands.update_session(world.runtime, world.session_id(name), spec)
    return await _call(world, step, f"update_spec {name} {step['spec']}", coro)


@verb("delete", optional=CALL)
async def delete(world: World, step: dict) -> list[str]:
    """DELETE /sessions/{id}."""
    name = step.get("session", "main")
    return await _call(world, step, f"delete {name}", commands.delete_session(world.runtime, world.session_id(name)))


@verb("input", required={"data": str}, optional={**CALL, "eof": bool, "input_id": str})
async def send_input(world: World, step: dict) -> list[str]:
    """POST /inputs with ``data`` (text) and optional ``eof``."""
    name = step.get("session", "main")
    body = {"input_id": step.get("input_id") or f"in-{len(world.calls) + 1}",
            "data_base64": base64.b64encode(step["data"].encode()).decode(), "eof": step.get("eof", False)}
    return await _call(world, step, f"input {name} {step['data']!r}",
                       commands.write_input(world.runtime, world.session_id(name), body))


@verb("signal", required={"name": str}, optional=CALL)
async def send_signal(world: World, step: dict) -> list[str]:
    """POST /signals with ``name`` (TERM, INT, KILL, ...)."""
    name = step.get("session", "main")
    return await _call(world, step, f"signal {name} {step['name']}",
                       commands.send_signal(world.runtime, world.session_id(name), {"signal": step["name"]}))


# ---- what the scripted process does (fake runner) ----------------------------------------------
@verb("exit", optional={**SESSION, "code": int, "signal": str}, modes=FAKE)
async def exit_(world: World, step: dict) -> list[str]:
    """The live process exits with ``code`` (default 0), or dies by ``signal``."""
    name = step.get("session", "main")
    process = world.process(name)
    if "signal" in step:
        process.die(signal_number(step["signal"]))
        what = f"dies by SIG{step['signal'].upper().removeprefix('SIG')}"
    else:
        process.exit(step.get("code", 0))
        what = f"exits {step.get('code', 0)}"
    await world.settle()
    return [f"{name}'s process {process.pid} {what}"]


@verb("output", required={"data": str}, optional={**SESSION, "stream": str}, modes=FAKE)
async def output(world: World, step: dict) -> list[str]:
    """The live process writes ``data`` to ``stream`` (stdout by default) as one read."""
    name = step.get("session", "main")
    stream = step.get("stream", "stdout")
    world.process(name).emit(step["data"].encode(), stream)
    await world.settle()
    return [f"{name} writes {step['data']!r} to {stream}"]


@verb("ignore_signals", required={"signals": list}, optional=SESSION, modes=FAKE)
async def ignore_signals(world: World, step: dict) -> list[str]:
    """The live process ignores these signals (as ``trap '' TERM`` would)."""
    name = step.get("session", "main")
    world.process(name).ignore(*(signal_number(s) for s in step["signals"]))
    return [f"{name}'s process now ignores {', '.join(step['signals'])}"]


@verb("fail_starts", optional={"count": int}, modes=FAKE)
async def fail_starts(world: World, step: dict) -> list[str]:
    """The next ``count`` process starts fail (a bad argv or cwd)."""
    world.runner.fail_next(step.get("count", 1))
    return [f"the next {step.get('count', 1)} start(s) will fail"]


@verb("advance", optional={"ms": int, "seconds": (int, float)}, modes=FAKE)
async def advance(world: World, step: dict) -> list[str]:
    """Move the fake clock by ``ms`` or ``seconds``; timers fall due in order."""
    if ("ms" in step) == ("seconds" in step):
        raise AssertionError("advance takes exactly one of ms or seconds")
    seconds = step["ms"] / 1000 if "ms" in step else float(step["seconds"])
    await world.advance(seconds)
    return [f"advance {seconds:g}s"]


# ---- expectations -------------------------------------------------------------------------------
@verb("expect", optional={
    **SESSION, "within": (int, float), "phase": str, "attempt": int, "restart_count": int,
    "generation": int, "desired_state": str, "spec_version": int, "attempt_reason": str,
    "start_reason": str, "exit_code": int, "live": bool, "gone": bool, "in_flight": int,
    "journal_contains": list, "journal_ends_with": list, "journal_lacks": list,
    "journal_count": dict, "output_contains": str, "stdin": str, "signals_received": list,
    "argv": list, "processes_started": int},
    fake_keys=("stdin", "signals_received", "argv", "processes_started"))
async def expect(world: World, step: dict) -> list[str]:
    """Check the session (as GET shows it), its public journal, and what its process saw."""
    name = step.get("session", "main")
    deadline = time.monotonic() + step.get("within", 0 if world.is_fake else 10)
    while True:
        await world.settle()
        problems = await check(world, name, step)
        if not problems or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.05)
    if problems:
        raise AssertionError("\n".join([f"expect {name}:", *problems, await describe(world, name)]))
    shown = [f"{k}={_brief(v)}" for k, v in step.items() if k not in ("do", "session", "within", "note")]
    return [f"expect {name}: {' '.join(shown)} ✓"]


def _brief(value) -> str:
    if isinstance(value, list) and len(value) > 3:
        return f"[{value[0]!r} ... {value[-1]!r}] ({len(value)} items)"
    if isinstance(value, str) and value.isprintable():
        return value
    return str(value) if isinstance(value, (int, float)) else repr(value)


from . import runtime_verbs  # noqa: E402,F401  (pause, resume, crash, ...: registered on import)
