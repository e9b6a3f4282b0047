"""``sessiond serve``: the only place that reads the environment (rule 10)."""
from __future__ import annotations

import argparse
import errno
import gc
import logging
import os
import socket
import sys
from pathlib import Path

from session_supervisor.infra.settings import Settings

from . import image_cli
from .data_dir import default_data_dir, is_loopback_host
from .edge_flags import add_edge_arguments, edge_settings
from .flag_types import whole_number
from .snapshot_flags import add_snapshot_arguments, snapshot_settings
from .operator_log import LEVELS, configure_logging, set_process_title, startup_line

log = logging.getLogger("sessiond")

# glibc otherwise maps and unmaps a fresh region for every 256 KiB output chunk
# (+13% ingest, -18% CPU in the ingest benchmark). glibc reads these once, at process start.
GC_YOUNG_THRESHOLD = 50_000
MALLOC_TUNING = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "536870912",
                 "MALLOC_TOP_PAD_": "67108864"}

SERVE_EXAMPLES = """\
examples:
  sessiond serve                                  # loopback :8780, token generated in DATA_DIR/token
  sessiond serve --port 9000 --data-dir /srv/sessiond --log-level debug --access-log
  sessiond serve --host 0.0.0.0 --token "$(cat /etc/sessiond/token)"
  sessiond serve --no-auth                        # loopback only; browsers' cross-origin calls refused
"""


def reexec_with_malloc_tuning(argv: list[str]) -> None:
    if all(key in os.environ for key in MALLOC_TUNING):
        return
    env = {**os.environ, **MALLOC_TUNING}
    os.execve(sys.executable, [sys.executable, "-m", "session_supervisor.api", *argv], env)


# A pid bound: up to the kernel's PID_MAX_LIMIT.
positive_int = whole_number(1, 4_194_304)
# A per-sandbox kernel-table bound: 0 (none) up to the conntrack table's own size.
table_bound = whole_number(0, 4_194_304)


_SIZE_UNITS = {"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
               "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def disk_size(text: str) -> int:
    """Bytes, plain or with a Kubernetes suffix (``256Mi``, ``1Gi``, ``500M``)."""
    number = text.rstrip("KMGTi")
    unit = text[len(number):]
    if not number.isdigit() or unit not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (bytes, or e.g. 256Mi, 1Gi)")
    return int(number) * _SIZE_UNITS[unit]


warm_pool_size = whole_number(0, 64)  # warm units per template shape


def lease_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 2 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be between 2 and 3600 seconds, not {value}")
    return value


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sessiond", description="Session supervisor daemon: durable, "
                                     "event-sourced process sessions inside sandboxes.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="serve|image|template")
    serve = commands.add_parser(
        "serve", help="run the HTTP server", epilog=SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve the Sandbox0 API (/api/v1), the AeroLVM facade (/v1), /metrics and /healthz.")
    env = os.environ.get
    serve.add_argument("--host", default=env("SESSIOND_HOST", "127.0.0.1"),
                       help="address to bind (env SESSIOND_HOST; default %(default)s)")
    serve.add_argument("--port", type=int, default=int(env("SESSIOND_PORT", "8780")),
                       help="TCP port (env SESSIOND_PORT; default %(default)s)")
    serve.add_argument("--data-dir", type=Path, default=Path(env("SESSIOND_DATA_DIR") or default_data_dir()),
                       help="journals, workspaces, the lock and the token file (env SESSIOND_DATA_DIR; "
                            "default %(default)s)")
    auth = serve.add_mutually_exclusive_group()
    auth.add_argument("--token", default=env("SESSIOND_TOKEN", ""),
                      help="bearer token every call must send (env SESSIOND_TOKEN; default: generated "
                           "once into DATA_DIR/token, mode 0600)")
    auth.add_argument("--no-auth", action="store_true",
                      help="accept calls without a token: loopback only, and requests with a foreign "
                           "Host or Origin header are refused (403)")
    serve.add_argument("--runtime", choices=("bwrap", "host"), default=env("SESSIOND_RUNTIME", "bwrap"),
                       help="bwrap: each sandbox under bubblewrap; host: NO isolation (env "
                            "SESSIOND_RUNTIME; default %(default)s)")
    serve.add_argument("--network", choices=("auto", "netns", "host"), default=env("SESSIOND_NETWORK", "auto"),
                       help="netns: a network namespace per sandbox (needs root, ip, nft); host: share the "
                            "host's network; auto: netns when it works here (env SESSIOND_NETWORK; "
                            "default %(default)s)")
    serve.add_argument("--sandbox-pids-max", type=positive_int, metavar="N",
                       default=env("SESSIOND_SANDBOX_PIDS_MAX", "1024"),
                       help="processes per sandbox under the hardened runtime: a fork bomb stops there "
                            "(env SESSIOND_SANDBOX_PIDS_MAX; default %(default)s)")
    serve.add_argument("--sandbox-conntrack-max", type=table_bound, metavar="N",
                       default=env("SESSIOND_SANDBOX_CONNTRACK_MAX", "4096"),
                       help="connections one sandbox may have in the host's conntrack table; past it new "
                            "flows are dropped (0: no cap; env SESSIOND_SANDBOX_CONNTRACK_MAX; default %(default)s)")
    serve.add_argument("--sandbox-new-flows", type=table_bound, metavar="N",
                       default=env("SESSIOND_SANDBOX_NEW_FLOWS", "1000"),
                       help="new connections (flows) a second one sandbox may open (0: no limit; env "
                            "SESSIOND_SANDBOX_NEW_FLOWS; default %(default)s)")
    serve.add_argument("--disk-reserve", type=disk_size, metavar="SIZE",
                       default=env("SESSIOND_DISK_RESERVE", "64Mi"),
                       help="room on the data dir's filesystem kept for the server's own stores: claims, "
                            "uploads and mkdirs that would use it get 507 (env SESSIOND_DISK_RESERVE; "
                            "default %(default)s)")
    serve.add_argument("--disk-quota", choices=("auto", "on", "off"), default=env("SESSIOND_DISK_QUOTA", "auto"),
                       help="on: each sandbox writes to a disk of its own, its ephemeral_storage (default "
                            "8Gi; needs root and loop devices); off: on the data dir's filesystem, unbounded; "
                            "auto: on when it works here (env SESSIOND_DISK_QUOTA; default %(default)s)")
    serve.add_argument("--volume-size", type=disk_size, metavar="SIZE", default=env("SESSIOND_VOLUME_SIZE", "8Gi"),
                       help="the disk of a new volume whose create names no size (env SESSIOND_VOLUME_SIZE; "
                            "default %(default)s)")
    serve.add_argument("--volume-quota", type=disk_size, metavar="SIZE",
                       default=env("SESSIOND_VOLUME_QUOTA", "256Gi"),
                       help="what one team's volumes (their sizes) and volume snapshots (their blocks) may "
                            "take in all: past it 429 quota_exceeded (env SESSIOND_VOLUME_QUOTA; default %(default)s)")
    serve.add_argument("--warm-pool", type=warm_pool_size, metavar="N", default=env("SESSIOND_WARM_POOL", "2"),
                       help="sandboxes' worth of networks, cgroups, uids and disks kept made ahead for each "
                            "template in use, so a claim takes them instead of making them; 0: none "
                            "(env SESSIOND_WARM_POOL; default %(default)s)")
    cluster = serve.add_argument_group(
        "more than one machine", "journals in PostgreSQL, workspaces in a shared directory, any node serves "
        "any sandbox (README: More than one machine)")
    cluster.add_argument("--database-url", metavar="URL", default=env("SESSIOND_DATABASE_URL", ""),
                         help="postgresql://... (a unix socket: postgresql:///DB?host=/run/postgresql); "
                              "without it the server keeps everything in DATA_DIR (env SESSIOND_DATABASE_URL)")
    cluster.add_argument("--checkpoint-dir", type=Path, metavar="DIR", default=env("SESSIOND_CHECKPOINT_DIR") or None,
                         help="shared directory for workspace checkpoints, the same on every node "
                              "(env SESSIOND_CHECKPOINT_DIR; required with --database-url)")
    cluster.add_argument("--node-id", metavar="NAME", default=env("SESSIOND_NODE_ID", ""),
                         help="this node's unique name (env SESSIOND_NODE_ID; default: the host name and port)")
    cluster.add_argument("--advertise-url", metavar="URL", default=env("SESSIOND_ADVERTISE_URL", ""),
                         help="where the other nodes reach this one (env SESSIOND_ADVERTISE_URL; "
                              "default http://HOST:PORT)")
    cluster.add_argument("--lease-seconds", type=lease_seconds, metavar="N",
                         default=env("SESSIOND_LEASE_SECONDS", "15"),
                         help="a sandbox whose node stopped renewing for this long moves to another node "
                              "(env SESSIOND_LEASE_SECONDS; default %(default)s)")
    add_edge_arguments(serve)
    add_snapshot_arguments(serve)
    serve.add_argument("--log-level", choices=LEVELS, default=env("SESSIOND_LOG_LEVEL", "info"),
                       help="env SESSIOND_LOG_LEVEL; default %(default)s")
    serve.add_argument("--access-log", action="store_true",
                       default=env("SESSIOND_ACCESS_LOG", "") not in ("", "0"),
                       help="one line per request (env SESSIOND_ACCESS_LOG=1; default off)")
    image_cli.add_commands(commands)
    return parser.parse_args(argv)


def fail(message: str) -> None:
    """The one-line error the operator sees instead of a traceback."""
    sys.stderr.write(f"sessiond: {message}\n")
    sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.command in ("image", "template"):
        sys.exit(image_cli.run(args))
    reexec_with_malloc_tuning(argv)
    set_process_title()
    configure_logging(args.log_level, args.access_log)
    if args.no_auth and not is_loopback_host(args.host):
        fail(f"refusing --no-auth on {args.host}: without a token the server only binds a loopback address "
             "(drop --no-auth: a token is generated into DATA_DIR/token)")
    from . import data_dir
    data = args.data_dir.expanduser().resolve()
    try:
        data_dir.prepare(data)
        lock_fd = data_dir.lock(data)  # before anything under the dir is opened; held until exit
        token, token_file = args.token, None
        if not token and not args.no_auth:
            token, token_file = data_dir.load_or_create_token(data), data_dir.token_file(data)
    except data_dir.DataDirError as error:
        fail(str(error))
    settings = Settings(host=args.host, port=args.port, data_dir=data, token=token, runtime=args.runtime,
                        network=args.network, token_file=token_file, sandbox_pids_max=args.sandbox_pids_max,
                        sandbox_conntrack_max=args.sandbox_conntrack_max, sandbox_new_flows=args.sandbox_new_flows,
                        disk_reserve=args.disk_reserve, disk_quota=args.disk_quota,
                        volume_size=args.volume_size, volume_quota=args.volume_quota, warm_pool=args.warm_pool,
                        **cluster_settings(args), **edge_settings(args), **snapshot_settings(args))
    serve(settings, access_log=args.access_log)
    os.close(lock_fd)


def cluster_settings(args: argparse.Namespace) -> dict:
    """The more-than-one-machine settings, checked: one line for what is missing."""
    if not args.database_url:
        for flag, value in (("--checkpoint-dir", args.checkpoint_dir), ("--node-id", args.node_id),
                            ("--advertise-url", args.advertise_url)):
            if value:
                fail(f"{flag} needs --database-url (without it the server runs on one machine)")
        return {}
    if not args.database_url.startswith(("postgresql://", "postgres://")):
        fail("--database-url must be a postgresql:// URL")
    if args.checkpoint_dir is None:
        fail("--database-url needs --checkpoint-dir: a directory every node shares, for workspaces")
    checkpoint_dir = args.checkpoint_dir.expanduser().resolve()
    if not checkpoint_dir.is_dir() or not os.access(checkpoint_dir, os.W_OK):
        fail(f"checkpoint dir {checkpoint_dir} is not a writable directory")
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
    advertise = args.advertise_url or (f"http://[{host}]:{args.port}" if ":" in host else f"http://{host}:{args.port}")
    return {"database_url": args.database_url, "checkpoint_dir": checkpoint_dir,
            "node_id": args.node_id or f"{socket.gethostname()}:{args.port}", "advertise_url": advertise.rstrip("/"),
            "lease_seconds": float(args.lease_seconds)}


def serve(settings: Settings, *, access_log: bool) -> None:
    from session_supervisor.infra.bootstrap import Container
    from session_supervisor.infra.bubblewrap import LauncherUnavailableError

    from .app import create_app
    try:
        container = Container(settings)
    except LauncherUnavailableError as error:
        fail(f"{error} (install bubblewrap, or run with --runtime host: no isolation)")
    try:
        sock = listening_socket(settings.host, settings.port)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            fail(f"port {settings.port} on {settings.host} is already in use (another sessiond? "
                 "pick one with --port)")
        fail(f"cannot listen on {settings.host}:{settings.port}: {error.strerror or error}")
    host, port = sock.getsockname()[:2]
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    app = create_app(container)

    @app.after_server_start
    async def announce(app):
        tune_garbage_collector()
        # Printed whatever --log-level says: it is how an operator finds the URL and the token.
        sys.stderr.write(startup_line(url, settings, container.launcher.name) + "\n")
        sys.stderr.flush()

    app.run(sock=sock, single_process=True, access_log=access_log, motd=False)


def tune_garbage_collector() -> None:
    """Fewer cyclic collections: a journal page or a commit tick allocates tens of thousands of
    short-lived containers (rows, field dicts, events), and with the default threshold (700) a
    young-generation collection ran every few dozen events; measured on a replay of 124k
    small events, collection was a fifth of the time (4.8 -> 3.8 µs an event). Almost all of
    those objects die by reference counting; the threshold bounds what waits for a collection.
    What exists once the server is up is frozen out of every later collection."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 100)


def listening_socket(host: str, port: int) -> socket.socket:
    """Bound here because Sanic marks its own socket inheritable: every session process
    (uvloop closes only close-on-exec fds) would then hold the port, and a server restarted
    after a crash could not bind it while the old generation's processes still run."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as error:
        raise OSError(errno.EADDRNOTAVAIL, f"cannot resolve {host!r}: {error.strerror}") from None
    return socket.create_server((host, port), family=family, backlog=100)


if __name__ == "__main__":
    main()
