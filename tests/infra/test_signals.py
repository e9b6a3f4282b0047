from __future__ import annotations

import asyncio
import signal

import pytest

from session_supervisor.domain.model.signals import parse_signal, signal_description, signal_short_name
from session_supervisor.domain.ports import ExitStatus, Launch, TerminalSize
from session_supervisor.infra.pipe_runner import PipeRunner
from session_supervisor.infra.pty_runner import PtyRunner
from tests.infra.conftest import Capture, base_env, process_state, running, wait_until

RUNNERS = {
    "pipes": (PipeRunner, None, "stdout"),
    "pty": (PtyRunner, TerminalSize(24, 80), "pty"),
}


@pytest.fixture(params=sorted(RUNNERS))
def runner(request):
    """(runner, launch factory, output stream name) for pipes and for a pty."""
    cls, terminal, stream = RUNNERS[request.param]
    return cls(), lambda script: Launch(["sh", "-c", script], "/", base_env(), terminal), stream


def test_a_sigterm_to_the_group_ends_a_process_that_handles_it_with_its_own_exit_code(run, runner):
    runner_, launch, stream = runner

    async def body():
        out = Capture()
        async with running(runner_, launch('trap "exit 3" TERM; sleep 60 & echo ready; wait'), out) as handle:
            await out.wait_for(stream, b"ready")
            handle.send_signal(signal.SIGTERM)
            return await asyncio.wait_for(handle.wait_exited(), 10)

    assert run(body) == ExitStatus(exit_code=3)


def test_a_process_that_ignores_sigterm_is_reported_killed_by_the_sigkill_that_ends_it(run, runner):
    runner_, launch, stream = runner

    async def body():
        out = Capture()
        async with running(runner_, launch('trap "" TERM; echo ready; sleep 60'), out) as handle:
            await out.wait_for(stream, b"ready")
            handle.send_signal(signal.SIGTERM)
            exited = asyncio.ensure_future(handle.wait_exited())
            done, _ = await asyncio.wait({exited}, timeout=0.3)
            assert not done  # TERM is ignored: it takes the KILL
            handle.send_signal(signal.SIGKILL)
            return await asyncio.wait_for(exited, 10)

    assert run(body) == ExitStatus(exit_code=-1, signal=signal.SIGKILL)


def test_sigstop_stops_the_whole_group_and_sigcont_resumes_it(run, runner):
    runner_, launch, stream = runner

    async def body():
        out = Capture()
        async with running(runner_, launch("sleep 60 & echo $!; wait"), out) as handle:
            await out.wait_for(stream, b"\n")
            grandchild = int(out.text(stream).split()[0])
            handle.send_signal(signal.SIGSTOP)
            await wait_until(lambda: process_state(handle.pid) == process_state(grandchild) == "T")
            handle.send_signal(signal.SIGCONT)
            await wait_until(lambda: process_state(handle.pid) != "T" and process_state(grandchild) != "T")

    run(body)


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("TERM", 15), ("term", 15), ("SIGTERM", 15), ("sigterm", 15), ("  SigTerm\n", 15),
        ("HUP", 1), ("INT", 2), ("QUIT", 3), ("KILL", 9), ("USR1", 10), ("USR2", 12),
        ("STOP", 19), ("CONT", 18), ("WINCH", 28),
        ("1", 1), ("15", 15), ("64", 64), (" 9 ", 9), ("SIG9", 9),
    ],
)
def test_parse_signal_accepts_contract_names_and_numbers(text, number):
    assert parse_signal(text) == number


@pytest.mark.parametrize(
    "text",
    ["", "   ", "SIG", "0", "65", "-1", "+15", "1.5", "SEGV", "PIPE", "SIGSIGTERM", "TERM9", "１５", "SIG TERM"],
)
def test_parse_signal_rejects_everything_else_as_unsupported(text):
    with pytest.raises(ValueError, match="^unsupported signal$"):
        parse_signal(text)


def test_signal_short_names_and_go_descriptions():
    assert [signal_short_name(n) for n in (15, 9, 1, 11, 40)] == ["TERM", "KILL", "HUP", "SEGV", "40"]
    assert signal_description(15) == "terminated"
    assert signal_description(2) == "interrupt"
    assert signal_description(9) == "killed"
    assert signal_description(1) == "hangup"
    assert signal_description(10) == "user defined signal 1"
    assert signal_description(19) == "stopped (signal)"
    assert signal_description(18) == "continued"
    assert signal_description(28) == "window changed"
    assert signal_description(40) == "signal 40"


@pytest.fixture
def ignoring_like_nohup():
    """This process ignores HUP, QUIT and INT, as one started under ``nohup`` in the background
    does; the runners must still start children with every signal at its default."""
    from session_supervisor.infra import spawn
    saved = {s: signal.getsignal(s) for s in (signal.SIGHUP, signal.SIGQUIT, signal.SIGINT)}
    for signum in saved:
        signal.signal(signum, signal.SIG_IGN)
    spawn._dispositions_reset = False
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_children_start_with_no_ignored_and_no_blocked_signal_whatever_the_server_inherited(
        run, runner, ignoring_like_nohup):
    runner_, launch, stream = runner

    async def body():
        out = Capture()
        async with running(runner_, launch("grep -E '^Sig(Ign|Blk)' /proc/self/status"), out) as handle:
            await asyncio.wait_for(handle.wait_exited(), 10)
        return out.text(stream)

    status = dict(line.split(":\t") for line in run(body).replace("\r", "").splitlines() if ":\t" in line)
    assert int(status["SigIgn"], 16) == 0 and int(status["SigBlk"], 16) == 0, status


def test_a_pty_shell_dies_of_its_hang_up_under_nohup(run, ignoring_like_nohup):
    async def body():
        out = Capture()
        launch = Launch(["sh", "-c", "echo ready; sleep 60"], "/", base_env(), TerminalSize(24, 80))
        async with running(PtyRunner(), launch, out) as handle:
            await out.wait_for("pty", b"ready")
            await handle.close_input()  # the terminal hangs up
            return await asyncio.wait_for(handle.wait_exited(), 10)

    assert run(body) == ExitStatus(exit_code=-1, signal=signal.SIGHUP)
