"""Workspace checkpoints in shared storage: what goes in comes back as it was, and a hostile
archive never writes outside its target."""
from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
from pathlib import Path

import pytest
import zstandard

from session_supervisor.infra.workspace_checkpoint import (MANIFEST, CheckpointError, UnsafeEntryError,
                                                           read_manifest, restore, save)

SB = "sb-0123456789abcdef"
ROOT = os.geteuid() == 0
UID = 100_123


def make_sandbox(base: Path) -> Path:
    """A sandbox dir as sandbox_dirs lays it out, with every kind of entry a tenant can make."""
    sandbox = base / "sandboxes" / SB
    ws, tmp = sandbox / "workspace", sandbox / "tmp"
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "empty").mkdir()
    tmp.mkdir()
    tmp.chmod(0o1777)
    (ws / "src" / "pkg" / "mod.py").write_text("print('hi')\n" * 100)
    (ws / "big.bin").write_bytes(os.urandom(300_000))
    (ws / "run.sh").write_text("#!/bin/sh\n")
    (ws / "secret").write_text("s")
    (ws / "secret").chmod(0o600)
    os.link(ws / "big.bin", ws / "big.hardlink")
    (ws / "rel-link").symlink_to("src/pkg/mod.py")
    (ws / "out-link").symlink_to("/etc/passwd")  # kept as a link, never followed
    (ws / "dir-link").symlink_to("src")
    os.mkfifo(ws / "fifo")
    (tmp / "scratch").write_bytes(b"t" * 10)
    os.utime(ws / "secret", (1_600_000_000, 1_600_000_000))
    if ROOT:
        for path in [ws, tmp / "scratch", *ws.rglob("*")]:
            os.lchown(path, UID, UID)
    (ws / "run.sh").chmod(0o4755)  # after the chown, which clears setuid
    return sandbox


def snapshot(root: Path) -> dict:
    out = {}
    for path in sorted(root.rglob("*")):
        info = os.lstat(path)
        key = str(path.relative_to(root))
        entry = {"mode": stat.filemode(info.st_mode), "uid": info.st_uid, "gid": info.st_gid}
        if path.is_symlink():
            entry["link"] = os.readlink(path)
        elif path.is_file():
            entry |= {"data": hashlib.sha256(path.read_bytes()).hexdigest(), "mtime": int(info.st_mtime)}
        out[key] = entry
    return out


def test_a_saved_workspace_comes_back_with_its_modes_owners_links_and_tmp(tmp_path):
    sandbox = make_sandbox(tmp_path)
    manifest = save(sandbox, tmp_path / "checkpoints", SB, generation=3)
    restored = tmp_path / "restored"
    assert restore(tmp_path / "checkpoints", SB, restored) == manifest
    assert snapshot(restored) == snapshot(sandbox)
    assert os.stat(restored / "workspace" / "big.bin").st_ino == os.stat(restored / "workspace" / "big.hardlink").st_ino
    assert stat.S_IMODE(os.stat(restored / "tmp").st_mode) == 0o1777
    assert stat.S_IMODE(os.stat(restored / "workspace" / "run.sh").st_mode) == 0o4755
    assert os.readlink(restored / "workspace" / "out-link") == "/etc/passwd"


def test_the_manifest_names_the_generation_and_the_archives_checksum_and_old_archives_go(tmp_path):
    sandbox = make_sandbox(tmp_path)
    first = save(sandbox, tmp_path / "checkpoints", SB, generation=1)
    (sandbox / "workspace" / "new.txt").write_text("after the first pause")
    second = save(sandbox, tmp_path / "checkpoints", SB, generation=2)
    folder = tmp_path / "checkpoints" / SB
    assert sorted(p.name for p in folder.iterdir()) == sorted([MANIFEST, second["archive"]])
    assert first["archive"] != second["archive"]
    assert read_manifest(tmp_path / "checkpoints", SB) == second
    assert second["runtime_generation"] == 2
    assert second["sha256"] == hashlib.sha256((folder / second["archive"]).read_bytes()).hexdigest()
    assert second["owner_uid"] == (UID if ROOT else os.geteuid())
    assert read_manifest(tmp_path / "checkpoints", "sb-none") is None


def test_restore_refuses_a_target_that_is_not_empty_and_a_sandbox_without_checkpoint(tmp_path):
    save(make_sandbox(tmp_path), tmp_path / "checkpoints", SB, 1)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    with pytest.raises(CheckpointError, match="not empty"):
        restore(tmp_path / "checkpoints", SB, tmp_path / "busy")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        restore(tmp_path / "checkpoints", "sb-none", tmp_path / "other")


def test_a_corrupted_archive_is_refused_and_leaves_the_target_empty(tmp_path):
    manifest = save(make_sandbox(tmp_path), tmp_path / "checkpoints", SB, 1)
    archive = tmp_path / "checkpoints" / SB / manifest["archive"]
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    with pytest.raises(CheckpointError):
        restore(tmp_path / "checkpoints", SB, tmp_path / "restored")
    assert list((tmp_path / "restored").iterdir()) == []


@pytest.mark.skipif(not ROOT, reason="moving files to another uid needs root")
def test_restore_moves_the_saved_owners_files_to_the_uid_given_for_this_node(tmp_path):
    sandbox = make_sandbox(tmp_path)
    os.lchown(sandbox / "workspace" / "secret", 0, 0)  # not the sandbox's: stays as it is
    save(sandbox, tmp_path / "checkpoints", SB, 1)
    restore(tmp_path / "checkpoints", SB, tmp_path / "restored", owner_uid=UID + 7)
    ws = tmp_path / "restored" / "workspace"
    assert (os.lstat(ws).st_uid, os.lstat(ws / "out-link").st_gid) == (UID + 7, UID + 7)
    assert os.lstat(ws / "secret").st_uid == 0


def test_a_socket_in_the_workspace_is_left_out(tmp_path):
    sandbox = make_sandbox(tmp_path)
    os.mknod(sandbox / "workspace" / "agent.sock", stat.S_IFSOCK | 0o600)  # what a bound socket leaves
    save(sandbox, tmp_path / "checkpoints", SB, 1)
    restore(tmp_path / "checkpoints", SB, tmp_path / "restored")
    assert not (tmp_path / "restored" / "workspace" / "agent.sock").exists()


# ---- hostile archives: written by hand, with a manifest that matches them -------------------------
def plant(checkpoints: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    archive = zstandard.ZstdCompressor().compress(raw.getvalue())
    folder = checkpoints / SB
    folder.mkdir(parents=True)
    (folder / "workspace-g1-x.tar.zst").write_bytes(archive)
    (folder / MANIFEST).write_text(json.dumps({
        "version": 1, "sandbox_id": SB, "runtime_generation": 1, "archive": "workspace-g1-x.tar.zst",
        "sha256": hashlib.sha256(archive).hexdigest(), "size": len(archive), "owner_uid": None}))


def entry(name, kind=tarfile.REGTYPE, linkname="", mode=0o644):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, mode
    return info


HOSTILE = {
    "absolute path": [(entry("/tmp/OUTSIDE/pwned"), b"x")],
    "dot-dot": [(entry("workspace", tarfile.DIRTYPE), None), (entry("workspace/../../OUTSIDE/pwned"), b"x")],
    "through a symlink out": [(entry("workspace", tarfile.DIRTYPE), None),
                              (entry("workspace/link", tarfile.SYMTYPE, "{outside}"), None),
                              (entry("workspace/link/pwned"), b"x")],
    "file over a symlink out": [(entry("workspace", tarfile.DIRTYPE), None),
                                (entry("workspace/victim", tarfile.SYMTYPE, "{outside}/victim"), None),
                                (entry("workspace/victim"), b"x")],
    "hard link to a host file": [(entry("workspace", tarfile.DIRTYPE), None),
                                 (entry("workspace/h", tarfile.LNKTYPE, "{outside}/victim"), None)],
    "hard link up and out": [(entry("workspace", tarfile.DIRTYPE), None),
                             (entry("workspace/h", tarfile.LNKTYPE, "../../OUTSIDE/victim"), None)],
    "device node": [(entry("workspace", tarfile.DIRTYPE), None), (entry("workspace/mem", tarfile.CHRTYPE), None)],
    "another top-level dir": [(entry("state", tarfile.DIRTYPE), None), (entry("state/journal.sqlite"), b"x")],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_entry_refuses_the_whole_restore_and_nothing_lands_outside(tmp_path, case):
    outside = tmp_path / "OUTSIDE"
    outside.mkdir()
    (outside / "victim").write_text("untouched")
    members = []
    for info, data in HOSTILE[case]:
        info.name = info.name.replace("/tmp/OUTSIDE", str(outside))
        info.linkname = info.linkname.replace("{outside}", str(outside))
        members.append((info, data))
    plant(tmp_path / "checkpoints", members)
    target = tmp_path / "a" / "b"
    with pytest.raises(UnsafeEntryError):
        restore(tmp_path / "checkpoints", SB, target)
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert (outside / "victim").read_text() == "untouched"
    assert list(target.iterdir()) == []
