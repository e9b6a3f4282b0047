from __future__ import annotations

import asyncio
import os
import signal

import pytest

from session_supervisor.domain.ports import ExitStatus, Launch, StartFailedError, TerminalSize
from session_supervisor.infra.pty_runner import PtyRunner
from tests.infra.processes import children
from tests.infra.conftest import Capture, base_env, is_alive, running, wait_until

TERMINAL = TerminalSize(rows=24, cols=80)


def sh(script: str, cwd: str = "/") -> Launch:
    return Launch(argv=["sh", "-c", script], cwd=cwd, env=base_env(), terminal=TERMINAL)


def test_input_is_read_by_the_process_and_its_output_arrives_as_pty(run):
    async def body():
        out = Capture()
        async with running(PtyRunner(), sh('read line; echo "got:$line"'), out) as handle:
            await handle.write(b"hello\n")
            status = await handle.wait_exited()
        return status, out

    status, out = run(body)
    assert status == ExitStatus(exit_code=0)
    assert "got:hello" in out.text("pty")
    assert set(out.data) == {"pty"}


def test_bash_runs_interactively_on_the_terminal(run):
    async def body():
        out = Capture()
        launch = Launch(["bash", "--norc", "--noprofile", "-i"], "/", base_env(), TERMINAL)
        async with running(PtyRunner(), launch, out) as handle:
            await handle.write(b"echo $((6*7)); exit 4\n")
            status = await handle.wait_exited()
        return status, out.text("pty")

    status, text = run(body)
    assert status == ExitStatus(exit_code=4)
    assert "42" in text


def test_the_process_runs_in_the_requested_cwd_and_env(run, tmp_path):
    async def body():
        out = Capture()
        launch = Launch(["sh", "-c", 'echo "$PWD:$GREETING"'], str(tmp_path), {**base_env(), "GREETING": "hi"}, TERMINAL)
        async with running(PtyRunner(), launch, out) as handle:
            await handle.wait_exited()
        return out.text("pty")

    assert f"{tmp_path}:hi" in run(body)


def test_a_resize_is_visible_through_stty_size(run):
    async def body():
        out = Capture()
        async with running(PtyRunner(), sh("stty size; read x; stty size; read y"), out) as handle:
            await out.wait_for("pty", b"24 80")
            handle.resize(40, 100)
            await handle.write(b"\n")
            await out.wait_for("pty", b"40 100")
            await handle.write(b"\n")
            return await handle.wait_exited()

    assert run(body) == ExitStatus(exit_code=0)


def test_close_input_hangs_up_and_the_process_dies_of_sighup(run):
    async def body():
        out = Capture()
        async with running(PtyRunner(), sh("echo ready; exec cat"), out) as handle:
            await out.wait_for("pty", b"ready")
            await handle.close_input()
            return await handle.wait_exited()

    assert run(body) == ExitStatus(exit_code=-1, signal=signal.SIGHUP)


def test_exit_codes_and_signal_deaths_are_reported(run):
    async def body():
        async with running(PtyRunner(), sh("exit 5"), Capture()) as handle:
            exited = await handle.wait_exited()
        out = Capture()
        async with running(PtyRunner(), sh("echo ready; exec sleep 60"), out) as handle:
            await out.wait_for("pty", b"ready")
            handle.send_signal(signal.SIGTERM)
            killed = await handle.wait_exited()
        return exited, killed

    assert run(body) == (ExitStatus(exit_code=5), ExitStatus(exit_code=-1, signal=signal.SIGTERM))


def test_all_output_is_delivered_before_wait_exited_returns(run):
    async def body():
        out = Capture()
        async with running(PtyRunner(), sh("seq 1 30000; exit 3"), out) as handle:
            status = await handle.wait_exited()
        return status, out.text("pty").split()

    status, lines = run(body)
    assert status == ExitStatus(exit_code=3)
    assert lines == [str(n) for n in range(1, 30001)]


def test_paused_output_is_not_read_and_nothing_is_lost(run):
    async def body():
        out = Capture()
        async with running(PtyRunner(), sh("seq 1 30000"), out) as handle:
            handle.pause_output()
            before = out.chunks
            await asyncio.sleep(0.2)  # deliberately idle: nothing may arrive while paused
            assert out.chunks == before
            handle.resume_output()
            status = await handle.wait_exited()
        return status, out.text("pty").split()

    status, lines = run(body)
    assert status == ExitStatus(exit_code=0)
    assert lines[-1] == "30000" and len(lines) == 30000


def test_wait_exited_gives_up_on_a_grandchild_that_keeps_the_terminal(run):
    async def body():
        out = Capture()
        loop = asyncio.get_running_loop()
        script = '(trap "" HUP; exec sleep 60) & echo $!'
        async with running(PtyRunner(), sh(script), out) as handle:
            await out.wait_for("pty", b"\n")
            grandchild = int(out.text("pty").split()[0])
            started = loop.time()
            status = await handle.wait_exited()
            waited_s = loop.time() - started
            handle.send_signal(signal.SIGKILL)  # the group outlives its leader
            await wait_until(lambda: not is_alive(grandchild))
        return status, waited_s

    status, waited_s = run(body)
    assert status == ExitStatus(exit_code=0)
    assert waited_s < 5


def test_writing_after_hang_up_raises_broken_pipe(run):
    async def body():
        async with running(PtyRunner(), sh("exec cat"), Capture()) as handle:
            await handle.close_input()
            with pytest.raises(BrokenPipeError):
                await handle.write(b"late\n")
            with pytest.raises(OSError):
                handle.resize(10, 10)

    run(body)


def test_a_large_write_is_delivered_in_full(run):
    size = 200_000  # well past the terminal's input buffer, so writes hit EAGAIN

    async def body():
        out = Capture()
        # Raw mode: no line-length limit and no echo of the input.
        async with running(PtyRunner(), sh(f"stty raw -echo; echo ready; head -c {size} | wc -c"), out) as handle:
            await out.wait_for("pty", b"ready")
            await handle.write(b"x" * size)
            await out.wait_for("pty", str(size).encode())
            return await handle.wait_exited()

    assert run(body) == ExitStatus(exit_code=0)


@pytest.mark.parametrize(
    "launch",
    [
        Launch(["no-such-program-on-path"], "/", base_env(), TERMINAL),
        Launch(["/no/such/program"], "/", base_env(), TERMINAL),
        Launch(["true"], "/no/such/dir", base_env(), TERMINAL),
        Launch(["true"], "/etc/hostname", base_env(), TERMINAL),
        Launch(["true"], "/", {**base_env(), "BAD=KEY": "x"}, TERMINAL),
        Launch([], "/", base_env(), TERMINAL),
    ],
    ids=["not-on-path", "missing-path", "missing-cwd", "cwd-is-a-file", "bad-env-key", "empty-argv"],
)
def test_a_process_that_cannot_start_raises_start_failed_and_leaves_no_zombie(run, launch):
    async def body():
        with pytest.raises(StartFailedError):
            await PtyRunner().start(launch, Capture())

    run(body)
    try:
        zombie, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:  # no children at all
        zombie = 0
    assert zombie == 0


def test_the_child_does_not_inherit_pythons_ignored_sigpipe(run):
    async def body():
        out = Capture()
        async with running(PtyRunner(), sh("yes | head -n 1; grep SigIgn /proc/self/status"), out) as handle:
            await handle.wait_exited()
        return out.text("pty")

    text = run(body)
    assert "Broken pipe" not in text
    assert "SigIgn:\t0000000000000000" in text


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_the_terminal_and_its_relay_are_gone_after_a_hang_up_and_after_eof(run):
    async def body():
        # The loop's first stream opens a descriptor it keeps (libuv's EMFILE reserve):
        # count from after one session.
        others = set(children())  # the test session's own servers, say
        async with running(PtyRunner(), sh("true"), Capture()) as handle:
            await handle.wait_exited()
        await wait_until(lambda: set(children()) <= others)
        before = _open_fds()
        out = Capture()
        async with running(PtyRunner(), sh("yes"), out) as handle:  # never stops writing
            await out.wait_for("pty", b"y\r\n")
            await handle.close_input()
            await handle.wait_exited()
        async with running(PtyRunner(), sh("echo done"), out) as handle:
            await handle.wait_exited()
        await wait_until(lambda: set(children()) <= others and _open_fds() <= before)
        return before, _open_fds(), set(children()) - others

    before, after, left = run(body)
    assert after <= before and not left


_SERVER_STANDIN = """
import asyncio, os, sys
from session_supervisor.domain.ports import Launch, TerminalSize
from session_supervisor.infra import pty_relay
from session_supervisor.infra.pty_runner import PtyRunner

if sys.argv[1] == "without-setpriv":
    pty_relay.SETPRIV = None

async def main():
    launch = Launch(["sh", "-c", "read x"], "/", {"PATH": os.environ["PATH"]}, TerminalSize(24, 80))
    handle = await PtyRunner().start(launch, lambda stream, data: None)
    print(handle.pid, flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


@pytest.mark.parametrize("relay", ["setpriv", "without-setpriv"])
def test_when_the_server_dies_its_terminals_hang_up_and_the_relay_goes_too(relay):
    """A relay cat outliving the server would hold the master: no hang-up, the program
    waiting for input forever."""
    import subprocess
    import sys
    import time

    server = subprocess.Popen([sys.executable, "-c", _SERVER_STANDIN, relay], stdout=subprocess.PIPE, text=True)
    try:
        program = int(server.stdout.readline())
        relays = [pid for pid in _children_of(server.pid) if pid != program]
        started = [program, *relays]
        assert len(started) == 3, started
        server.kill()
        server.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(is_alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [pid for pid in started if is_alive(pid)] == []
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)


def _children_of(parent: int) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.append(int(pid))
    return [pid for pid in found if is_alive(pid)]
