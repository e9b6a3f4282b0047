"""The data dir's two operator files: the owner lock and the generated token.

One server per data dir: two servers on one store both reap, restart and commit the
same sessions (seq gaps, UNIQUE violations, each other's children killed), so the
lock is taken before anything under the dir is opened and held for the process's life.
"""
from __future__ import annotations

import errno
import fcntl
import ipaddress
import os
import secrets
from pathlib import Path

# The client keeps its own copy of these three conventions (api/client/local_server.py) so that
# neither side imports the other; tests/test_layering.py checks that the two copies agree.
TOKEN_FILE_NAME = "token"
LOCK_FILE_NAME = "lock"
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "sessiond"


def is_loopback_host(host: str) -> bool:
    """A loopback name or address (brackets and a trailing dot allowed, as in a Host header)."""
    host = host.strip().strip("[]").rstrip(".").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class DataDirError(Exception):
    """The data dir cannot be used; the message is the one line the operator sees."""


class DataDirInUse(DataDirError):
    pass


PRIVATE_MODES = (0o700, 0o750)  # the server's user (and at most its group, read-only) reaches it


def prepare(data_dir: Path) -> None:
    """Create the data dir, 0700 (0750 is kept): workspaces, /tmp dirs and stores live under it,
    so no other local user may traverse it. The sandboxes' own processes never need to: their
    workspace and /tmp are bound onto a staging point by the root part of the launch chain."""
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise DataDirError(f"cannot create data dir {data_dir}: {exc.strerror}") from exc
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise DataDirError(f"data dir {data_dir} is not writable")
    info = data_dir.stat()
    if info.st_uid == os.geteuid() and info.st_mode & 0o777 not in PRIVATE_MODES:
        try:
            os.chmod(data_dir, 0o700)
        except OSError as exc:
            raise DataDirError(f"cannot make data dir {data_dir} private (0700): {exc.strerror}") from exc


def lock(data_dir: Path) -> int:
    """Take ``<data>/lock`` (flock, released by the kernel when the process ends) or raise.

    The fd is close-on-exec (Python's default), so session processes never hold it and a
    server restarted while an old generation's processes still run can take it again.
    """
    path = data_dir / LOCK_FILE_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise DataDirError(f"cannot open {path}: {exc.strerror}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise DataDirInUse(f"data dir {data_dir} is in use by another sessiond (pid {holder}; "
                               f"lock {path})") from None
        raise DataDirError(f"cannot lock {path}: {exc.strerror}") from exc
    os.fchmod(fd, 0o600)  # a lock file of an older release was 0644
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def token_file(data_dir: Path) -> Path:
    return data_dir / TOKEN_FILE_NAME


def load_or_create_token(data_dir: Path) -> str:
    """The token in ``<data>/token``, created (mode 0600, 128 random bits) on first start."""
    path = token_file(data_dir)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_token(path)
    token = secrets.token_hex(16)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return token


def read_token(path: Path) -> str:
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)  # never leave a readable token behind
    token = path.read_text().strip()
    if not token:
        raise DataDirError(f"token file {path} is empty: delete it to generate a new one")
    return token
