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
    # Kernel tables per sandbox network (infra/nft_rules.py): tracked connections, new flows a second.
    sandbox_conntrack_max: int = 4096
    sandbox_new_flows: int = 1000
    disk_reserve: int = 64 << 20  # bytes of the data dir's filesystem kept for the server's stores
    disk_quota: str = "auto"  # on | off | auto: a disk of its own per sandbox (infra/sandbox_disk.py)
    # The disk pool and rootfs snapshots (infra/disk_pool.py, docs/snapshots-and-forks.md).
    disk_pool_size: int = -1  # -1: auto (the data dir's free space when made), 0: no pool
    disk_pool_preallocate: bool = False
    snapshot_quota: int = 64 << 30  # per team: its snapshots, each at its disk's allocated size
    volume_size: int = 8 << 30  # a new volume's disk when its create does not say (docs/volumes.md)
    volume_quota: int = 256 << 30  # what one team's volumes and their snapshots may take in all
    # More than one machine (README "More than one machine"): journals, sandbox records and
    # leases in PostgreSQL, workspaces checkpointed into a directory every node shares.
    database_url: str = ""  # "": the embedded default (SQLite per sandbox, one node)
    checkpoint_dir: Path | None = None
    node_id: str = ""
    advertise_url: str = ""  # where the other nodes reach this one (forwarded calls)
    lease_seconds: float = 15.0
    # A sandbox's edges (docs/edges.md): where its public service routes are reached, whether
    # webhooks may go to this machine's own addresses, how often its cgroups are sampled.
    exposure_domain: str = "localhost"  # <sandbox>--p<port>.<domain>; *.localhost needs no DNS
    exposure_scheme: str = "http"  # what public URLs say (TLS may end at a proxy in front)
    exposure_port: int = 0  # the port public URLs name (0: the port this server listens on)
    allow_local_webhooks: bool = False
    metrics_interval: float = 15.0
    # Sandboxes' worth of networks, cgroups, uids and directories made ahead, per template in use
    # (infra/warm_pool.py); 0: every claim makes its own.
    warm_pool: int = 2

    @property
    def clustered(self) -> bool:
        return bool(self.database_url)
