"""``sessionctl sandbox snapshot|snapshots|unsnapshot|restore|fork``: a sandbox's rootfs copies.

``snapshot SB`` takes a rootfs snapshot (of a running or a paused sandbox) and prints its id;
``snapshots SB`` lists them; ``unsnapshot SNAP`` deletes one; ``restore SB SNAP`` makes a paused
sandbox's disk a copy of a snapshot (it stays paused); ``fork SB`` makes a paused copy of a
sandbox and prints the child's id. How copies are made and what they cost:
docs/snapshots-and-forks.md.
"""
from __future__ import annotations

import sys

import orjson

from .operations import Call, q, sandbox_path

SNAPSHOTS = "/api/v1/sandbox-rootfs-snapshots"


def register(group, common, verb) -> None:
    """Add the verbs to the ``sandbox`` group of the parser (``verb`` is cli_parser._verb)."""
    snapshot = verb(group, "snapshot", common, sandbox_snapshot, "take a rootfs snapshot of a sandbox",
                    'SNAP=$(sessionctl sandbox snapshot "$SB" --name before-upgrade)')
    snapshot.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…), running or paused")
    snapshot.add_argument("--name", help="a name to know it by")
    snapshot.add_argument("--description", help="what it holds")
    snapshot.add_argument("--expires-at", metavar="TIME", help="RFC 3339 time it is deleted at")
    listing = verb(group, "snapshots", common, sandbox_snapshots, "list a sandbox's rootfs snapshots",
                   'sessionctl sandbox snapshots "$SB"')
    listing.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…)")
    listing.add_argument("-q", "--quiet", action="store_true", help="print only ids")
    delete = verb(group, "unsnapshot", common, sandbox_unsnapshot, "delete a rootfs snapshot",
                  'sessionctl sandbox unsnapshot "$SNAP"')
    delete.add_argument("snapshot", metavar="SNAP", help="the snapshot id (rootfs-snapshot-…)")
    restore = verb(group, "restore", common, sandbox_restore, "make a paused sandbox's rootfs a copy of a snapshot",
                   'sessionctl sandbox restore "$SB" "$SNAP"')
    restore.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…), paused")
    restore.add_argument("snapshot", metavar="SNAP", help="the snapshot id, of this or another sandbox of the team")
    fork = verb(group, "fork", common, sandbox_fork, "make a paused copy of a sandbox and print its id",
                'CHILD=$(sessionctl sandbox fork "$SB")')
    fork.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…), running or paused")
    fork.add_argument("--ttl", type=int, help="the child's ttl in seconds (default: the source's deadline)")
    fork.add_argument("--hard-ttl", type=int, help="the child's hard ttl in seconds (default: the source's)")


def _out(args, data, line: str) -> int:
    sys.stdout.write(orjson.dumps(data).decode() + "\n" if args.output == "json" else line + "\n")
    return 0


def sandbox_snapshot(client, args) -> int:
    body = {k: v for k, v in (("name", args.name), ("description", args.description),
                              ("expires_at", args.expires_at)) if v}
    data = client._run(Call("POST", sandbox_path(args.sandbox) + "/snapshots", (201,), body=body))
    return _out(args, data, data["id"])


def sandbox_snapshots(client, args) -> int:
    data = client._run(Call("GET", sandbox_path(args.sandbox) + "/snapshots", (200,)))
    if args.quiet or args.output != "json":
        lines = [s["id"] if args.quiet else f"{s['id']}  {s['created_at']}  {s.get('name', '')}".rstrip()
                 for s in data["snapshots"]]
        sys.stdout.write("".join(line + "\n" for line in lines))
        return 0
    return _out(args, data, "")


def sandbox_unsnapshot(client, args) -> int:
    data = client._run(Call("DELETE", f"{SNAPSHOTS}/{q(args.snapshot)}", (200,)))
    return _out(args, data, f"deleted {args.snapshot}")


def sandbox_restore(client, args) -> int:
    data = client._run(Call("POST", sandbox_path(args.sandbox) + "/rootfs/restore", (200,),
                            body={"snapshot_id": args.snapshot}))
    return _out(args, data, f"restored {args.sandbox} from {args.snapshot} (paused)")


def sandbox_fork(client, args) -> int:
    config = {k: v for k, v in (("ttl", args.ttl), ("hard_ttl", args.hard_ttl)) if v is not None}
    data = client._run(Call("POST", sandbox_path(args.sandbox) + "/fork", (201,),
                            body={"config": config} if config else {}))
    return _out(args, data, data["sandbox"]["id"])
