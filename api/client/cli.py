"""``sessionctl``: the command line over ``api.client`` (run ``sessionctl --help``).

Exit codes (stable, for scripts; the table is in ``--help``): 0 ok, 1 other error, 2 usage,
3 not found, 4 conflict, 5 invalid request, 6 unauthorized/forbidden, 7 cursor expired,
8 unavailable or unreachable, 9 rate limited, 10 server error, 130 interrupted.
Errors go to stderr on one line: ``sessionctl: <code> (<status>): <message>``.

Start-up time matters (a script calls it in loops): only what a verb needs is imported.
"""
from __future__ import annotations

import json
import os
import sys

from . import errors as e
from .cli_apply import ApplyFileError
from .cli_output import event_line, print_json, render
from .cli_parser import build_parser
from .cli_spec import SpecError, build_spec, load_spec_file
from .local_server import BadUrl
from .oneshot import OneShotClient


EXIT = {"ok": 0, "error": 1, "usage": 2, "not_found": 3, "conflict": 4, "invalid": 5, "auth": 6,
        "expired": 7, "unavailable": 8, "rate_limited": 9, "server": 10, "interrupted": 130}
_BY_CLASS = [(e.NotFound, "not_found"), (e.Conflict, "conflict"), (e.InvalidRequest, "invalid"),
             (e.Unauthorized, "auth"), (e.CursorExpired, "expired"), (e.Unavailable, "unavailable"),
             (e.TransportError, "unavailable"), (e.RateLimited, "rate_limited"), (e.ServerError, "server")]


class UsageError(Exception):
    pass


def exit_code(error: BaseException) -> int:
    return next((EXIT[name] for cls, name in _BY_CLASS if isinstance(error, cls)), EXIT["error"])


def one_line(error: BaseException) -> str:
    text = str(error).replace("\r", " ").replace("\n", " ")
    if isinstance(error, e.CursorExpired) and error.earliest is not None:
        text += f" (earliest={error.earliest}; retry with --after {error.earliest - 1} or --skip-gap)"
    return text


# ---- output helpers -----------------------------------------------------------------------------
def emit(args, result, quiet_id: str | None = None) -> int:
    if getattr(args, "quiet", False) and quiet_id is not None:
        sys.stdout.write(quiet_id + "\n")
    elif args.output == "json":
        print_json(getattr(result, "raw", result))
    else:
        sys.stdout.write(render(result))
    return EXIT["ok"]


def emit_list(args, result, ids: list[str]) -> int:
    if getattr(args, "quiet", False):
        sys.stdout.write("".join(i + "\n" for i in ids))
        return EXIT["ok"]
    return emit(args, result)


# ---- sandbox verbs ------------------------------------------------------------------------------------
def sandbox_claim(c, args) -> int:
    config = {k: v for k, v in (("ttl", args.ttl), ("hard_ttl", args.hard_ttl)) if v is not None}
    if args.no_auto_resume:
        config["auto_resume"] = False
    mounts = [{"sandboxvolume_id": volume, "mount_point": point or "/workspace"}
              for volume, _, point in (v.partition(":") for v in args.volume)]
    claim = c.claim_sandbox(args.template, config=config or None, mounts=mounts or None)
    return emit(args, claim, claim.sandbox_id)


def sandbox_list(c, args) -> int:
    result = c.list_sandboxes(limit=200)
    return emit_list(args, result, [b.id for b in result])


SANDBOX_SIMPLE = {"get": "get_sandbox", "status": "sandbox_status", "pause": "pause_sandbox",
                  "resume": "resume_sandbox", "refresh": "refresh_sandbox", "delete": "delete_sandbox"}


def sandbox_simple(c, args) -> int:
    return emit(args, getattr(c, SANDBOX_SIMPLE[args.verb])(args.sandbox))


# ---- session verbs --------------------------------------------------------------------------------------
def session_list(c, args) -> int:
    result = c.list_sessions(args.sandbox)
    return emit_list(args, result, [s.id for s in result])


SESSION_SIMPLE = {"get": "get_session", "delete": "delete_session", "start": "start_session",
                  "stop": "stop_session"}


def session_simple(c, args) -> int:
    return emit(args, getattr(c, SESSION_SIMPLE[args.verb])(args.sandbox, args.session))


def session_create(c, args) -> int:
    session = c.create_session(args.sandbox, build_spec(args), idempotency_key=args.idempotency_key)
    return emit(args, session, session.id)


def session_update(c, args) -> int:
    return emit(args, c.update_session(args.sandbox, args.session, load_spec_file(args.spec_file)))


def session_attempt(c, args) -> int:
    return emit(args, c.create_attempt(args.sandbox, args.session, replace_current=args.replace))


def session_input(c, args) -> int:
    if args.data is not None and args.file is not None:
        raise UsageError("--data and --file are mutually exclusive")
    data = args.data.encode() if args.data is not None else b""
    if args.file == "-":
        data = sys.stdin.buffer.read()
    elif args.file is not None:
        with open(args.file, "rb") as src:
            data = src.read()
    if not data and not args.eof:
        raise UsageError("nothing to send: give --data, --file or --eof")
    result = c.send_input(args.sandbox, args.session, data, eof=args.eof, attempt_id=args.attempt_id,
                          input_id=args.input_id)
    return emit(args, result)


def session_signal(c, args) -> int:
    return emit(args, c.send_signal(args.sandbox, args.session, args.name, expected_attempt_id=args.attempt_id))


def session_resize(c, args) -> int:
    return emit(args, c.resize_terminal(args.sandbox, args.session, args.rows, args.cols,
                                        expected_attempt_id=args.attempt_id))


def session_log(c, args) -> int:
    from .cli_log import LogWriter
    if args.tail is not None and args.tail < 0:
        raise UsageError("--tail needs a number of lines >= 0")
    session = c.get_session(args.sandbox, args.session)
    pty = session.spec.get("io", {}).get("mode") == "pty"
    writer = LogWriter(sys.stdout.buffer, as_text=pty and not args.raw, tail=args.tail)
    last = max(0, session.cursor.earliest - 1)  # the retained window: older output is gone
    for event in c.iter_events(args.sandbox, args.session, after=last, follow=False, skip_gap=True):
        last = event.seq
        if event.type == "output":
            writer.catch_up(event.data)
    writer.caught_up(final=not args.follow)
    if not args.follow:
        return EXIT["ok"]
    stream = c.iter_events(args.sandbox, args.session, after=last, follow=True, skip_gap=True)
    try:
        for event in stream:
            if event.type == "output":
                writer.live(event.data)
    except e.NotFound:
        sys.stderr.write("sessionctl: the session was deleted\n")  # the normal end of --follow
    finally:
        stream.close()
        writer.end()
    return EXIT["ok"]


def session_events(c, args) -> int:
    stream = c.iter_events(args.sandbox, args.session, after=args.after, follow=args.follow,
                           skip_gap=args.skip_gap, reconnect_timeout=args.reconnect_timeout)
    try:
        for event in stream:
            if args.output == "json":
                sys.stdout.write(json.dumps(event.raw, ensure_ascii=False) + "\n")
            else:
                sys.stdout.write(event_line(event))
            sys.stdout.flush()
            if args.until and event.type == args.until:
                break
    except e.NotFound:
        if not args.follow or stream.last_seq == args.after:
            raise
        sys.stderr.write("sessionctl: the session was deleted\n")  # the normal end of --follow
    finally:
        stream.close()
    return EXIT["ok"]


def session_attach(c, args) -> int:
    from .cli_attach import attach
    if args.tail is not None and args.tail < 0:
        raise UsageError("--tail needs a number of bytes >= 0")
    return attach(c, args.sandbox, args.session, replay="none" if args.no_replay else "all",
                  tail_bytes=args.tail, stay=args.stay)


def parse(parser, argv: list[str]):
    """Everything after the first ``--`` of ``session create`` is the COMMAND, verbatim."""
    if "--" in argv:
        at = argv.index("--")
        args = parser.parse_args(argv[:at])
        if getattr(args, "handler", None) is session_create or getattr(args, "takes_command", False):
            args.command = argv[at + 1:]
            return args
    return parser.parse_args(argv)


STREAMING = {("session", "input"), ("session", "log"), ("session", "events"), ("session", "attach"),
             ("sandbox", "run"), ("sandbox", "cp"), ("sandbox", "ls"), ("sandbox", "rm"), ("sandbox", "logs"),
             ("sandbox", "events")}
# (SSE, WebSocket, streamed bodies, retried inputs, the file routes, the observability watch: httpx)


def full_client(url, token, data_dir):
    # httpx imports its own command line (click, rich, pygments: about 60 ms) whenever those
    # happen to be installed; we never use it, and httpx falls back to a stub without it.
    sys.modules.setdefault("httpx._main", None)
    from .sync import Client as StreamingClient
    return StreamingClient(url, token, data_dir=data_dir)


def version() -> str:
    from importlib import metadata
    try:
        return metadata.version("session-supervisor")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(sys.modules[__name__])
    args = parse(parser, sys.argv[1:] if argv is None else list(argv))
    if args.version:
        sys.stdout.write(f"sessionctl {version()}\n")
        return EXIT["ok"]
    if args.noun is None:
        parser.error("choose sandbox, session or apply (see sessionctl --help)")
    args.output = getattr(args, "output", None) or "table"
    try:
        # url None: SESSIOND_URL or the default; token None: SESSIOND_TOKEN or a local token file.
        connect = getattr(args, "client_factory", None) or (
            full_client if (args.noun, args.verb) in STREAMING else OneShotClient)
        with connect(getattr(args, "url", None), getattr(args, "token", None),
                     data_dir=getattr(args, "data_dir", None)) as client:
            return args.handler(client, args)
    except (UsageError, SpecError, ApplyFileError, BadUrl) as error:
        sys.stderr.write(f"sessionctl: {one_line(error)}\n")
        return EXIT["usage"]
    except BrokenPipeError:  # e.g. `sessionctl … | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT["ok"]
    except (e.ClientError, OSError, ValueError) as error:
        sys.stderr.write(f"sessionctl: {one_line(error)}\n")
        return exit_code(error)
    except KeyboardInterrupt:
        return EXIT["interrupted"]
    except Exception as error:  # a bug of ours: still one line, the traceback on request
        if os.environ.get("SESSIONCTL_DEBUG"):
            raise
        sys.stderr.write(f"sessionctl: internal error: {type(error).__name__}: {one_line(error)} "
                         f"(SESSIONCTL_DEBUG=1 shows where)\n")
        return EXIT["error"]
    return EXIT["error"]  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
