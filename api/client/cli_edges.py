"""``sessionctl sandbox expose``, ``sandbox logs`` and ``sandbox events``: a sandbox's edges.

``expose SB PORT`` makes PORT a public service of the sandbox (added to its services, the others
kept) and prints its URL; with ``-- COMMAND`` the service is a ``cmd`` one (started by the first
request), else ``manual`` (something in the sandbox must listen there). ``logs SB`` prints its
sessions' and contexts' output lines (``--follow``: the watch stream, until Ctrl-C); ``events SB``
its lifecycle, process and API events, one line each.
"""
from __future__ import annotations

import argparse
import sys

import orjson

from .operations import Call, finish, sandbox_path


def register(group, common, verb) -> None:
    """Add the verbs to the ``sandbox`` group of the parser (``verb`` is cli_parser._verb)."""
    expose = verb(group, "expose", common, sandbox_expose, "make a port of the sandbox public and print its URL",
                  'sessionctl sandbox expose "$SB" 8080 -- python3 -m http.server 8080',
                  usage="sessionctl sandbox expose SB PORT [--path-form] [-- COMMAND...]")
    expose.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…)")
    expose.add_argument("port", type=int, metavar="PORT", help="the port inside the sandbox (1-65535)")
    expose.add_argument("--path-form", action="store_true",
                        help="print the /api/v1/sandboxes/SB/ingress/PORT/ URL instead of the host name")
    expose.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND",
                        help="after --: the command that serves the port (a cmd service)")
    logs = verb(group, "logs", common, sandbox_logs, "print a sandbox's output lines",
                'sessionctl sandbox logs "$SB" --follow')
    logs.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…)")
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing new lines (Ctrl-C ends)")
    logs.add_argument("--stream", choices=("stdout", "stderr", "pty"), help="only this stream")
    logs.add_argument("--context", metavar="ID", help="only this session or context")
    logs.add_argument("--since", metavar="TIME", help="only lines from this RFC 3339 time on")
    events = verb(group, "events", common, sandbox_events, "print a sandbox's events",
                  'sessionctl sandbox events "$SB" --type lifecycle')
    events.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…)")
    events.add_argument("--follow", "-f", action="store_true", help="keep printing new events (Ctrl-C ends)")
    events.add_argument("--type", choices=("api_access", "lifecycle", "network_audit", "process"),
                        help="only events of this type")
    events.add_argument("--since", metavar="TIME", help="only events from this RFC 3339 time on")


def sandbox_expose(client, args) -> int:
    command = args.command
    if "--" in command:  # options after PORT: argparse's REMAINDER took them, so they are read here
        at = command.index("--")
        options, command = command[:at], command[at + 1:]
        unknown = [option for option in options if option != "--path-form"]
        if unknown:
            sys.stderr.write(f"sessionctl: sandbox expose: unknown option {unknown[0]}\n")
            return 2
        args.path_form = args.path_form or bool(options)
    path = sandbox_path(args.sandbox) + "/services"
    current = client._run(Call("GET", path, (200,)))["services"]
    keep = [_stored(s) for s in current if s.get("port") != args.port]
    service = {"id": f"p{args.port}", "port": args.port, "ingress": {"public": True},
               "runtime": {"type": "cmd", "command": command} if command else {"type": "manual"}}
    if command:
        service["runtime"]["cwd"] = "/workspace"
    data = client._run(Call("PUT", path, (200,), body={"services": keep + [service]}))
    view = next(s for s in data["services"] if s["port"] == args.port)
    if args.output == "json":
        sys.stdout.write(orjson.dumps(view).decode() + "\n")
    elif args.path_form:
        sys.stdout.write(f"{client.url.rstrip('/')}/api/v1/sandboxes/{args.sandbox}/ingress/{args.port}/\n")
    else:
        sys.stdout.write(view.get("public_url", "") + "\n")
    return 0


def _stored(view: dict) -> dict:
    return {k: v for k, v in view.items() if k not in ("publishable", "publish_blockers", "public_url")}


def sandbox_logs(client, args) -> int:
    params = {k: v for k, v in (("stream", args.stream), ("context_id", args.context), ("start_time", args.since))
              if v}
    return _page_or_follow(client, args, "logs", params, _log_line)


def sandbox_events(client, args) -> int:
    params = {k: v for k, v in (("event_type", args.type), ("start_time", args.since)) if v}
    return _page_or_follow(client, args, "events", params, _event_line)


def _log_line(entry: dict) -> str:
    tag = "" if entry.get("stream") in ("stdout", "pty") else f"[{entry.get('stream')}] "
    return f"{entry['occurred_at']} {entry.get('context_id', '')} {tag}{entry['message']}\n"


def _event_line(event: dict) -> str:
    details = " ".join(f"{k}={v}" for k, v in sorted((event.get("attributes") or {}).items())
                       if k not in ("session_id",))
    return (f"{event['occurred_at']} {event['event_type']:<13} {event['action']:<24} {event['outcome']:<9} "
            f"{event['resource']['id']} {details}".rstrip() + "\n")


def _page_or_follow(client, args, kind: str, params: dict, line) -> int:
    path = sandbox_path(args.sandbox) + f"/observability/{kind}"
    as_json = args.output == "json"
    if not args.follow:
        cursor = None
        while True:
            page = client._run(Call("GET", path, (200,), params={**params, "limit": "1000",
                                                                 **({"cursor": cursor} if cursor else {})}))
            for item in page[kind]:
                sys.stdout.write(orjson.dumps(item).decode() + "\n" if as_json else line(item))
            cursor = page.get("next_cursor")
            if not cursor:
                return 0
    with client._http.stream("GET", path, params={**params, "watch": "true"},
                             headers={"Accept": "application/x-ndjson"}, timeout=None) as response:
        if response.status_code != 200:
            finish(Call("GET", path, (200,)), response.status_code, response.read())
        for raw in response.iter_lines():
            if not raw.strip():
                continue
            message = orjson.loads(raw)
            if message.get("type") in ("log", "event"):
                sys.stdout.write(orjson.dumps(message["data"]).decode() + "\n" if as_json else line(message["data"]))
                sys.stdout.flush()
            elif message.get("type") == "error":
                sys.stderr.write(f"sessionctl: {message.get('error')}\n")
                return 1
    return 0
