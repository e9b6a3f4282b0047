from __future__ import annotations

import asyncio
import signal

import pytest

from session_supervisor.domain.model.signals import parse_signal, signal_description, signal_short_name
from session_supervisor.domain.ports import ExitStatus, Launch, TerminalSize
from session_supervisor.infra.pipe_runner import PipeRunner
from session_supervisor.infra.pty_runner import PtyRunner
from session_supervisor.infra.signals import freeze, stop_gracefully, thaw
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


def test_stop_gracefully_sigkills_a_process_that_ignores_sigterm(run, runner):
    runner_, launch, stream = runner

    async def body():
        out = Capture()
        loop = asyncio.get_running_loop()
        async with running(runner_, launch('trap "" TERM; echo ready; sleep 60'), out) as handle:
            await out.wait_for(stream, b"ready")
            started = loop.time()
            status = await stop_gracefully(handle, grace_s=0.3)
            return status, loop.time() - started

    status, took_s = run(body)
    assert status == ExitStatus(exit_code=-1, signal=signal.SIGKILL)
    assert 0.3 <= took_s < 5


def test_stop_gracefully_returns_the_exit_of_a_process_that_handles_sigterm(run, runner):
    runner_, launch, stream = runner

    async def body():
        out = Capture()
        async with running(runner_, launch('trap "exit 3" TERM; sleep 60 & echo ready; wait'), out) as handle:
            await out.wait_for(stream, b"ready")
            return await stop_gracefully(handle, grace_s=10)

    assert run(body) == ExitStatus(exit_code=3)


def test_stop_gracefully_stops_a_frozen_process_without_waiting_for_the_grace(run):
    async def body():
        out = Capture()
        loop = asyncio.get_running_loop()
        async with running(PipeRunner(), Launch(["sh", "-c", "echo ready; exec sleep 60"], "/", base_env()), out) as handle:
            await out.wait_for("stdout", b"ready")
            freeze(handle)
            await wait_until(lambda: process_state(handle.pid) == "T")
            started = loop.time()
            status = await stop_gracefully(handle, grace_s=10)
            return status, loop.time() - started

    status, took_s = run(body)
    assert status == ExitStatus(exit_code=-1, signal=signal.SIGTERM)
    assert took_s < 5


class _Unkillable:
    """A handle whose process never dies: only the timeout can end the wait."""

    pid = 0
    start_time = 0

    def __init__(self) -> None:
        self.sent: list[int] = []

    def send_signal(self, signum: int) -> None:
        self.sent.append(signum)

    async def wait_exited(self) -> ExitStatus:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_stop_gracefully_raises_timeout_when_sigkill_does_not_end_the_process(run):
    handle = _Unkillable()

    async def body():
        with pytest.raises(TimeoutError, match="after SIGKILL"):
            await stop_gracefully(handle, grace_s=0.05, kill_wait_s=0.05)

    run(body)
    assert handle.sent == [signal.SIGTERM, signal.SIGCONT, signal.SIGKILL]


def test_freeze_stops_the_whole_group_and_thaw_resumes_it(run, runner):
    runner_, launch, stream = runner

    async def body():
        out = Capture()
        async with running(runner_, launch("sleep 60 & echo $!; wait"), out) as handle:
            await out.wait_for(stream, b"\n")
            grandchild = int(out.text(stream).split()[0])
            freeze(handle)
            await wait_until(lambda: process_state(handle.pid) == process_state(grandchild) == "T")
            thaw(handle)
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
