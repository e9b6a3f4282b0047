"""``sessionctl volume create|list|get|delete``: a team's sandbox volumes (``/api/v1/sandboxvolumes``).

A volume is a disk that outlives its sandboxes; ``sessionctl sandbox claim --volume ID[:PATH]``
binds one at claim (``/workspace`` unless PATH says otherwise). ``create -q`` prints only the id,
for ``VOL=$(sessionctl volume create -q)``. Deleting a bound volume is refused (exit 4, the message
names the sandboxes) unless ``--force``; deleting an unknown id succeeds, as the API's delete does.
"""
from __future__ import annotations

import sys

import orjson

from .cli_output import fields, table
from .operations import Call, q

VOLUMES = "/api/v1/sandboxvolumes"


def register(nouns, common, formatter, verb) -> None:
    """``volume`` as a noun of its own (``nouns``: the top-level subparsers; ``verb``: cli_parser._verb)."""
    noun = nouns.add_parser("volume", help="create, list, inspect and delete sandbox volumes",
                            formatter_class=formatter, description=__doc__.split("\n\n")[1].replace("\n", " "))
    group = noun.add_subparsers(dest="verb", required=True, metavar="VERB")
    create = verb(group, "create", common, volume_create, "create a volume",
                  "VOL=$(sessionctl volume create --size 2Gi -q)")
    create.add_argument("--access-mode", default="RWO", type=str.upper, choices=("RWO", "ROX", "RWX"),
                        help="RWO: one sandbox at a time (default); ROX: read-only in any number")
    create.add_argument("--size", metavar="SIZE", help="its disk, e.g. 2Gi (default: the server's --volume-size)")
    create.add_argument("--from-snapshot", metavar="SNAPSHOT", help="start as a copy of this volume snapshot")
    create.add_argument("-q", "--quiet", action="store_true", help="print only the volume id")
    listing = verb(group, "list", common, volume_list, "list the team's volumes", "sessionctl volume list -q")
    listing.add_argument("-q", "--quiet", action="store_true", help="print only ids")
    get = verb(group, "get", common, volume_get, "show a volume", 'sessionctl volume get "$VOL"')
    get.add_argument("volume", metavar="ID", help="the volume id")
    delete = verb(group, "delete", common, volume_delete, "delete a volume and its snapshots",
                  'sessionctl volume delete "$VOL"')
    delete.add_argument("volume", metavar="ID", help="the volume id")
    delete.add_argument("--force", action="store_true", help="delete it even while a sandbox binds it")


def volume_create(client, args) -> int:
    body: dict = {"access_mode": args.access_mode}
    if args.size:
        body["size"] = args.size
    if args.from_snapshot:
        body["snapshot_id"] = args.from_snapshot
    volume = client._run(Call("POST", VOLUMES, (201,), body=body))
    return _show(args, volume, volume["id"])


def volume_list(client, args) -> int:
    volumes = client._run(Call("GET", VOLUMES, (200,)))
    if args.quiet:
        sys.stdout.write("".join(v["id"] + "\n" for v in volumes))
    elif args.output == "json":
        sys.stdout.write(orjson.dumps(volumes, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(table(["ID", "ACCESS", "SIZE", "USED", "BOUND TO", "CREATED"],
                               [[v["id"], v.get("access_mode"), _size(v.get("size_bytes")),
                                 _size(v.get("metered_storage_bytes")), ",".join(v.get("mounted_by") or []),
                                 v["created_at"]] for v in volumes]))
    return 0


def volume_get(client, args) -> int:
    return _show(args, client._run(Call("GET", f"{VOLUMES}/{q(args.volume)}", (200,))))


def volume_delete(client, args) -> int:
    params = {"force": "true"} if args.force else None
    client._run(Call("DELETE", f"{VOLUMES}/{q(args.volume)}", (200,), params=params))
    if args.output == "json":
        sys.stdout.write('{"deleted": true}\n')
    else:
        sys.stdout.write(f"volume {args.volume} deleted\n")
    return 0


def _show(args, volume: dict, quiet_id: str | None = None) -> int:
    if getattr(args, "quiet", False) and quiet_id is not None:
        sys.stdout.write(quiet_id + "\n")
    elif args.output == "json":
        sys.stdout.write(orjson.dumps(volume, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(fields([("id", volume["id"]), ("access mode", volume.get("access_mode")),
                                 ("size", _size(volume.get("size_bytes"))),
                                 ("used", _size(volume.get("metered_storage_bytes"))),
                                 ("bound to", ", ".join(volume.get("mounted_by") or [])),
                                 ("forked from", volume.get("source_volume_id")),
                                 ("team", volume.get("team_id")), ("created", volume.get("created_at"))]))
    return 0


def _size(value) -> str | None:
    if not isinstance(value, int):
        return None
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value}B"
