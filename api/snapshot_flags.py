"""``sessiond serve`` flags for the disk pool and rootfs snapshots (docs/snapshots-and-forks.md)."""
from __future__ import annotations

import argparse
import os


def _size(text: str) -> int:
    from .__main__ import disk_size
    return disk_size(text)


def pool_size(text: str) -> int:
    """``auto`` (-1), ``off`` (0) or a size of at least 1Gi."""
    value = text.strip().lower()
    if value == "auto":
        return -1
    if value == "off":
        return 0
    size = _size(text.strip())
    if size < 1 << 30:
        raise argparse.ArgumentTypeError(f"the disk pool needs at least 1Gi, not {text!r}")
    return size


def add_snapshot_arguments(serve: argparse.ArgumentParser) -> None:
    env = os.environ.get
    group = serve.add_argument_group(
        "rootfs snapshots and forks", "one XFS pool holds every sandbox disk and snapshot, so copies are "
        "reflinks (docs/snapshots-and-forks.md)")
    group.add_argument("--disk-pool-size", type=pool_size, metavar="SIZE|auto|off",
                       default=env("SESSIOND_DISK_POOL_SIZE", "auto"),
                       help="the pool's size when it is made; auto: the data dir's free space then, less "
                            "the disk reserve (sparse: it takes only what is written); off: no pool, snapshots "
                            "are full copies (env SESSIOND_DISK_POOL_SIZE; default %(default)s)")
    group.add_argument("--disk-pool-preallocate", action="store_true",
                       default=env("SESSIOND_DISK_POOL_PREALLOCATE", "") not in ("", "0"),
                       help="allocate the whole pool on the data dir when it is made, so the data dir can never "
                            "run out under it (env SESSIOND_DISK_POOL_PREALLOCATE=1)")
    group.add_argument("--snapshot-quota", type=_size, metavar="SIZE", default=env("SESSIOND_SNAPSHOT_QUOTA", "64Gi"),
                       help="a team's rootfs snapshots together, each counted at the size its disk had "
                            "allocated when it was taken (env SESSIOND_SNAPSHOT_QUOTA; default %(default)s)")


def snapshot_settings(args: argparse.Namespace) -> dict:
    return {"disk_pool_size": int(args.disk_pool_size), "disk_pool_preallocate": bool(args.disk_pool_preallocate),
            "snapshot_quota": int(args.snapshot_quota)}
