"""The ``sessionctl`` argument parser: ``sessionctl [OPTIONS] sandbox|session VERB ARGS``."""
from __future__ import annotations

import argparse

from .cli_workspace import register as register_workspace_verbs
from .harness_presets import NAMES


def _common() -> argparse.ArgumentParser:
    """Global options, accepted before or after the verb (SUPPRESS keeps either from erasing the other)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS,
                        help="server base URL (env SESSIOND_URL; default http://127.0.0.1:8780)")
    common.add_argument("--token", default=argparse.SUPPRESS, help="bearer token (env SESSIOND_TOKEN)")
    common.add_argument("-o", "--output", choices=("table", "json"), default=argparse.SUPPRESS,
                        help="table (default) or JSON: exactly the API's data")
    return common


def build_parser(verbs) -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(prog="sessionctl", parents=[common],
                                     description="Drive sandboxes and supervised sessions.")
    nouns = parser.add_subparsers(dest="noun", required=True, metavar="sandbox|session")
    _sandbox(nouns.add_parser("sandbox", help="claim, list, inspect, pause, resume and delete sandboxes"),
             common, verbs)
    _session(nouns.add_parser("session", help="create and drive sessions"), common, verbs)
    return parser


def _verb(group, name: str, common, handler, help_: str, **extra):
    parser = group.add_parser(name, parents=[common], help=help_, **extra)
    parser.set_defaults(handler=handler, verb=name)
    return parser


def _sandbox(noun, common, v) -> None:
    group = noun.add_subparsers(dest="verb", required=True, metavar="VERB")
    claim = _verb(group, "claim", common, v.sandbox_claim, "claim a sandbox from a template")
    claim.add_argument("template", nargs="?", default="default", help="default or coding-agent")
    claim.add_argument("--ttl", type=int, help="seconds until it is paused")
    claim.add_argument("--hard-ttl", type=int, help="seconds until it is deleted")
    claim.add_argument("--no-auto-resume", action="store_true")
    claim.add_argument("-q", "--quiet", action="store_true", help="print only the sandbox id")
    listing = _verb(group, "list", common, v.sandbox_list, "list sandboxes")
    listing.add_argument("-q", "--quiet", action="store_true", help="print only ids")
    for name, what in (("get", "show a sandbox"), ("status", "its status"), ("pause", "pause it"),
                       ("resume", "resume it (a new runtime generation)"), ("refresh", "re-arm its ttl"),
                       ("delete", "delete it with all its sessions")):
        _verb(group, name, common, v.sandbox_simple, what).add_argument("sandbox", metavar="ID")
    register_workspace_verbs(group, common, _verb)  # run, cp


def _target(parser) -> argparse.ArgumentParser:
    parser.add_argument("sandbox", metavar="SB")
    parser.add_argument("session", metavar="SID")
    return parser


def _session(noun, common, v) -> None:
    group = noun.add_subparsers(dest="verb", required=True, metavar="VERB")
    listing = _verb(group, "list", common, v.session_list, "list a sandbox's sessions")
    listing.add_argument("sandbox", metavar="SB")
    listing.add_argument("-q", "--quiet", action="store_true", help="print only ids")
    for name, what in (("get", "show a session"), ("delete", "stop and delete it"),
                       ("start", "desired state running"), ("stop", "desired state stopped")):
        _target(_verb(group, name, common, v.session_simple, what))
    _create(_verb(group, "create", common, v.session_create, "create a session",
                  usage="sessionctl session create SB [options] -- COMMAND..."))
    update = _target(_verb(group, "update", common, v.session_update, "replace its spec"))
    update.add_argument("--spec-file", required=True, metavar="FILE")
    attempt = _target(_verb(group, "attempt", common, v.session_attempt, "start a new attempt"))
    attempt.add_argument("--replace", action="store_true", help="replace the running attempt")
    _input(_target(_verb(group, "input", common, v.session_input, "write to its stdin")))
    signal = _target(_verb(group, "signal", common, v.session_signal, "signal its process group"))
    signal.add_argument("name", metavar="NAME", help="TERM, INT, KILL, HUP, … or a number")
    signal.add_argument("--attempt-id", help="fence to this attempt")
    resize = _target(_verb(group, "resize", common, v.session_resize, "resize its terminal"))
    resize.add_argument("rows", type=int)
    resize.add_argument("cols", type=int)
    resize.add_argument("--attempt-id", help="fence to this attempt")
    _target(_verb(group, "log", common, v.session_log, "print the retained output (raw bytes)"))
    events = _target(_verb(group, "events", common, v.session_events, "print its events"))
    events.add_argument("--after", type=int, default=0, metavar="N", help="only events with seq > N")
    events.add_argument("--follow", "-f", action="store_true", help="keep following; reconnects by itself")
    events.add_argument("--until", metavar="TYPE", help="stop after the first event of this type")
    events.add_argument("--skip-gap", action="store_true", help="on 410, continue from the earliest event")
    events.add_argument("--reconnect-timeout", type=float, default=300.0, metavar="S",
                        help="give up after S seconds without a connection (default 300)")
    _target(_verb(group, "attach", common, v.session_attach,
                  "interactive terminal on a PTY session (detach with Ctrl-])"))


def _create(create) -> None:
    create.add_argument("sandbox", metavar="SB")
    create.add_argument("--name")
    create.add_argument("--idempotency-key", metavar="K", help="a retry with the same key and spec is safe")
    create.add_argument("--restart", choices=("never", "on_failure", "always"))
    create.add_argument("--runtime-recovery", choices=("restart", "stop"))
    create.add_argument("--readiness", choices=("process", "delay", "output"))
    create.add_argument("--ready-output", metavar="S", help="the bytes that mark it ready")
    create.add_argument("--cwd", metavar="DIR")
    create.add_argument("--env", action="append", default=[], metavar="K=V")
    create.add_argument("--pty", action="store_true", help="run on a pseudo-terminal")
    create.add_argument("--rows", type=int)
    create.add_argument("--cols", type=int)
    create.add_argument("--spec-file", metavar="FILE", help="YAML or JSON spec to start from")
    create.add_argument("--harness", choices=NAMES, help="start from a coding-agent preset")
    create.add_argument("-q", "--quiet", action="store_true", help="print only the session id")
    create.add_argument("command", nargs="*", metavar="-- COMMAND", help="the argv to run, after --")


def _input(parser) -> None:
    parser.add_argument("--attempt-id", help="fence to this attempt (expected_attempt_id)")
    parser.add_argument("--input-id", help="default: a generated id (retries reuse it)")
    parser.add_argument("--data", metavar="S", help="text to write (UTF-8)")
    parser.add_argument("--file", metavar="F", help="bytes to write ('-' = stdin)")
    parser.add_argument("--eof", action="store_true", help="close stdin after the data")
