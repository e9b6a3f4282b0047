"""Host-side modes: another local user of the machine can neither read a workspace nor drop files
into a sandbox's /tmp, and the data dir is the server's alone. The attack runs for real, as
``nobody`` (through ``setpriv``), against a server whose data dir sits under a directory every
user may traverse, so only the server's own modes stand in the way."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import make_http
from tests.helpers import TOKEN, claim_sandbox, ok, run_to_exit, workspace_dir
from tests.serverproc import ServerProcess

NOBODY = 65534
INTRUDER = r'''
import errno, os, sys
def attempt(name, fn):
    try:
        fn()
        print(name, "ESCAPED")
    except OSError as exc:
        print(name, "refused:" + errno.errorcode.get(exc.errno, str(exc.errno)))
data, sb, root = sys.argv[1], sys.argv[2], sys.argv[3]
base = os.path.join(data, "sandboxes", sb)
attempt("list_data_dir", lambda: os.listdir(data))
attempt("list_workspace", lambda: os.listdir(root + "/workspace"))
attempt("read_upload", lambda: open(root + "/workspace/uploaded.txt").read())
attempt("read_sandbox_file", lambda: open(root + "/workspace/made-inside.txt").read())
attempt("drop_into_tmp", lambda: open(root + "/tmp/dropped-by-nobody", "w").write("x"))
attempt("read_store", lambda: os.listdir(base + "/state"))
attempt("read_token", lambda: open(data + "/token").read())
'''


@pytest.fixture
def open_parent():
    """A parent directory every local user may traverse (pytest's own tmp dirs are 0700)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("bwrap") is None:
        pytest.skip("needs root, setpriv and bubblewrap")
    parent = Path(tempfile.mkdtemp(prefix="sessiond-modes-", dir="/tmp"))
    parent.chmod(0o755)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_another_local_user_reaches_no_workspace_tmp_store_or_token(open_parent):
    data = open_parent / "data"
    with ServerProcess(data, runtime="bwrap") as server, make_http(server.url, server.token) as http:
        sb = claim_sandbox(http)
        ok(http.post(f"/api/v1/sandboxes/{sb}/files", params={"path": "/workspace/uploaded.txt"},
                     content=b"uploaded secret"), 200)
        exited, _ = run_to_exit(http, sb, ["sh", "-c", "echo inside > /workspace/made-inside.txt; "
                                                     "echo t > /tmp/made-inside; ls -ld /tmp"])
        assert exited["exit_code"] == 0
        base = data / "sandboxes" / sb
        root = workspace_dir(data, sb).parent  # the sandbox's own disk when it has one
        assert (root / "uploaded.txt").exists() is False and (root / "workspace" / "uploaded.txt").exists()
        uid = (root / "workspace").stat().st_uid
        modes = {str(p.relative_to(data)) or ".": oct(mode(p)) for p in
                 (data, data / "sandboxes", base, base / "state", root / "tmp", root / "workspace", data / "runtime",
                  data / "token", data / "lock")}
        print("\nmodes:", modes)
        for path in (data, data / "sandboxes", base, base / "state", root / "tmp", data / "runtime"):
            assert mode(path) in (0o700, 0o750), (path, oct(mode(path)))
        assert mode(data / "token") == 0o600 and mode(data / "lock") == 0o600
        for part in ("workspace", "tmp"):  # the sandbox's own, and nobody else may write them
            info = (root / part).stat()
            assert info.st_uid == uid != 0 and not info.st_mode & 0o002, (part, oct(info.st_mode), info.st_uid)

        done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                               "/usr/bin/python3", "-c", INTRUDER, str(data), sb, str(root)],
                              capture_output=True, text=True, timeout=30)
        print(done.stdout.strip())
        results = dict(line.split(" ", 1) for line in done.stdout.splitlines())
        assert len(results) == 7, done.stdout + done.stderr
        escaped = {name: r for name, r in results.items() if not r.startswith("refused:")}
        assert not escaped, escaped
        missing = {name for name, r in results.items() if r == "refused:ENOENT"}
        assert not missing, f"probed paths that do not exist, so they prove nothing: {missing}"
        assert not (root / "tmp" / "dropped-by-nobody").exists()
        # The sandbox itself still works through all of it: its own files, a new session.
        exited, out = run_to_exit(http, sb, ["cat", "/workspace/uploaded.txt", "/tmp/made-inside"])
        assert (exited["exit_code"], out) == (0, b"uploaded secrett\n")
