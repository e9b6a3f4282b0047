from __future__ import annotations

import asyncio
import signal

import pytest

from session_supervisor.domain.ports import ExitStatus, Launch, StartFailedError
from session_supervisor.infra.pipe_runner import PipeRunner, proc_start_time
from tests.infra.conftest import Capture, base_env, is_alive, running, wait_until


def sh(script: str, cwd: str = "/") -> Launch:
    return Launch(argv=["sh", "-c", script], cwd=cwd, env=base_env())


def test_input_echoes_through_cat_with_stdout_and_stderr_kept_apart(run):
    async def body():
        out = Capture()
        async with running(PipeRunner(), sh("cat; echo oops >&2"), out) as handle:
            await handle.write(b"hello\n")
            await out.wait_for("stdout", b"hello\n")
            await handle.close_input()
            status = await handle.wait_exited()
        return status, out

    status, out = run(body)
    assert status == ExitStatus(exit_code=0)
    assert bytes(out.data["stdout"]) == b"hello\n"
    assert bytes(out.data["stderr"]) == b"oops\n"


def test_a_nonzero_exit_code_is_reported_as_is(run):
    async def body():
        async with running(PipeRunner(), sh("exit 7"), Capture()) as handle:
            return await handle.wait_exited()

    assert run(body) == ExitStatus(exit_code=7)


def test_death_by_signal_reports_exit_code_minus_one_and_the_signal(run):
    async def body():
        out = Capture()
        async with running(PipeRunner(), sh("echo ready; exec sleep 60"), out) as handle:
            await out.wait_for("stdout", b"ready")
            handle.send_signal(signal.SIGTERM)
            return await handle.wait_exited()

    assert run(body) == ExitStatus(exit_code=-1, signal=signal.SIGTERM)


def test_a_signal_reaches_the_whole_process_group(run):
    async def body():
        out = Capture()
        async with running(PipeRunner(), sh("sleep 60 & echo $!; wait"), out) as handle:
            await out.wait_for("stdout", b"\n")
            grandchild = int(out.text("stdout"))
            assert is_alive(grandchild)
            handle.send_signal(signal.SIGKILL)
            await handle.wait_exited()
            await wait_until(lambda: not is_alive(grandchild))

    run(body)


def test_pid_and_start_time_identify_the_child(run):
    async def body():
        out = Capture()
        async with running(PipeRunner(), sh("echo $$; exec sleep 60"), out) as handle:
            await out.wait_for("stdout", b"\n")
            assert int(out.text("stdout")) == handle.pid
            assert handle.start_time == proc_start_time(handle.pid) > 0

    run(body)


@pytest.mark.parametrize(
    "launch",
    [
        Launch(argv=["/no/such/program"], cwd="/", env={}),
        Launch(argv=["no-such-program-on-path"], cwd="/", env=base_env()),
        Launch(argv=["true"], cwd="/no/such/dir", env=base_env()),
        Launch(argv=["true"], cwd="/etc/hostname", env=base_env()),  # not a directory
        Launch(argv=[], cwd="/", env={}),
    ],
    ids=["missing-path", "not-on-path", "missing-cwd", "cwd-is-a-file", "empty-argv"],
)
def test_a_process_that_cannot_start_raises_start_failed(run, launch):
    async def body():
        with pytest.raises(StartFailedError):
            await PipeRunner().start(launch, Capture())

    run(body)


def test_a_file_without_execute_permission_cannot_start(run, tmp_path):
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\necho no\n")
    script.chmod(0o644)

    async def body():
        with pytest.raises(StartFailedError, match="Permission denied"):
            await PipeRunner().start(Launch([str(script)], "/", base_env()), Capture())

    run(body)


def test_paused_output_is_delivered_later_without_losing_bytes(run):
    total = 20_000_000

    async def body():
        loop = asyncio.get_running_loop()
        state = {"bytes": 0, "paused": False, "pauses": 0, "late": 0}
        handle = None

        def on_output(stream, data):
            # Counted first, checked after the run: an assert raised in here would be
            # swallowed by the loop and leave every later chunk uncounted.
            state["bytes"] += len(data)
            state["late"] += state["paused"]
            if handle is not None and state["pauses"] < 50:  # output may beat start()  # pause after every chunk for a while
                state["paused"] = True
                state["pauses"] += 1
                handle.pause_output()
                loop.call_later(0.002, resume)

        def resume():
            state["paused"] = False
            handle.resume_output()

        async with running(PipeRunner(), Launch(["head", "-c", str(total), "/dev/zero"], "/", base_env()), on_output) as handle:
            status = await handle.wait_exited()
        return status, state

    status, state = run(body)
    assert status == ExitStatus(exit_code=0)
    assert state["bytes"] == total
    assert state["pauses"] >= 10  # 1 MiB reads: ~20 chunks at least
    # Pausing is soft: a chunk already read may still arrive after pause_output(); one per
    # pause is usual, and a loaded machine may queue a second before the pause lands.
    assert state["late"] <= 2 * state["pauses"], state


def test_wait_exited_returns_only_after_all_output_was_delivered(run):
    size = 60_000  # fits the pipe (asyncio) and the socketpair (uvloop) buffer

    async def body():
        out = Capture()
        launch = sh(f"sleep 0.2; head -c {size} /dev/zero; exit 3")
        async with running(PipeRunner(), launch, out) as handle:
            handle.pause_output()
            await wait_until(lambda: not is_alive(handle.pid))
            waiter = asyncio.ensure_future(handle.wait_exited())
            # Longer than the EOF grace: being paused must not count as "stuck".
            done, _ = await asyncio.wait([waiter], timeout=1.5)
            assert not done, "wait_exited returned while output was still queued"
            handle.resume_output()
            status = await waiter
            delivered = len(out.data["stdout"])
        return status, delivered

    assert run(body) == (ExitStatus(exit_code=3), size)


def test_wait_exited_gives_up_on_a_grandchild_that_holds_the_pipe(run):
    async def body():
        out = Capture()
        loop = asyncio.get_running_loop()
        async with running(PipeRunner(), sh("sleep 60 & echo started"), out) as handle:
            started = loop.time()
            status = await handle.wait_exited()
            return status, loop.time() - started, out.text("stdout")

    status, waited_s, stdout = run(body)
    assert status == ExitStatus(exit_code=0)
    assert stdout == "started\n"
    assert waited_s < 5


def test_large_writes_wait_for_the_pipe_to_drain(run):
    size = 5_000_000

    async def body():
        out = Capture()
        async with running(PipeRunner(), Launch(["wc", "-c"], "/", base_env()), out) as handle:
            await handle.write(b"x" * size)
            await handle.close_input()
            status = await handle.wait_exited()
        return status, out.text("stdout").strip()

    assert run(body) == (ExitStatus(exit_code=0), str(size))


def test_writing_after_the_process_exited_raises_broken_pipe(run):
    async def body():
        async with running(PipeRunner(), Launch(["true"], "/", base_env()), Capture()) as handle:
            await handle.wait_exited()
            with pytest.raises(BrokenPipeError):
                await handle.write(b"late\n")

    run(body)


def test_writing_after_close_input_raises_broken_pipe(run):
    async def body():
        async with running(PipeRunner(), Launch(["cat"], "/", base_env()), Capture()) as handle:
            await handle.close_input()
            with pytest.raises(BrokenPipeError):
                await handle.write(b"late\n")
            assert await handle.wait_exited() == ExitStatus(exit_code=0)

    run(body)


def test_resize_is_refused_without_a_terminal(run):
    async def body():
        async with running(PipeRunner(), Launch(["cat"], "/", base_env()), Capture()) as handle:
            with pytest.raises(OSError, match="pty not available"):
                handle.resize(24, 80)

    run(body)
