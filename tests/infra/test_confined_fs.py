"""ConfinedFS: sandbox paths resolved as the sandbox sees them, never reaching the host."""
from __future__ import annotations

import os

import pytest

from session_supervisor.domain.model.errors import (
    FileNotFoundInSandboxError,
    InvalidRequestError,
    NotADirectoryInSandboxError,
    NotAFileInSandboxError,
    PathOutsideSandboxError,
)
from session_supervisor.infra.confined_fs import TMP_PREFIX, ConfinedFS


@pytest.fixture
def layout(tmp_path):
    """<tmp>/sb/{workspace,tmp} plus a neighbour's workspace and a host secret next to them."""
    ws, tmp = tmp_path / "sb" / "workspace", tmp_path / "sb" / "tmp"
    ws.mkdir(parents=True)
    tmp.mkdir()
    (tmp_path / "sb" / "state").mkdir()
    (tmp_path / "sb" / "state" / "journal").write_text("journal")
    (tmp_path / "other" / "workspace").mkdir(parents=True)
    (tmp_path / "other" / "workspace" / "secret").write_text("theirs")
    (tmp_path / "host-secret").write_text("host")
    return tmp_path, ConfinedFS({"/workspace": str(ws), "/tmp": str(tmp)})


def read(fs: ConfinedFS, path: str) -> bytes:
    fd, size = fs.open_read(path)
    try:
        return os.read(fd, size + 1)
    finally:
        os.close(fd)


def test_relative_paths_and_dot_dot_stay_inside_the_workspace(layout):
    root, fs = layout
    fs.write("b.txt", iter([b"one"]))  # relative: under /workspace
    assert read(fs, "/workspace/b.txt") == b"one"
    fs.mkdir("/workspace/d", recursive=False)
    assert read(fs, "/workspace/d/../b.txt") == b"one"
    assert read(fs, "b.txt") == b"one"
    for path in ("/workspace/../state/journal", "/workspace/../../host-secret", "/state/journal",
                 "/", "/workspace/..", "/workspace/../workspace/../.."):
        with pytest.raises(PathOutsideSandboxError):
            read(fs, path)
    # A host path is a sandbox path too: under /tmp it names the sandbox's /tmp, never the host's.
    with pytest.raises((PathOutsideSandboxError, FileNotFoundInSandboxError)):
        read(fs, f"{root}/host-secret")


def test_absolute_links_are_resolved_from_the_sandbox_root(layout):
    root, fs = layout
    ws = root / "sb" / "workspace"
    (ws / "real").write_text("mine")
    os.symlink("/workspace/real", ws / "abs-inside")
    os.symlink("/tmp", ws / "to-tmp")
    os.symlink(str(root / "host-secret"), ws / "host-abs")
    os.symlink(str(root / "other" / "workspace"), ws / "other-abs")
    os.symlink("../../other/workspace", ws / "other-rel")
    os.symlink("../state", ws / "state-rel")
    os.symlink("/etc/passwd", ws / "passwd")
    assert read(fs, "/workspace/abs-inside") == b"mine"
    fs.write("/workspace/to-tmp/x", iter([b"in tmp"]))
    assert (root / "sb" / "tmp" / "x").read_bytes() == b"in tmp"
    for path in ("host-abs", "other-abs/secret", "other-rel/secret", "state-rel/journal", "passwd"):
        with pytest.raises((PathOutsideSandboxError, FileNotFoundInSandboxError)):
            read(fs, f"/workspace/{path}")
        with pytest.raises((PathOutsideSandboxError, FileNotFoundInSandboxError)):
            fs.write(f"/workspace/{path}", iter([b"pwned"]))
    assert (root / "host-secret").read_text() == "host"
    assert (root / "other" / "workspace" / "secret").read_text() == "theirs"
    assert (root / "sb" / "state" / "journal").read_text() == "journal"


def test_a_dangling_link_to_inside_creates_its_target_and_a_loop_is_refused(layout):
    root, fs = layout
    ws = root / "sb" / "workspace"
    os.symlink("/workspace/new-target", ws / "dangling")
    fs.write("/workspace/dangling", iter([b"through the link"]))
    assert (ws / "new-target").read_bytes() == b"through the link" and os.path.islink(ws / "dangling")
    os.symlink("loop-b", ws / "loop-a")
    os.symlink("loop-a", ws / "loop-b")
    with pytest.raises(InvalidRequestError, match="symbolic links"):
        read(fs, "/workspace/loop-a")


def test_stat_and_delete_act_on_a_link_itself(layout):
    root, fs = layout
    ws = root / "sb" / "workspace"
    os.symlink(str(root / "host-secret"), ws / "host-abs")
    info = fs.stat("/workspace/host-abs")
    assert (info["type"], info["is_link"], info["link_target"]) == ("symlink", True, str(root / "host-secret"))
    fs.remove("/workspace/host-abs")
    assert not os.path.lexists(ws / "host-abs") and (root / "host-secret").exists()
    os.symlink(str(root / "other" / "workspace"), ws / "other-abs")
    fs.remove("/workspace/other-abs")
    assert (root / "other" / "workspace" / "secret").exists()
    with pytest.raises(PathOutsideSandboxError):
        fs.remove("/workspace")


def test_special_files_are_not_read(layout):
    root, fs = layout
    os.mkfifo(root / "sb" / "workspace" / "fifo")
    with pytest.raises(NotAFileInSandboxError):
        fs.open_read("/workspace/fifo")  # returns at once instead of blocking on the FIFO
    with pytest.raises(NotAFileInSandboxError):
        fs.open_read("/workspace")
    with pytest.raises(NotADirectoryInSandboxError):
        fs.list("/workspace/fifo")


def test_a_failed_upload_leaves_the_old_file_and_no_temporary(layout):
    root, fs = layout
    ws = root / "sb" / "workspace"
    fs.write("/workspace/f", iter([b"old"]))

    def broken():
        yield b"partial"
        raise ConnectionError("client went away")

    with pytest.raises(ConnectionError):
        fs.write("/workspace/f", broken())
    assert (ws / "f").read_bytes() == b"old"
    assert not [n for n in os.listdir(ws) if n.startswith(TMP_PREFIX)]


def test_a_directory_swapped_for_a_link_during_an_upload_is_not_followed(layout):
    """The upload holds the directory's descriptor: a rename-and-link race cannot redirect it."""
    root, fs = layout
    ws = root / "sb" / "workspace"
    (ws / "d").mkdir()
    upload = fs.begin_write("/workspace/d/out")
    upload.write(b"data")
    os.rename(ws / "d", ws / "d-moved")
    os.symlink(str(root / "other" / "workspace"), ws / "d")
    upload.commit()
    assert (ws / "d-moved" / "out").read_bytes() == b"data"
    assert sorted(os.listdir(root / "other" / "workspace")) == ["secret"]


def test_an_area_the_runtime_does_not_offer_is_refused(tmp_path):
    (tmp_path / "ws").mkdir()
    fs = ConfinedFS({"/workspace": str(tmp_path / "ws")})  # the host runtime: /tmp is the host's
    with pytest.raises(PathOutsideSandboxError):
        fs.write("/tmp/x", iter([b"x"]))
    assert not os.path.exists("/tmp/x") or open("/tmp/x", "rb").read() != b"x"
