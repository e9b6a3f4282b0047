"""Server settings, decided by ``sessiond serve`` (api/__main__.py) from flags and SESSIOND_*."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8780
    data_dir: Path = Path(".")
    token: str = ""  # "": --no-auth (loopback only, foreign Host/Origin refused: api/auth.py)
    runtime: str = "bwrap"
    network: str = "auto"  # netns | host | auto (netns when root with bwrap; see infra/netns.py)
    token_file: Path | None = None  # where the token came from, when it is the generated one
    sandbox_pids_max: int = 1024  # processes per sandbox under the hardened runtime (pids.max)
