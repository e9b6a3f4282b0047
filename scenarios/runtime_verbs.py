"""Verbs for pause, resume and crash stories (registered into ``verbs.VERBS`` on import).

- ``pause`` / ``resume``: the real pause hook and resume path (``SandboxManager.pause/resume``).
- ``replace_runtime``: the sandbox's runtime is lost while the server stays up: its processes
  end unrecorded, every in-memory object is dropped, only the state dir is kept; the sandbox
  is then brought up as a server start would (paused stays paused, running comes back as
  the next generation).
- ``crash``: the server dies without the hook (nothing staged is committed, processes are
  left behind) and starts again over the same data dir.
- ``restart_server``: a clean shutdown (SIGTERM: every running sandbox goes through the
  pause hook) and a start.
- ``access``: a session call reaches the sandbox through the API's runtime gate.
- ``configure_sandbox``: PUT /sandboxes/{id} with a config (ttl, hard_ttl, auto_resume).
- ``audit``: the full attempt history of a session equals a list.
- ``expect_sandbox``: the sandbox as GET shows it, and whether released processes are gone.
"""
from __future__ import annotations

import asyncio
import time

from session_supervisor.domain.model.errors import NotFoundError
from session_supervisor.domain.sandbox_registry import Retirement

from .verbs import _call, verb
from .world import CALL_TIMEOUT_S, World

SANDBOX_CALL = {"error": str}


async def _completed(world: World, step: dict, label: str, coro) -> list[str]:
    """Run a sandbox lifecycle call to its end: it waits on the writer thread and on process
    exits, never on the fake clock, so settling alone could report it still in progress."""
    task = asyncio.ensure_future(coro)
    await asyncio.wait({task}, timeout=CALL_TIMEOUT_S)

    async def result():
        return await task
    return await _call(world, step, label, result())


def _remember_live_pids(world: World) -> list[int]:
    """The pids of the runtime about to be released, for ``expect_sandbox old_processes_gone``."""
    runtime = world.manager.registry.running.get(world.sandbox_id)
    if runtime is None:
        return []
    pids = [s.attempt["pid"] for s in runtime.store.sessions.values()
            if s.attempt and "pid" in s.attempt and "finished_ns" not in s.attempt]
    world.retired.extend(pids)
    return pids


def _sandbox_line(world: World) -> str:
    try:
        sandbox = world.manager.registry.sandbox(world.sandbox_id)
    except NotFoundError:
        return "sandbox is gone"
    return f"sandbox is {sandbox.status}, generation {sandbox.runtime_generation}"


@verb("pause", optional=SANDBOX_CALL)
async def pause(world: World, step: dict) -> list[str]:
    """POST /pause: barrier, freeze, commit, snapshots, sealed store, manifest, runtime released."""
    pids = _remember_live_pids(world)
    lines = await _completed(world, step, "pause", world.manager.transitions.pause(world.sandbox_id))
    return [*lines, f"  {_sandbox_line(world)}; released processes {pids}"]


@verb("resume", optional=SANDBOX_CALL)
async def resume(world: World, step: dict) -> list[str]:
    """POST /resume: verify the manifest, reopen the store, generation + 1, recovery (§6.6)."""
    lines = await _completed(world, step, "resume", world.manager.transitions.resume(world.sandbox_id))
    return [*lines, f"  {_sandbox_line(world)}"]


@verb("replace_runtime")
async def replace_runtime(world: World, step: dict) -> list[str]:
    """The runtime is lost under a live server: processes gone, memory dropped, state dir kept."""
    manager, sandbox_id = world.manager, world.sandbox_id
    pids = _remember_live_pids(world)
    async with manager.registry.gate(sandbox_id).lock:
        if sandbox_id in manager.registry.running:
            # Ended as on a lost lease: processes killed without recording their exits, and what
            # was staged and not committed is lost with the store closed.
            await manager.registry.retire(sandbox_id, Retirement.HANDED_OVER)
        manager.registry.forget_stale(sandbox_id)
        await manager.transitions.bring_up(sandbox_id)
    await world.settle()
    return [f"runtime replaced (processes {pids} ended unrecorded)", f"  {_sandbox_line(world)}"]


@verb("crash")
async def crash(world: World, step: dict) -> list[str]:
    """The server dies without the pause hook (kill -9), then starts over the same data dir."""
    return await _restart(world, False, "server killed without the hook (processes {pids} left behind), "
                                        "started again")


@verb("restart_server")
async def restart_server(world: World, step: dict) -> list[str]:
    """SIGTERM (every running sandbox goes through the pause hook), then a start."""
    return await _restart(world, True, "server stopped cleanly (processes {pids} released) and started again")


async def _restart(world: World, clean: bool, story: str) -> list[str]:
    pids = _remember_live_pids(world)
    await world.drop(clean=clean)
    await world.rebuild()
    await world.settle()
    return [story.format(pids=pids), f"  {_sandbox_line(world)}"]


@verb("access", optional={"mutating": bool, **SANDBOX_CALL})
async def access(world: World, step: dict) -> list[str]:
    """A session call arrives (a read, or a write with ``mutating``): auto_resume or 503."""
    mutating = step.get("mutating", False)

    async def admitted():
        ticket = await world.manager.transitions.admit(world.sandbox_id, mutating=mutating, streaming=False)
        if ticket is not None:
            ticket.release()
    lines = await _completed(world, step, f"a {'mutating' if mutating else 'read'} session call",
                             admitted())
    return [*lines, f"  {_sandbox_line(world)}"]


@verb("configure_sandbox", required={"config": dict}, optional=SANDBOX_CALL)
async def configure_sandbox(world: World, step: dict) -> list[str]:
    """PUT /sandboxes/{id}: merge ``config`` (ttl, hard_ttl, auto_resume) into the sandbox's."""
    return await _completed(world, step, f"configure sandbox {step['config']}",
                            world.manager.transitions.update(world.sandbox_id, step["config"]))


def _attempt_line(attempt: dict) -> str:
    end = attempt.get("reason") or ("live" if "finished_ns" not in attempt else "ended")
    return f"{attempt['number']} g{attempt['runtime_generation']} {attempt.get('start_reason', '')} -> {end}"


@verb("audit", required={"attempts": list}, optional={"session": str})
async def audit(world: World, step: dict) -> list[str]:
    """Every attempt ever, as ``"<number> g<generation> <start reason> -> <end reason|live>"``."""
    name = step.get("session", "main")
    await world.settle()
    history = [_attempt_line(a) for a in world.runtime.journal.attempts(world.session_id(name))]
    if history != step["attempts"]:
        raise AssertionError(f"audit {name}: expected {step['attempts']}\n  got {history}")
    return [f"audit {name}: {len(history)} attempts ✓", *(f"  {line}" for line in history)]


def _process_gone(world: World, pid: int) -> bool:
    if world.is_fake:
        return not world.runner.by_pid(pid).alive
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:].split()[0] in (b"Z", b"X")


def _released_pids(world: World) -> list[int]:
    """Every process the story has seen, except those of attempts live right now."""
    known = set(world.retired) | set(world._pids.values())
    if world.is_fake:
        known |= {process.pid for process in world.runner.processes}
    runtime = world.manager.registry.running.get(world.sandbox_id)
    live = set() if runtime is None else {
        s.attempt["pid"] for s in runtime.store.sessions.values()
        if s.attempt and "pid" in s.attempt and "finished_ns" not in s.attempt}
    return sorted(known - live)


def _sandbox_problems(world: World, step: dict) -> list[str]:
    try:
        sandbox = world.manager.registry.sandbox(world.sandbox_id)
    except NotFoundError:
        sandbox = None
    problems = []
    if "gone" in step and step["gone"] != (sandbox is None):
        problems.append(f"gone: expected {step['gone']}, got {sandbox is None}")
    if sandbox is not None:
        for key, actual in (("status", sandbox.status), ("generation", sandbox.runtime_generation),
                            ("auto_resume", sandbox.auto_resume)):
            if key in step and step[key] != actual:
                problems.append(f"{key}: expected {step[key]!r}, got {actual!r}")
    if "old_processes_gone" in step:
        alive = [pid for pid in _released_pids(world) if not _process_gone(world, pid)]
        if step["old_processes_gone"] != (not alive):
            problems.append(f"old_processes_gone: expected {step['old_processes_gone']}, alive {alive}")
    if "reaped" in step and step["reaped"] != len(world.reaped):
        problems.append(f"reaped: expected {step['reaped']}, got {world.reaped}")
    return problems


@verb("expect_sandbox", optional={"status": str, "generation": int, "auto_resume": bool, "gone": bool,
                                  "old_processes_gone": bool, "reaped": int, "within": (int, float)},
      fake_keys=("reaped",))
async def expect_sandbox(world: World, step: dict) -> list[str]:
    """Check the sandbox as GET shows it, and that processes of released runtimes are gone."""
    deadline = time.monotonic() + step.get("within", 0 if world.is_fake else 10)
    while True:
        await world.settle()
        problems = _sandbox_problems(world, step)
        if not problems or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.05)
    if problems:
        raise AssertionError("expect_sandbox:\n  " + "\n  ".join(problems))
    shown = [f"{k}={v}" for k, v in step.items() if k not in ("do", "within", "note")]
    return [f"expect sandbox: {' '.join(shown)} ✓"]

