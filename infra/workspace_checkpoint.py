"""A paused sandbox's files in shared storage: ``<checkpoint-dir>/<sandbox_id>/``, for resuming anywhere.

What is saved: the sandbox directory's ``workspace/`` and ``tmp/`` (layout: ``sandbox_dirs``),
as one zstd-compressed tar, ``workspace-g<generation>-<sha256 prefix>.tar.zst``, and next to it
``manifest.json`` naming that archive with its sha256, size and the runtime generation. Both are
written atomically (temp file, fsync, rename, fsync of the directory). The manifest is the commit
point: it is replaced only after the new archive is durable, and older archives are removed only
after that, so a crash at any step leaves a manifest whose archive exists and matches.

Why Python's ``tarfile`` over a ``zstandard`` stream and not GNU ``tar --zstd``: extraction must
refuse hostile entries (the workspace is written by the tenant), and here every entry passes our
own check before it touches the disk, the one place where the rules live and are tested. ``tar``
has its own defences (it strips ``/`` and ``..``, delays symlinks) but no way to say "refuse the
whole archive", and would need the ``zstd`` binary on every node. The cost is measured against
``tar`` in ``tests/bench/bench_workspace_checkpoint.py``.

Kept as they are: numeric uid/gid (the sandbox's own uid, >= 100000; ``restore(owner_uid=)``
moves them to another uid when the saved one is taken on the new node), modes (setuid, sticky
``tmp/``), mtimes, symlinks (any target: they are never followed while extracting) and hard links
within the archive. Not kept: xattrs, ACLs, sparseness, sockets (tarfile skips them), devices
(refused; a sandbox cannot make them). Save a sandbox only while its processes are stopped or
frozen: files changing during the walk are saved torn.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
import time
from pathlib import Path, PurePosixPath

import zstandard

from .checkpoint import fsync_dir, write_atomic
from .tree_walk import DIR_OPEN, remove_path, walk_tree

MANIFEST = "manifest.json"
PARTS = ("workspace", "tmp", "upper")  # the only top-level names an archive may hold (upper: an image
# sandbox's writable layer, infra.rootfs)
WHITEOUT_PART = "upper"  # overlayfs records a deleted image file as a 0:0 character device there
LEVEL = 3
BLOCK = 1 << 20


class CheckpointError(Exception):
    """No usable checkpoint: missing, or its archive does not match the manifest."""


class UnsafeEntryError(CheckpointError):
    """An archive entry would land outside the target, or is of a kind never restored."""


# ---- save ----------------------------------------------------------------------------------------
def save(sandbox_dir: Path, checkpoint_dir: Path, sandbox_id: str, generation: int,
         extra: dict | None = None) -> dict:
    """Archive ``sandbox_dir``'s workspace/ and tmp/ into ``checkpoint_dir/sandbox_id/`` and
    return the manifest written next to it (blocking: run it in a thread)."""
    started = time.monotonic()
    target = Path(checkpoint_dir) / sandbox_id
    target.mkdir(parents=True, exist_ok=True)
    temp = target / f".archive.{os.getpid()}.{time.monotonic_ns()}.tmp"
    digest = hashlib.sha256()
    entries = raw = 0
    try:
        with open(temp, "wb") as out:
            hashing = _HashingWriter(out, digest)
            compressor = zstandard.ZstdCompressor(level=LEVEL, threads=-1)
            with compressor.stream_writer(hashing, closefd=False) as zstd, \
                    tarfile.open(fileobj=zstd, mode="w|", format=tarfile.GNU_FORMAT) as tar:
                for part in PARTS:
                    if (Path(sandbox_dir) / part).exists():
                        added, size = _add_tree(tar, Path(sandbox_dir), part)
                        entries += added
                        raw += size
            out.flush()
            os.fsync(out.fileno())
        size = temp.stat().st_size
        name = f"workspace-g{generation}-{digest.hexdigest()[:16]}.tar.zst"
        os.replace(temp, target / name)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(target)
    workspace = Path(sandbox_dir) / "workspace"
    manifest = {"version": 1, "sandbox_id": sandbox_id, "runtime_generation": generation,
                "archive": name, "sha256": digest.hexdigest(), "size": size, "entries": entries,
                "raw_bytes": raw, "owner_uid": workspace.stat().st_uid if workspace.exists() else None,
                "saved_at": time.time(), "save_seconds": round(time.monotonic() - started, 3), **(extra or {})}
    write_atomic(target / MANIFEST, json.dumps(manifest, indent=1).encode())
    for old in target.glob("workspace-*.tar.zst"):
        if old.name != name:
            old.unlink(missing_ok=True)
    return manifest


def _add_tree(tar: tarfile.TarFile, root: Path, part: str) -> tuple[int, int]:
    """Add ``root/part`` in a stable order (names sorted in each directory), never following
    symlinks; iterative and descriptor-relative (``infra.tree_walk``), so no depth a tenant made
    can overflow it."""
    inodes: dict[tuple[int, int], str] = {}
    counts = [0, 0]  # entries, bytes

    def add(info: tarfile.TarInfo, fileobj=None) -> None:
        tar.addfile(info, fileobj)
        counts[0] += 1
        counts[1] += info.size

    def add_dir(dir_fd: int, names: list[str]) -> None:
        rel = "/".join([part, *names])
        add(_tarinfo(dir_fd, None, rel, inodes))
        with os.scandir(dir_fd) as listed:
            entries = sorted(listed, key=lambda e: e.name)
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    continue  # visited by the walk itself, as its own directory
            except OSError:
                continue
            info = _tarinfo(dir_fd, entry.name, f"{rel}/{entry.name}", inodes)
            if info is None:
                continue  # a socket (cannot be archived) or a device (never restored)
            if info.isreg():
                fd = os.open(entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
                with os.fdopen(fd, "rb") as f:
                    add(info, f)
            else:
                add(info)

    fd = os.open(root / part, DIR_OPEN)
    try:
        walk_tree(fd, on_dir=add_dir, sort=True)
    finally:
        os.close(fd)
    return counts[0], counts[1]


def _tarinfo(dir_fd: int, name: str | None, arcname: str, inodes: dict) -> tarfile.TarInfo | None:
    """``TarFile.gettarinfo`` without its user and group name lookups: sandbox uids have no
    names, so each lookup was a miss that read all of /etc/passwd and /etc/group (a fifth of
    the save time on 12k files); numeric ids are what restore uses. ``name`` None: ``dir_fd`` itself."""
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False) if name is not None else os.fstat(dir_fd)
    info = tarfile.TarInfo(arcname)
    info.mode, info.uid, info.gid, info.mtime = stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, int(st.st_mtime)
    if stat.S_ISREG(st.st_mode):
        key = (st.st_dev, st.st_ino)
        if st.st_nlink > 1 and key in inodes:
            info.type, info.linkname = tarfile.LNKTYPE, inodes[key]  # a hard link to an earlier entry
        else:
            info.type, info.size = tarfile.REGTYPE, st.st_size
            if st.st_nlink > 1:
                inodes[key] = arcname
    elif stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
    elif stat.S_ISLNK(st.st_mode):
        info.type, info.linkname = tarfile.SYMTYPE, os.readlink(name, dir_fd=dir_fd)
    elif stat.S_ISFIFO(st.st_mode):
        info.type = tarfile.FIFOTYPE
    elif stat.S_ISCHR(st.st_mode) and st.st_rdev == 0 and arcname.startswith(WHITEOUT_PART + "/"):
        info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 0, 0  # an overlay whiteout
    else:
        return None
    return info


# ---- read ----------------------------------------------------------------------------------------
def read_manifest(checkpoint_dir: Path, sandbox_id: str) -> dict | None:
    """The sandbox's checkpoint manifest; None when it has none."""
    try:
        data = (Path(checkpoint_dir) / sandbox_id / MANIFEST).read_bytes()
    except FileNotFoundError:
        return None
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise CheckpointError(f"manifest of {sandbox_id} is not JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("version") != 1:
        raise CheckpointError(f"manifest of {sandbox_id} has an unknown format")
    return manifest


def restore(checkpoint_dir: Path, sandbox_id: str, dest: Path, *, owner_uid: int | None = None) -> dict:
    """Extract the checkpoint into ``dest`` (missing or empty), giving ``dest/workspace`` and
    ``dest/tmp``; returns the manifest. ``owner_uid``: files of the saved owner (uid and gid)
    get this id instead (the saved uid may belong to another sandbox on this node).
    On a checksum mismatch or a hostile entry, what was extracted is removed and
    ``CheckpointError`` / ``UnsafeEntryError`` is raised."""
    manifest = read_manifest(checkpoint_dir, sandbox_id)
    if manifest is None:
        raise CheckpointError(f"no checkpoint for {sandbox_id}")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise CheckpointError(f"restore target {dest} is not empty")
    remap = {}
    if owner_uid is not None and manifest.get("owner_uid") is not None:
        remap = {manifest["owner_uid"]: owner_uid}
    archive = Path(checkpoint_dir) / sandbox_id / manifest["archive"]
    digest = hashlib.sha256()
    try:
        with open(archive, "rb") as raw:
            hashing = _HashingReader(raw, digest)
            with zstandard.ZstdDecompressor().stream_reader(hashing, closefd=False) as zstd, \
                    tarfile.open(fileobj=zstd, mode="r|") as tar:
                tar.extractall(dest, numeric_owner=True, filter=_guard(os.path.realpath(dest), remap))
            while hashing.read(BLOCK):
                pass  # the rest of the file (tar padding, the frame's end) is in the checksum too
        if digest.hexdigest() != manifest["sha256"]:
            raise CheckpointError(f"checkpoint archive of {sandbox_id} does not match its manifest")
    except BaseException as exc:
        _empty(dest)
        if isinstance(exc, (zstandard.ZstdError, tarfile.TarError, EOFError)):
            raise CheckpointError(f"checkpoint archive of {sandbox_id} is unreadable: {exc}") from exc
        raise
    return manifest


def _guard(dest: str, remap: dict[int, int]):
    """The per-entry check, run by tarfile just before each entry is extracted (so the
    symlinks extracted before it are on disk and resolved)."""

    def inside(path: str) -> bool:
        return path == dest or path.startswith(dest + os.sep)

    # Parents already resolved to themselves: a real directory stays one (no later entry may
    # replace an existing path), so each is resolved once, not once per file in it.
    real_dirs = {dest}

    def check(member: tarfile.TarInfo, _path: str) -> tarfile.TarInfo:
        parts = PurePosixPath(member.name).parts
        if member.name.startswith("/") or not parts or ".." in parts or parts[0] not in PARTS:
            raise UnsafeEntryError(f"entry outside workspace/ and tmp/: {member.name!r}")
        whiteout = member.ischr() and member.devmajor == 0 and member.devminor == 0 and parts[0] == WHITEOUT_PART
        if not (member.isreg() or member.isdir() or member.issym() or member.islnk() or member.isfifo()
                or whiteout):
            raise UnsafeEntryError(f"entry of a kind never restored (device?): {member.name!r}")
        target = os.path.join(dest, *parts)
        # Through a symlink extracted earlier, a later entry could land anywhere.
        parent = os.path.dirname(target)
        if parent not in real_dirs:
            resolved = os.path.realpath(parent)
            if not inside(resolved):
                raise UnsafeEntryError(f"entry through a link out of the target: {member.name!r}")
            if resolved == parent:
                real_dirs.add(parent)
        if os.path.lexists(target) and not (member.isdir() and os.path.isdir(target)
                                            and not os.path.islink(target)):
            # A second entry of one name: writing it would follow what the first one made.
            raise UnsafeEntryError(f"entry given twice: {member.name!r}")
        if member.islnk():
            link = PurePosixPath(member.linkname).parts
            source = os.path.join(dest, *link)
            if member.linkname.startswith("/") or not link or ".." in link or \
                    not inside(os.path.realpath(os.path.dirname(source))) or not os.path.isfile(source) \
                    or os.path.islink(source):
                raise UnsafeEntryError(f"hard link to outside the archive: {member.name!r}")
        if remap and (member.uid in remap or member.gid in remap):
            member = member.replace(uid=remap.get(member.uid, member.uid),
                                    gid=remap.get(member.gid, member.gid), deep=False)
        return member

    return check


# ---- files ---------------------------------------------------------------------------------------
class _HashingWriter(io.RawIOBase):
    def __init__(self, out, digest) -> None:
        self.out, self.digest = out, digest

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.digest.update(data)
        return self.out.write(data)


class _HashingReader(io.RawIOBase):
    def __init__(self, src, digest) -> None:
        self.src, self.digest = src, digest

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.src.read(size)
        self.digest.update(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _empty(directory: Path) -> None:
    for child in list(directory.iterdir()):
        try:
            remove_path(str(child))
        except OSError:
            pass
