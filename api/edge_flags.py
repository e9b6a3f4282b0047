"""``sessiond serve`` flags for a sandbox's edges: service exposure, webhooks and metrics."""
from __future__ import annotations

import argparse
import os
import re

from .flag_types import whole_number

_DOMAIN = re.compile(r"^(?=.{1,200}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


def domain(text: str) -> str:
    value = text.strip().strip(".").lower()
    if not _DOMAIN.match(value):
        raise argparse.ArgumentTypeError(f"not a DNS name: {text!r}")
    return value


port = whole_number(0, 65535, "a port")


def interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.2 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be between 0.2 and 3600 seconds, not {value}")
    return value


def add_edge_arguments(serve: argparse.ArgumentParser) -> None:
    env = os.environ.get
    edges = serve.add_argument_group(
        "a sandbox's edges", "public service routes, webhooks and metrics (docs/edges.md)")
    edges.add_argument("--exposure-domain", type=domain, metavar="DOMAIN",
                       default=env("SESSIOND_EXPOSURE_DOMAIN", "localhost"),
                       help="service routes answer on <sandbox>--p<port>.DOMAIN; browsers resolve "
                            "*.localhost to this machine (env SESSIOND_EXPOSURE_DOMAIN; default %(default)s)")
    edges.add_argument("--exposure-scheme", choices=("http", "https"), default=env("SESSIOND_EXPOSURE_SCHEME", "http"),
                       help="the scheme public URLs name, https behind a TLS proxy (env "
                            "SESSIOND_EXPOSURE_SCHEME; default %(default)s)")
    edges.add_argument("--exposure-port", type=port, metavar="PORT", default=env("SESSIOND_EXPOSURE_PORT", "0"),
                       help="the port public URLs name; 0: the port this server listens on (env "
                            "SESSIOND_EXPOSURE_PORT)")
    edges.add_argument("--allow-local-webhooks", action="store_true",
                       default=env("SESSIOND_ALLOW_LOCAL_WEBHOOKS", "") not in ("", "0"),
                       help="let webhooks go to loopback, link-local and this machine's own addresses "
                            "(refused by default: the server is no proxy into its host; env "
                            "SESSIOND_ALLOW_LOCAL_WEBHOOKS=1)")
    edges.add_argument("--metrics-interval", type=interval, metavar="SECONDS",
                       default=env("SESSIOND_METRICS_INTERVAL", "15"),
                       help="how often each sandbox's cgroups are sampled for its metrics (env "
                            "SESSIOND_METRICS_INTERVAL; default %(default)s)")


def edge_settings(args: argparse.Namespace) -> dict:
    return {"exposure_domain": args.exposure_domain, "exposure_scheme": args.exposure_scheme,
            "exposure_port": int(args.exposure_port), "allow_local_webhooks": bool(args.allow_local_webhooks),
            "metrics_interval": float(args.metrics_interval)}
