"""The sandbox's /tmp: a directory on its rootfs bound by bwrap (a tmpfs for older sandboxes)."""
from __future__ import annotations

from session_supervisor.infra.bubblewrap import BubblewrapLauncher, sandbox_tmp_dir
from session_supervisor.infra.sandbox_dirs import SandboxDirectories


def test_a_new_sandbox_has_a_private_tmp_next_to_its_workspace(tmp_path):
    """0700, not 1777: no other local user may drop files into it (the isolation hands it to the
    sandbox's uid, tests/security/test_host_modes.py)."""
    dirs = SandboxDirectories(tmp_path)
    dirs.create("sb-1")
    tmp = tmp_path / "sandboxes" / "sb-1" / "tmp"
    assert sandbox_tmp_dir(dirs.workspace("sb-1")) == str(tmp)
    assert tmp.stat().st_mode & 0o7777 == 0o700


def test_bwrap_binds_the_sandbox_tmp_or_falls_back_to_a_tmpfs(tmp_path):
    (tmp_path / "new" / "workspace").mkdir(parents=True)
    (tmp_path / "new" / "tmp").mkdir()
    (tmp_path / "old" / "workspace").mkdir(parents=True)
    runtime = BubblewrapLauncher("/usr/bin/bwrap")
    argv = runtime.launch(str(tmp_path / "new" / "workspace"), ["true"], "", {}, None).argv
    at = argv.index("/tmp") - 2
    assert argv[at:at + 3] == ["--bind", str(tmp_path / "new" / "tmp"), "/tmp"] and "--tmpfs" not in argv
    argv = runtime.launch(str(tmp_path / "old" / "workspace"), ["true"], "", {}, None).argv
    assert argv[argv.index("--tmpfs") + 1] == "/tmp"
