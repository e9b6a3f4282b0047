"""A tar archive unpacked into a confined view (the volumes' ``PUT …/files/archive``).

Every entry goes through ``ConfinedFS`` like any other file call: directories made as needed,
regular files written atomically (temporary file, fsync, rename: an existing file is overwritten),
symbolic links made as they are (never followed here: the view resolves them as the sandbox would).
So an entry named ``../../etc/x``, an absolute one, or one below a link the archive planted earlier
cannot leave the view: the walk refuses it. Names with ``..`` are refused outright, with the whole
archive (the import is not atomic, as the reference says: what came before stays). Hard links are
written as copies of their target; devices, FIFOs and sockets are refused. Python's ``tarfile``
reads gzip, bzip2 and xz too.
"""
from __future__ import annotations

import posixpath
import tarfile

from session_supervisor.domain.model.errors import InvalidRequestError

CHUNK = 1 << 20


def import_tar(fs, fileobj, base: str) -> dict:
    counts = {"files": 0, "directories": 0, "symlinks": 0, "bytes": 0}
    base = "/" + base.strip("/") if base.strip("/") else "/"
    try:
        archive = tarfile.open(fileobj=fileobj, mode="r:*")
    except tarfile.TarError as exc:
        raise InvalidRequestError(f"not a tar archive: {exc}") from None
    with archive:
        try:
            _unpack(fs, archive, base, counts)
        except tarfile.TarError as exc:
            raise InvalidRequestError(f"the tar archive is damaged: {exc}") from None
    return counts


def _unpack(fs, archive, base: str, counts: dict) -> None:
    for member in archive:
        path = _target(base, member.name)
        if path is None:
            continue  # "." itself
        if member.isdir():
            fs.mkdir(path, True)
            counts["directories"] += 1
        elif member.isreg() or member.islnk():
            fs.mkdir(posixpath.dirname(path), True)
            source = archive.extractfile(member)
            upload = fs.begin_write(path, member.mode & 0o777 or 0o644)
            try:
                while chunk := source.read(CHUNK):
                    upload.write(chunk)
                    counts["bytes"] += len(chunk)
                upload.commit()
            finally:
                upload.abort()
            counts["files"] += 1
        elif member.issym():
            fs.mkdir(posixpath.dirname(path), True)
            fs.symlink(path, member.linkname)
            counts["symlinks"] += 1
        else:
            raise InvalidRequestError(f"{member.name}: devices, FIFOs and sockets cannot be imported")


def _target(base: str, name: str) -> str | None:
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidRequestError(f"archive entry {name!r} climbs out of its directory")
    if not parts:
        return None
    return posixpath.join(base, *parts)
