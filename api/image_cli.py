"""``sessiond image import|list|rm|pull`` and ``sessiond template build``: the offline image store.

They work on the store directly (no server needs to run): ``--data-dir`` names the server's data
dir, ``--checkpoint-dir`` the shared one of a cluster (then the images live there).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .data_dir import default_data_dir

IMAGE_EXAMPLES = """\
examples:
  sessiond image import ./python-3.12.oci.tar          # prints NAME@sha256:DIGEST
  sessiond image import --name tools ./docker-save.tar
  sessiond image list
  sessiond image rm tools@sha256:4f1c...
  sessiond image pull docker.io/library/debian:trixie  # only where a registry is reachable
"""


def _store_options(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--data-dir", type=Path, default=Path(env("SESSIOND_DATA_DIR") or default_data_dir()),
                        help="the server's data dir (env SESSIOND_DATA_DIR; default %(default)s)")
    parser.add_argument("--checkpoint-dir", type=Path, default=env("SESSIOND_CHECKPOINT_DIR") or None,
                        help="with more than one node: the shared directory, which holds the images "
                             "(env SESSIOND_CHECKPOINT_DIR)")


def add_commands(commands) -> None:
    image = commands.add_parser("image", help="import, list, remove or pull sandbox images",
                                epilog=IMAGE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = image.add_subparsers(dest="verb", required=True, metavar="import|list|rm|pull")
    imp = verbs.add_parser("import", help="an OCI image archive or a `docker save` archive")
    imp.add_argument("file", type=Path)
    imp.add_argument("--name", help="the name shown before @sha256: (default: from the file name)")
    lst = verbs.add_parser("list", help="the imported images")
    rm = verbs.add_parser("rm", help="remove an image (NAME@sha256:DIGEST or sha256:DIGEST)")
    rm.add_argument("reference")
    pull = verbs.add_parser("pull", help="fetch an image from a registry (needs network access to it)")
    pull.add_argument("reference")
    pull.add_argument("--name")
    for parser in (imp, lst, rm, pull):
        _store_options(parser)
    template = commands.add_parser("template", help="build a builtin template's image")
    tverbs = template.add_subparsers(dest="verb", required=True, metavar="build")
    build = tverbs.add_parser("build", help="build the image of a builtin template (coding-agent)")
    build.add_argument("name", choices=("coding-agent",))
    build.add_argument("--cache-dir", type=Path, default=os.environ.get("SESSIOND_BUILD_CACHE") or None,
                       help="where downloads and the last build are kept (env SESSIOND_BUILD_CACHE; "
                            "default DATA_DIR/build-cache)")
    build.add_argument("--rebuild", action="store_true",
                       help="build afresh even when the cache holds a build of the same recipe")
    _store_options(build)


def _say(message: str) -> None:
    sys.stderr.write(f"sessiond: {message}\n")
    sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    from session_supervisor.infra.images import ImageError, ImageStore, store_root

    data_dir = args.data_dir.expanduser().resolve()
    checkpoint_dir = args.checkpoint_dir.expanduser().resolve() if args.checkpoint_dir else None
    store = ImageStore(store_root(data_dir, checkpoint_dir))
    try:
        if args.command == "template":
            from session_supervisor.infra.coding_agent import build_coding_agent
            started = time.monotonic()
            image = build_coding_agent(store, cache_dir=args.cache_dir or data_dir / "build-cache", progress=_say,
                                       rebuild=args.rebuild)
            _say(f"built in {time.monotonic() - started:.0f} s")
            print(image.reference)
        elif args.verb == "import":
            started = time.monotonic()
            image = store.import_archive(args.file, args.name, progress=_say)
            _say(f"imported in {time.monotonic() - started:.1f} s")
            print(image.reference)
        elif args.verb == "pull":
            print(store.pull(args.reference, args.name, progress=_say).reference)
        elif args.verb == "rm":
            print(store.remove(args.reference).reference)
        else:
            for image in store.list():
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(image.imported_at))
                print(f"{image.reference}  {image.size / 2**20:.1f}MiB  {when}")
    except ImageError as error:
        _say(str(error))
        return 1
    return 0
