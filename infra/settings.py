"""Server settings: command-line flags first, then SESSIOND_* environment variables."""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE_NAME = "lock"
TOKEN_FILE_NAME = "token"
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def is_loopback_host(host: str) -> bool:
    """A loopback name or address (brackets and a trailing dot allowed, as in a Host header)."""
    host = host.strip().strip("[]").rstrip(".").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "sessiond"


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8780
    data_dir: Path = Path(".")
    token: str = ""
    runtime: str = "bwrap"
    token_file: Path | None = None  # where the token came from, when it is the generated one

    @property
    def is_loopback(self) -> bool:
        return is_loopback_host(self.host)

    @property
    def auth(self) -> bool:
        return bool(self.token)

    def check(self) -> None:
        if not self.token and not self.is_loopback:
            raise SystemExit(
                f"sessiond: refusing --no-auth on {self.host}: without a token the server only binds "
                "a loopback address (drop --no-auth, or pass --token)")
