"""``sessiond serve``: the only place that reads the environment (rule 10)."""
from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from pathlib import Path

from infra.bootstrap import Container
from infra.settings import Settings, default_data_dir

from .app import create_app

log = logging.getLogger("sessiond")

# glibc otherwise maps and unmaps a fresh region for every 256 KiB output chunk
# (ingest-path.md: +13% ingest, -18% CPU). glibc reads these once, at process start.
MALLOC_TUNING = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "536870912",
                 "MALLOC_TOP_PAD_": "67108864"}


def reexec_with_malloc_tuning(argv: list[str]) -> None:
    if all(key in os.environ for key in MALLOC_TUNING):
        return
    env = {**os.environ, **MALLOC_TUNING}
    os.execve(sys.executable, [sys.executable, "-m", "api", *argv], env)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sessiond", description="Session supervisor daemon")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP server")
    serve.add_argument("--host", default=os.environ.get("SESSIOND_HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(os.environ.get("SESSIOND_PORT", "8780")))
    serve.add_argument("--data-dir", type=Path,
                       default=Path(os.environ.get("SESSIOND_DATA_DIR") or default_data_dir()))
    serve.add_argument("--token", default=os.environ.get("SESSIOND_TOKEN", ""))
    serve.add_argument("--runtime", choices=("bwrap", "host"),
                       default=os.environ.get("SESSIOND_RUNTIME", "bwrap"))
    serve.add_argument("--network", choices=("auto", "netns", "host"),  # issue 12: infra/netns.py
                       default=os.environ.get("SESSIOND_NETWORK", "auto"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    reexec_with_malloc_tuning(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = Settings(host=args.host, port=args.port, data_dir=args.data_dir.resolve(),
                        token=args.token, runtime=args.runtime, network=args.network)
    settings.check()
    if not settings.token:
        log.warning("no token configured: accepting unauthenticated requests on loopback %s", settings.host)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    container = Container(settings)
    if settings.runtime == "host":
        log.warning("runtime 'host': sessions run WITHOUT sandbox isolation")
    app = create_app(container)
    app.run(sock=listening_socket(settings.host, settings.port), single_process=True,
            access_log=False, motd=False)


def listening_socket(host: str, port: int) -> socket.socket:
    """Bound here because Sanic marks its own socket inheritable: every session process
    (uvloop closes only close-on-exec fds) would then hold the port, and a server restarted
    after a crash could not bind it while the old generation's processes still run."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    return socket.create_server((host, port), family=family, backlog=100)


if __name__ == "__main__":
    main()
