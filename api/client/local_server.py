"""Where a server on this machine keeps what a local client needs: its data dir and token file.

``sessiond serve`` writes ``<data dir>/token`` (api/data_dir.py); a client reads it only
for a loopback URL and only when no token was given (argument or SESSIOND_TOKEN): the
file proves the caller may read the server's data dir, which a local operator can do
anyway, and a remote URL never gets a local secret sent to it. The server keeps its own
copy (api/data_dir.py), so neither side imports the other; tests/test_layering.py checks
that the copies agree.
"""
from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_URL = "http://127.0.0.1:8780"
TOKEN_FILE_NAME = "token"
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


class BadUrl(ValueError):
    """A server URL that is neither http:// nor https://."""


def base_url(url: str | None) -> str:
    """The server's base URL; ``HOST:PORT`` without a scheme means ``http://HOST:PORT``."""
    url = (url or os.environ.get("SESSIOND_URL") or DEFAULT_URL).strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadUrl(f"server URL {url!r}: expected http://HOST:PORT (or https://)")
    try:
        parts.port  # a port that is not a number raises here, not deep in a request
    except ValueError:
        raise BadUrl(f"server URL {url!r}: the port is not a number") from None
    return url


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
