"""``sessionctl sandbox run`` and ``sessionctl sandbox cp`` against a real server, and the
client's context and file methods."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from session_supervisor.client import Client
from session_supervisor.client.errors import NotFound
from tests.client.test_cli import ROOT, cli_env
from tests.helpers import TOKEN


def sessionctl(server, *args, input_: bytes | None = None) -> subprocess.CompletedProcess:
    """As tests/client/test_cli.py's, but with bytes: cp moves binary files through stdout."""
    return subprocess.run([sys.executable, "-m", "session_supervisor.client.cli", *args], cwd=ROOT, capture_output=True,
                          timeout=60, input=input_, env=cli_env(server))


@pytest.fixture
def sb(server):
    with Client(server.url, TOKEN) as client:
        sandbox_id = client.claim_sandbox("default").sandbox_id
        yield sandbox_id
        client.delete_sandbox(sandbox_id)


def test_sandbox_run_relays_output_and_exits_with_the_command_code(server, sb):
    done = sessionctl(server, "sandbox", "run", sb, "python3", "-c",
                      "import sys; print('to out'); print('to err', file=sys.stderr); sys.exit(7)")
    assert (done.returncode, done.stdout, done.stderr) == (7, b"to out\n", b"to err\n")
    done = sessionctl(server, "sandbox", "run", sb, "--env", "X=1", "--", "sh", "-c", "echo $X; pwd")
    assert done.returncode == 0 and done.stdout.splitlines()[0] == b"1", done
    assert done.stdout.splitlines()[1].endswith(b"/workspace")


def test_sandbox_run_of_an_unknown_sandbox_is_not_found(server):
    done = sessionctl(server, "sandbox", "run", "sb-missing", "true")
    assert done.returncode == 3 and b"not_found" in done.stderr


def test_sandbox_cp_copies_into_and_out_of_the_workspace(server, sb, tmp_path):
    source = tmp_path / "in.bin"
    source.write_bytes(os.urandom(3 << 20))
    assert sessionctl(server, "sandbox", "cp", str(source), f"{sb}:/workspace/copied.bin").returncode == 0
    assert sessionctl(server, "sandbox", "cp", "-", f"{sb}:notes.txt", input_=b"from stdin").returncode == 0
    out = tmp_path / "out.bin"
    assert sessionctl(server, "sandbox", "cp", f"{sb}:/workspace/copied.bin", str(out)).returncode == 0
    assert out.read_bytes() == source.read_bytes()
    done = sessionctl(server, "sandbox", "cp", f"{sb}:notes.txt", "-")
    assert (done.returncode, done.stdout) == (0, b"from stdin")
    missing = sessionctl(server, "sandbox", "cp", f"{sb}:/workspace/nope", str(tmp_path / "x"))
    assert missing.returncode == 3 and b"file_not_found" in missing.stderr
    outside = sessionctl(server, "sandbox", "cp", str(source), f"{sb}:/etc/passwd")
    assert outside.returncode == 6 and b"permission_denied" in outside.stderr
    assert sessionctl(server, "sandbox", "cp", str(source), str(out)).returncode == 2  # no SB: side


def test_the_client_covers_the_context_and_file_routes(server, sb):
    with Client(server.url, TOKEN) as client:
        result = client.run_command(sb, ["sh", "-c", "echo hi; exit 4"])
        assert (result.stdout, result.exit_code, result.state) == ("hi\n", 4, "crashed")
        repl = client.create_context(sb, {"type": "repl", "repl": {"alias": "python"}})
        assert "2\r\n" in client.context_exec(sb, repl.id, "print(1 + 1)").output_raw
        assert [c.id for c in client.list_contexts(sb)] == [result.id, repl.id]
        client.delete_context(sb, repl.id)
        with pytest.raises(NotFound):
            client.get_context(sb, repl.id)
        client.make_dir(sb, "/workspace/d/e", recursive=True)
        client.write_file(sb, "/workspace/d/e/f", b"\x00bytes")
        assert client.read_file(sb, "/workspace/d/e/f") == b"\x00bytes"
        assert client.stat_file(sb, "/workspace/d/e/f").size == 6
        client.move_file(sb, "/workspace/d/e/f", "/workspace/d/g")
        assert [(f.name, f.type) for f in client.list_files(sb, "/workspace/d")] == [("e", "dir"), ("g", "file")]
        client.delete_file(sb, "/workspace/d")
        with pytest.raises(NotFound):
            client.stat_file(sb, "/workspace/d")


def test_the_async_client_has_the_same_context_and_file_methods(server, sb):
    import asyncio

    from session_supervisor.client import AsyncClient

    async def scenario():
        async with AsyncClient(server.url, TOKEN) as client:
            await client.write_file(sb, "/workspace/async.bin", b"\x01\x02")
            assert await client.read_file(sb, "/workspace/async.bin") == b"\x01\x02"
            result = await client.run_command(sb, ["cat", "async.bin"])  # cwd: the workspace
            assert (result.stdout, result.exit_code) == ("\x01\x02", 0)

    asyncio.run(scenario())
