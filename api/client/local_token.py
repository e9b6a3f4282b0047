"""Finding the token of a server on this machine: ``<data dir>/token``, written by ``sessiond serve``.

Only for a loopback URL and only when no token was given (argument or SESSIOND_TOKEN):
the file proves the caller may read the server's data dir, which is what a local
operator can do anyway; a remote URL never gets a local secret sent to it.
"""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from infra.settings import TOKEN_FILE_NAME, default_data_dir, is_loopback_host


def data_dir_from(data_dir: str | os.PathLike | None) -> Path:
    return Path(data_dir or os.environ.get("SESSIOND_DATA_DIR") or default_data_dir()).expanduser()


def resolve_token(token: str | None, url: str, data_dir: str | os.PathLike | None = None) -> str:
    """The explicit token, else SESSIOND_TOKEN, else a local server's token file, else ""."""
    if token is not None:
        return token
    token = os.environ.get("SESSIOND_TOKEN", "")
    if token or not is_loopback_host(urlsplit(url).hostname or ""):
        return token
    try:
        return (data_dir_from(data_dir) / TOKEN_FILE_NAME).read_text().strip()
    except OSError:  # no such server here, or a --no-auth one
        return ""
