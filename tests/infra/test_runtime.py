from __future__ import annotations

import asyncio
import os
import signal

import pytest

from session_supervisor.domain.ports import ExitStatus, TerminalSize
from session_supervisor.infra.pipe_runner import PipeRunner
from session_supervisor.infra.pty_runner import PtyRunner
from session_supervisor.domain.model.env import build_env
from session_supervisor.infra.bubblewrap import (
    BubblewrapLauncher,
    HostLauncher,
    LauncherUnavailableError,
    detect_launcher,
)
from tests.infra.conftest import Capture, base_env, running


def _bwrap_or_skip() -> BubblewrapLauncher:
    try:
        runtime = detect_launcher("bwrap")
    except LauncherUnavailableError as exc:
        pytest.skip(str(exc))
    assert isinstance(runtime, BubblewrapLauncher)
    return runtime


@pytest.fixture
def bwrap() -> BubblewrapLauncher:
    return _bwrap_or_skip()


@pytest.fixture
def workspace(tmp_path):
    path = tmp_path / "workspace"
    path.mkdir()
    return path


# -- environment -------------------------------------------------------------


def test_env_precedence_is_daemon_then_sandbox_then_spec_then_term():
    env = build_env(
        base={"PATH": "/bin", "A": "daemon", "B": "daemon", "C": "daemon", "TERM": "dumb"},
        sandbox_env={"B": "sandbox", "C": "sandbox"},
        spec_env={"C": "spec", "TERM": "spec"},
        term="xterm-256color",
    )
    assert env == {"PATH": "/bin", "A": "daemon", "B": "sandbox", "C": "spec", "TERM": "xterm-256color"}


def test_spec_env_keys_are_trimmed_and_unusable_keys_dropped():
    env = build_env({}, {}, {"  KEY ": "v", "": "x", "   ": "x", "A=B": "x", "OK": "a=b"}, None)
    assert env == {"KEY": "v", "OK": "a=b"}


def test_term_is_left_alone_without_a_terminal():
    assert build_env({"TERM": "dumb"}, {}, {}, None) == {"TERM": "dumb"}


# -- host runtime ------------------------------------------------------------


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        ("", "{ws}"),
        ("/workspace", "{ws}"),
        ("/workspace/", "{ws}"),
        ("/workspace/sub/dir", "{ws}/sub/dir"),
        ("sub", "{ws}/sub"),
        ("/tmp", "/tmp"),
        ("/workspaces", "/workspaces"),
        ("/workspace/../etc", "/etc"),
    ],
)
def test_host_runtime_maps_workspace_paths_onto_the_workspace_dir(cwd, expected):
    launch = HostLauncher().launch("/srv/ws", ["true"], cwd, {"A": "1"}, None)
    assert launch.cwd == expected.format(ws="/srv/ws")
    assert launch.argv == ["true"]
    assert launch.env == {"A": "1"}
    assert launch.terminal is None


def test_host_runtime_reports_exits_unchanged():
    status = ExitStatus(exit_code=137)
    assert HostLauncher().translate_exit(status) is status


def test_an_unknown_runtime_name_is_refused():
    with pytest.raises(ValueError, match="unknown sandbox runtime"):
        detect_launcher("docker")


# -- bubblewrap --------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (ExitStatus(0), ExitStatus(0)),
        (ExitStatus(1), ExitStatus(1)),
        (ExitStatus(128), ExitStatus(128)),
        (ExitStatus(130), ExitStatus(-1, 2)),
        (ExitStatus(143), ExitStatus(-1, 15)),
        (ExitStatus(192), ExitStatus(-1, 64)),
        (ExitStatus(193), ExitStatus(193)),
        (ExitStatus(-1, 9), ExitStatus(-1, 9)),
    ],
)
def test_bwrap_exit_codes_above_128_become_signal_deaths(status, expected):
    assert BubblewrapLauncher().translate_exit(status) == expected


def test_bwrap_launch_runs_bwrap_from_the_workspace_with_the_given_env():
    launch = BubblewrapLauncher("/usr/bin/bwrap").launch("/srv/ws", ["ls", "-l"], "sub", {"A": "1"}, TerminalSize(24, 80))
    assert "/usr/bin/bwrap" in launch.argv
    assert launch.argv[-2:] == ["ls", "-l"]
    assert launch.cwd == "/srv/ws"
    assert launch.env == {"A": "1"}
    assert launch.terminal == TerminalSize(24, 80)
    chdir = launch.argv.index("--chdir")
    assert launch.argv[chdir + 1] == "/workspace/sub"
    bind = launch.argv.index("--bind")
    assert launch.argv[bind:bind + 3] == ["--bind", "/srv/ws", "/workspace"]


def test_under_bwrap_the_process_starts_in_workspace_and_writes_there(run, bwrap, workspace):
    launch = bwrap.launch(str(workspace), ["sh", "-c", "pwd; echo hi > /workspace/x"], "", base_env(), None)

    async def body():
        out = Capture()
        async with running(PipeRunner(), launch, out) as handle:
            status = await handle.wait_exited()
        return status, out.text("stdout"), out.text("stderr")

    status, stdout, stderr = run(body)
    assert (status, stdout, stderr) == (ExitStatus(0), "/workspace\n", "")
    assert (workspace / "x").read_text() == "hi\n"


def test_under_bwrap_paths_outside_the_workspace_are_invisible(run, bwrap, workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    script = f"test -e {outside} && echo visible || echo invisible; test -w /usr && echo writable || echo read-only"
    launch = bwrap.launch(str(workspace), ["sh", "-c", script], "/workspace", base_env(), None)

    async def body():
        out = Capture()
        async with running(PipeRunner(), launch, out) as handle:
            await handle.wait_exited()
        return out.text("stdout")

    assert run(body) == "invisible\nread-only\n"


def test_under_bwrap_a_sigterm_handler_gets_to_finish(run, bwrap, workspace):
    script = 'trap "echo cleaning; sleep 0.2; echo done; exit 3" TERM; sleep 60 & echo ready; wait'
    launch = bwrap.launch(str(workspace), ["sh", "-c", script], "", base_env(), None)

    async def body():
        out = Capture()
        async with running(PipeRunner(), launch, out) as handle:
            await out.wait_for("stdout", b"ready")
            handle.send_signal(signal.SIGTERM)
            status = await asyncio.wait_for(handle.wait_exited(), 10)
        return bwrap.translate_exit(status), out.text("stdout")

    status, stdout = run(body)
    assert status == ExitStatus(exit_code=3)
    assert stdout.endswith("cleaning\ndone\n")


def test_under_bwrap_a_signal_death_is_reported_as_a_signal(run, bwrap, workspace):
    launch = bwrap.launch(str(workspace), ["sh", "-c", "echo ready; exec sleep 60"], "", base_env(), None)

    async def body():
        out = Capture()
        async with running(PipeRunner(), launch, out) as handle:
            await out.wait_for("stdout", b"ready")
            handle.send_signal(signal.SIGINT)
            return bwrap.translate_exit(await handle.wait_exited())

    assert run(body) == ExitStatus(exit_code=-1, signal=signal.SIGINT)


def test_under_bwrap_a_terminal_works_and_hang_up_reads_as_end_of_input(run, bwrap, workspace):
    # The session leader is the outer bwrap, which ignores SIGHUP (see
    # infra.bubblewrap), so the kernel's hang-up SIGHUP stops there and the
    # command sees end-of-input (or EIO: cat then exits 0 or 1) instead; on
    # the host it would die of SIGHUP.
    launch = bwrap.launch(str(workspace), ["sh", "-c", "stty size; echo ready; exec cat"], "", base_env(), TerminalSize(30, 90))

    async def body():
        out = Capture()
        async with running(PtyRunner(), launch, out) as handle:
            await out.wait_for("pty", b"ready")
            await handle.close_input()
            status = bwrap.translate_exit(await handle.wait_exited())
        return status, out.text("pty")

    status, text = run(body)
    assert "30 90" in text
    assert status.signal is None and status.exit_code in (0, 1)


def test_bwrap_launch_only_binds_system_dirs_that_exist():
    argv = BubblewrapLauncher().launch("/srv/ws", ["true"], "", {}, None).argv
    for flag, source in zip(argv, argv[1:]):
        if flag == "--ro-bind":
            assert os.path.isdir(source)
