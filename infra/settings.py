"""Server settings: command-line flags first, then SESSIOND_* environment variables."""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path


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
    sandbox_pids_max: int = 1024  # processes per sandbox under the hardened runtime (pids.max)

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def check(self) -> None:
        if not self.token and not self.is_loopback:
            raise SystemExit(
                f"refusing to listen on {self.host} without a token: pass --token or set SESSIOND_TOKEN "
                "(without a token the server only binds a loopback address)")
