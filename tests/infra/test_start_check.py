"""The sandbox's start report (infra.start_check) through both runners, without bubblewrap:
a bash in front plays the launch chain's part (the report pipe moved to fd 9)."""
from __future__ import annotations

import pytest

from session_supervisor.domain.ports import ExitStatus, Launch, StartFailedError, TerminalSize
from session_supervisor.infra.pipe_runner import PipeRunner
from session_supervisor.infra.pty_runner import PtyRunner
from session_supervisor.infra.start_check import REPORT_FD, REPORT_FD_VAR, exec_argv
from tests.infra.conftest import Capture, base_env, running

CHAIN = f'exec {REPORT_FD}>&"${REPORT_FD_VAR}"; exec "$@"'  # what infra.launch_chain does first


def launch(argv: list[str], cwd: str = "/", *, chain: str = CHAIN, pty: bool = False, forgotten=None) -> Launch:
    return Launch(argv=["bash", "-c", chain, "chain", *exec_argv(cwd, argv)], cwd="/", env=base_env(),
                  terminal=TerminalSize(24, 80) if pty else None, start_report=True,
                  on_start_failed=(lambda: forgotten.append(True)) if forgotten is not None else None)


RUNNERS = {"pipes": (PipeRunner, False), "pty": (PtyRunner, True)}


@pytest.mark.parametrize("mode", sorted(RUNNERS))
@pytest.mark.parametrize("argv,cwd,message", [
    (["no-such-command-here"], "/", 'exec: "no-such-command-here": executable file not found in $PATH'),
    (["./not-here"], "/", 'exec: "./not-here": no such file or directory'),
    (["/etc"], "/", 'exec: "/etc": permission denied'),
    (["PLAIN"], "/", 'exec: "PLAIN": permission denied'),
    (["true"], "/no/such/dir", "chdir /no/such/dir: no such file or directory"),
    (["true"], "PLAIN", "chdir PLAIN: not a directory"),
])
def test_what_cannot_start_is_a_start_failed_error_naming_it_and_shows_no_output(run, mode, argv, cwd, message,
                                                                                   tmp_path):
    runner, pty = RUNNERS[mode]
    out, forgotten = Capture(), []
    plain = tmp_path / "plain.txt"  # a file without any execute bit
    plain.write_text("not a program\n")
    plain.chmod(0o644)
    argv = [str(plain) if a == "PLAIN" else a for a in argv]
    cwd = str(plain) if cwd == "PLAIN" else cwd
    message = message.replace("PLAIN", str(plain))

    async def body():
        with pytest.raises(StartFailedError) as failed:
            await runner().start(launch(argv, cwd, pty=pty, forgotten=forgotten), out)
        return str(failed.value)

    assert run(body) == message
    assert out.chunks == 0  # the check's own words on stderr are dropped with the failure
    assert forgotten == [True]  # what the runtime made for the launch is given back


@pytest.mark.parametrize("mode", sorted(RUNNERS))
def test_a_launcher_that_dies_before_the_check_is_a_failed_start_too(run, mode):
    runner, pty = RUNNERS[mode]

    async def body():
        with pytest.raises(StartFailedError, match="could not start the process"):
            await runner().start(launch(["true"], chain="echo launcher-noise >&2; exit 1", pty=pty), Capture())

    run(body)


@pytest.mark.parametrize("mode", sorted(RUNNERS))
def test_a_command_that_exists_runs_with_its_first_output_kept_in_order(run, mode):
    runner, pty = RUNNERS[mode]
    out = Capture()

    async def body():
        async with running(runner(), launch(["sh", "-c", "echo first; echo second; exit 5"], "/tmp", pty=pty), out) as h:
            await out.wait_for("pty" if pty else "stdout", b"second")
            return await h.wait_exited()

    assert run(body) == ExitStatus(exit_code=5)
    text = out.text("pty" if pty else "stdout").replace("\r\n", "\n")
    assert text == "first\nsecond\n"


def test_the_command_never_holds_the_report_pipe(run):
    out = Capture()

    async def body():
        async with running(PipeRunner(), launch(["sh", "-c", f"ls /proc/self/fd; [ -e /proc/self/fd/{REPORT_FD} ] && echo HELD"]),
                           out) as h:
            await h.wait_exited()

    run(body)
    assert "HELD" not in out.text("stdout") and out.text("stdout").strip()
