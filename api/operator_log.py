"""What the operator sees of a running server: one log stream, the start-up line, the title.

Sanic is built with ``configure_logging=False`` (api/app.py), so every record, Sanic's
included, goes through the one root handler set up here: no line appears twice.
"""
from __future__ import annotations

import ctypes
import logging
import sys

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
ACCESS_FORMAT = "%(asctime)s access %(host)s %(request)s %(status)s %(byte)s%(duration)s"
LEVELS = ("debug", "info", "warning", "error")
PROCESS_TITLE = "sessiond"
PR_SET_NAME = 15


def configure_logging(level: str, access_log: bool) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)
    root.setLevel(level.upper())
    # A node forwarding calls to another would log every forwarded request at INFO.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, root.level))
    access = logging.getLogger("sanic.access")
    access.propagate = False  # its records carry their fields as extras, not as a message
    access.handlers.clear()
    if access_log:
        line = logging.StreamHandler(sys.stderr)
        line.setFormatter(logging.Formatter(ACCESS_FORMAT, defaults={"duration": ""}))
        access.addHandler(line)
        access.setLevel(logging.INFO)


def startup_line(url: str, settings, runtime_name: str) -> str:
    runtime = "hardened (bubblewrap)" if runtime_name == "bwrap" else "host (NO isolation)"
    if not settings.token:
        auth = "none (--no-auth: loopback Host and same-origin requests only)"
    elif settings.token_file is not None:
        auth = f"token in {settings.token_file}"
    else:
        auth = "token (--token / SESSIOND_TOKEN)"
    return (f"sessiond listening on {url} data={settings.data_dir} runtime={runtime} auth={auth} "
            f"console={url}/ui/")


def _without_secrets(argv: list[str]) -> list[str]:
    shown = []
    for arg in argv:
        if shown and shown[-1] == "--token":
            arg = "***"
        elif arg.startswith("--token="):
            arg = "--token=***"
        shown.append(arg)
    return shown


def set_process_title() -> None:
    """``sessiond`` in ps/top instead of ``python3 -m api serve``.

    setproctitle rewrites the command line (``ps aux``); prctl(PR_SET_NAME) sets the
    kernel's comm (``ps -e``, ``pgrep``, ``top``), which is all there is without it.
    """
    try:
        import setproctitle
        setproctitle.setproctitle(" ".join([PROCESS_TITLE, *_without_secrets(sys.argv[1:])]))
    except ImportError:
        pass
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, PROCESS_TITLE.encode(), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the title is cosmetic
