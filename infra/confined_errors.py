"""OS errors of the confined file operations, as the API's domain errors (the reference's codes)."""
from __future__ import annotations

import errno

from session_supervisor.domain.model.errors import (
    FileError,
    FileNotFoundInSandboxError,
    InsufficientStorageError,
    InvalidRequestError,
    NotADirectoryInSandboxError,
    NotAFileInSandboxError,
    PathExistsError,
    PathOutsideSandboxError,
)


def translate(exc: OSError, path: str) -> Exception:
    if exc.errno == errno.ENOENT:
        return FileNotFoundInSandboxError(f"file not found: {path}")
    if exc.errno == errno.EEXIST or exc.errno == errno.ENOTEMPTY:
        return PathExistsError(f"path exists: {path}")
    if exc.errno == errno.ENOTDIR:
        return NotADirectoryInSandboxError(f"not a directory: {path}")
    if exc.errno in (errno.EISDIR,):
        return NotAFileInSandboxError(f"is a directory: {path}")
    if exc.errno in (errno.ENAMETOOLONG, errno.EINVAL, errno.EILSEQ):
        return InvalidRequestError(f"invalid path: {exc.strerror}: {path}")
    if exc.errno == errno.ELOOP:  # a component was swapped for a symlink mid-walk
        return PathOutsideSandboxError(f"path changed while it was resolved: {path}")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return InsufficientStorageError(f"no space left for {path}: {exc.strerror}")
    if exc.errno == errno.ENXIO:  # a socket (or a FIFO without a writer) opened as a file
        return NotAFileInSandboxError(f"not a regular file: {path}")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.EXDEV):
        return PathOutsideSandboxError(f"permission denied: {path}")
    return FileError(f"{exc.strerror or exc}: {path}")
