"""How both runners start children (``infra.spawn``): what the child gets, what it does not
inherit, and that nothing outlives a start that was cancelled or a handle that was waited on."""
from __future__ import annotations

import asyncio
import os

import pytest

from session_supervisor.domain.ports import ExitStatus, Launch, TerminalSize
from session_supervisor.infra.pipe_runner import PipeRunner
from session_supervisor.infra import spawn
from session_supervisor.infra.pty_runner import PtyRunner
from tests.infra.processes import children
from tests.infra.conftest import Capture, base_env, process_state, running, wait_until

TERMINAL = TerminalSize(rows=24, cols=80)
RUNNERS = {"pipe": (PipeRunner, None, "stdout"), "pty": (PtyRunner, TERMINAL, "pty")}


@pytest.mark.parametrize("kind", sorted(RUNNERS))
def test_the_child_inherits_no_descriptor_beyond_its_stdio(run, kind):
    runner, terminal, stream = RUNNERS[kind]
    leaked_r, leaked_w = os.pipe()
    os.set_inheritable(leaked_r, True)  # what uvloop's fork passed on to every child

    async def body():
        out = Capture()
        launch = Launch(["sh", "-c", "ls /proc/$$/fd"], "/", base_env(), terminal)
        async with running(runner(), launch, out) as handle:
            await handle.wait_exited()
        return sorted(int(n) for n in out.text(stream).split())

    try:
        listed = run(body)
        assert listed[:3] == [0, 1, 2] and set(listed) <= {0, 1, 2, 3}  # 3: ls's own directory
    finally:
        os.close(leaked_r)
        os.close(leaked_w)


@pytest.mark.parametrize("kind", sorted(RUNNERS))
def test_an_exited_child_stays_unreaped_until_wait_exited_so_its_pid_is_not_reused(run, kind):
    runner, terminal, _ = RUNNERS[kind]

    async def body():
        async with running(runner(), Launch(["true"], "/", base_env(), terminal), Capture()) as handle:
            await wait_until(lambda: process_state(handle.pid) == "Z")
            status = await handle.wait_exited()
            return status, process_state(handle.pid)

    assert run(body) == (ExitStatus(exit_code=0), None)


@pytest.mark.parametrize("turns", [0, 1, 2, 5])
@pytest.mark.parametrize("kind", sorted(RUNNERS))
def test_a_start_cancelled_midway_leaves_no_process_behind(run, kind, turns):
    runner, terminal, _ = RUNNERS[kind]

    async def body():
        others = set(children())  # the test session's own servers, say
        start = asyncio.ensure_future(
            runner().start(Launch(["sleep", "60"], "/", base_env(), terminal), Capture()))
        for _ in range(turns):
            await asyncio.sleep(0)
        start.cancel()
        try:
            handle = await start
        except asyncio.CancelledError:
            pass
        else:  # it finished before the cancel landed: an ordinary handle to end
            handle.send_signal(9)
            await handle.wait_exited()
        await spawn.idle()  # a start still queued when cancelled has run (and been undone)
        try:
            await wait_until(lambda: set(children()) <= others)
        except TimeoutError:
            raise AssertionError(f"left behind: {[_describe(pid) for pid in set(children()) - others]}") from None

    run(body)


def _describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat, open(f"/proc/{pid}/cmdline") as cmdline:
            return f"{stat.read()[:40]} {cmdline.read()!r}"
    except OSError:
        return f"{pid} (gone)"


def test_a_terminal_program_leads_its_session_and_is_the_terminals_foreground(run):
    async def body():
        out = Capture()
        script = 'tty; ps -o pid=,sid=,pgid=,tpgid= -p $$'
        async with running(PtyRunner(), Launch(["sh", "-c", script], "/", base_env(), TERMINAL), out) as handle:
            await handle.wait_exited()
            return handle.pid, out.text("pty").split()

    pid, words = run(body)
    assert words[0].startswith("/dev/pts/")
    assert words[1:] == [str(pid)] * 4


def test_without_setsid_on_path_a_terminal_program_still_leads_its_session(run, monkeypatch):
    from session_supervisor.infra import pty_runner

    monkeypatch.setattr(pty_runner, "_SETSID", None)  # the preexec_fn fallback (a fork) starts it

    async def body():
        out = Capture()
        script = 'tty; ps -o pid=,sid=,pgid=,tpgid= -p $$'
        async with running(PtyRunner(), Launch(["sh", "-c", script], "/", base_env(), TERMINAL), out) as handle:
            await handle.wait_exited()
            return handle.pid, out.text("pty").split()

    pid, words = run(body)
    assert words[0].startswith("/dev/pts/")
    assert words[1:] == [str(pid)] * 4


def test_a_terminal_program_gets_its_argv_as_given(run, tmp_path):
    async def body():
        out = Capture()
        launch = Launch(["sh", "-c", 'tr "\\0" " " < /proc/$$/cmdline', "name"], "/", base_env(), TERMINAL)
        async with running(PtyRunner(), launch, out) as handle:
            await handle.wait_exited()
        return out.text("pty")

    assert run(body).startswith('sh -c tr "\\0" " " < /proc/$$/cmdline name')


def test_a_terminal_program_without_execute_permission_cannot_start(run, tmp_path):
    from session_supervisor.domain.ports import StartFailedError

    script = tmp_path / "script"
    script.write_text("#!/bin/sh\necho no\n")
    script.chmod(0o644)

    async def body():
        others = set(children())
        with pytest.raises(StartFailedError, match="Permission denied"):
            await PtyRunner().start(Launch([str(script)], "/", base_env(), TERMINAL), Capture())
        assert set(children()) <= others

    run(body)
