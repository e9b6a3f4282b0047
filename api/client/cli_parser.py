"""The ``sessionctl`` argument parser: ``sessionctl [OPTIONS] sandbox|session VERB ARGS``."""
from __future__ import annotations

import argparse

from .cli_apply import register as register_apply
from .cli_completion import register as register_completion
from .cli_edges import register as register_edge_verbs
from .cli_rootfs import register as register_rootfs_verbs
from .cli_run import register as register_run
from .cli_volumes import register as register_volumes
from .cli_workspace import register as register_workspace_verbs
from .harness_presets import NAMES

EXIT_CODES = """\
exit codes:
  0    success                         6    unauthorized or forbidden (401/403)
  1    any other error                 7    cursor expired (410; the message says the earliest seq)
  2    usage error                     8    unavailable (503) or the server cannot be reached
  3    not found (404)                 9    rate limited (429, e.g. input_buffer_full)
  4    conflict (409)                  10   server error (5xx)
  5    invalid request (400)           130  interrupted (Ctrl-C)
"""

OVERVIEW = """\
the server and its token:
  --url / SESSIOND_URL (default http://127.0.0.1:8780). The token comes from --token, then
  SESSIOND_TOKEN, then - for a loopback URL - the server's token file DATA_DIR/token
  (--data-dir / SESSIOND_DATA_DIR; default ~/.local/share/sessiond), so on the server's own
  machine nothing needs to be set.

examples:
  SB=$(sessionctl sandbox claim default -q)
  SID=$(sessionctl session create "$SB" -q -- sh -c 'echo hi; exec cat')
  sessionctl session events "$SB" "$SID" --follow --until attempt.exited
  sessionctl session attach "$SB" "$SID" --tail 4096
  sessionctl -o json session get "$SB" "$SID"

""" + EXIT_CODES

RAW = argparse.RawDescriptionHelpFormatter


class OneLineErrors(argparse.ArgumentParser):
    """A usage error is one line on stderr (and exit 2), as every other error is: the usage
    text itself is one ``--help`` away. Subparsers inherit the class."""

    def error(self, message: str):
        self.exit(2, f"sessionctl: {message} (see: {self.prog} --help)\n")


def _common() -> argparse.ArgumentParser:
    """Global options, accepted before or after the verb (SUPPRESS keeps either from erasing the other)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS,
                        help="server base URL (env SESSIOND_URL; default http://127.0.0.1:8780)")
    common.add_argument("--token", default=argparse.SUPPRESS,
                        help="bearer token (env SESSIOND_TOKEN; default: a local server's token file)")
    common.add_argument("--data-dir", default=argparse.SUPPRESS, metavar="DIR",
                        help="the local server's data dir, for its token file (env SESSIOND_DATA_DIR)")
    common.add_argument("-o", "--output", choices=("table", "json"), default=argparse.SUPPRESS,
                        help="table (default) or JSON: exactly the API's data")
    return common


def build_parser(verbs) -> argparse.ArgumentParser:
    common = _common()
    parser = OneLineErrors(prog="sessionctl", parents=[common], formatter_class=RAW,
                                     description="Drive sandboxes and supervised sessions.", epilog=OVERVIEW)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    nouns = parser.add_subparsers(dest="noun", metavar="sandbox|session|volume|run|apply|completion")
    _sandbox(nouns.add_parser("sandbox", help="claim, list, inspect, pause, resume and delete sandboxes",
                              formatter_class=RAW, epilog=EXIT_CODES), common, verbs)
    _session(nouns.add_parser("session", help="create and drive sessions", formatter_class=RAW,
                              epilog=EXIT_CODES), common, verbs)
    register_volumes(nouns, common, RAW, _verb)
    register_run(nouns, common, RAW)
    register_apply(nouns, common, RAW)
    register_completion(nouns, common, RAW)
    return parser


def _verb(group, name: str, common, handler, help_: str, example: str, **extra):
    parser = group.add_parser(name, parents=[common], help=help_, description=help_ + ".",
                              formatter_class=RAW, epilog="example:\n  " + example, **extra)
    parser.set_defaults(handler=handler, verb=name)
    return parser


def _sandbox(noun, common, v) -> None:
    group = noun.add_subparsers(dest="verb", required=True, metavar="VERB")
    claim = _verb(group, "claim", common, v.sandbox_claim, "claim a sandbox from a template",
                  "SB=$(sessionctl sandbox claim default --ttl 3600 -q)")
    claim.add_argument("template", nargs="?", default="default", help="default (the default) or coding-agent")
    claim.add_argument("--ttl", type=int, help="seconds until it is paused")
    claim.add_argument("--hard-ttl", type=int, help="seconds until it is deleted")
    claim.add_argument("--no-auto-resume", action="store_true",
                       help="session calls while paused get 503 instead of resuming it")
    claim.add_argument("--volume", action="append", default=[], metavar="VOL[:PATH]",
                       help="bind this sandbox volume at PATH (default /workspace); repeatable")
    claim.add_argument("-q", "--quiet", action="store_true", help="print only the sandbox id")
    listing = _verb(group, "list", common, v.sandbox_list, "list sandboxes", "sessionctl sandbox list -q")
    listing.add_argument("-q", "--quiet", action="store_true", help="print only ids")
    for name, what in (("get", "show a sandbox"), ("status", "show its status"), ("pause", "pause it"),
                       ("resume", "resume it (a new runtime generation)"), ("refresh", "re-arm its ttl"),
                       ("delete", "delete it with all its sessions")):
        _verb(group, name, common, v.sandbox_simple, what, f'sessionctl sandbox {name} "$SB"').add_argument(
            "sandbox", metavar="ID", help="the sandbox id (sb-…)")
    register_workspace_verbs(group, common, _verb)  # run, cp
    register_edge_verbs(group, common, _verb)  # expose, logs, events
    register_rootfs_verbs(group, common, _verb)  # snapshot, snapshots, unsnapshot, restore, fork


def _target(parser) -> argparse.ArgumentParser:
    parser.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…)")
    parser.add_argument("session", metavar="SID", help="the session id (ses-…)")
    return parser


def _session(noun, common, v) -> None:
    group = noun.add_subparsers(dest="verb", required=True, metavar="VERB")
    listing = _verb(group, "list", common, v.session_list, "list a sandbox's sessions",
                    'sessionctl session list "$SB" -q')
    listing.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…)")
    listing.add_argument("-q", "--quiet", action="store_true", help="print only ids")
    for name, what in (("get", "show a session"), ("delete", "stop and delete it"),
                       ("start", "set its desired state to running"), ("stop", "set its desired state to stopped")):
        _target(_verb(group, name, common, v.session_simple, what, f'sessionctl session {name} "$SB" "$SID"'))
    _create(_verb(group, "create", common, v.session_create, "create a session",
                  """SID=$(sessionctl session create "$SB" --name web --restart on_failure -q -- python3 -m http.server)
  sessionctl session create "$SB" --pty --rows 40 --cols 120 -- bash""",
                  usage="sessionctl session create SB [options] -- COMMAND..."))
    update = _target(_verb(group, "update", common, v.session_update, "replace its spec",
                           'sessionctl session update "$SB" "$SID" --spec-file spec.yaml'))
    update.add_argument("--spec-file", required=True, metavar="FILE", help="YAML or JSON spec")
    attempt = _target(_verb(group, "attempt", common, v.session_attempt, "start a new attempt",
                            'sessionctl session attempt "$SB" "$SID" --replace'))
    attempt.add_argument("--replace", action="store_true", help="replace the running attempt")
    _input(_target(_verb(group, "input", common, v.session_input, "write to its stdin",
                         """sessionctl session input "$SB" "$SID" --data $'ls\\n'
  printf 'data' | sessionctl session input "$SB" "$SID" --file - --eof""")))
    signal = _target(_verb(group, "signal", common, v.session_signal, "signal its process group",
                           'sessionctl session signal "$SB" "$SID" TERM'))
    signal.add_argument("name", metavar="NAME", help="TERM, INT, KILL, HUP, … or a number")
    signal.add_argument("--attempt-id", help="fence to this attempt")
    resize = _target(_verb(group, "resize", common, v.session_resize, "resize its terminal",
                           'sessionctl session resize "$SB" "$SID" 40 120'))
    resize.add_argument("rows", type=int, help="terminal rows")
    resize.add_argument("cols", type=int, help="terminal columns")
    resize.add_argument("--attempt-id", help="fence to this attempt")
    log = _target(_verb(group, "log", common, v.session_log,
                        "print the retained output (a terminal's as the text it shows)",
                        'sessionctl session log "$SB" "$SID" --tail 20 --follow'))
    log.add_argument("--follow", "-f", action="store_true", help="keep printing new output until Ctrl-C")
    log.add_argument("--tail", type=int, metavar="N", help="start with only the last N lines")
    log.add_argument("--raw", action="store_true", help="a PTY session's bytes as they are (escape codes too)")
    events = _target(_verb(group, "events", common, v.session_events, "print its events",
                           'sessionctl session events "$SB" "$SID" --follow --until attempt.exited'))
    events.add_argument("--after", type=int, default=0, metavar="N", help="only events with seq > N")
    events.add_argument("--follow", "-f", action="store_true", help="keep following; reconnects by itself")
    events.add_argument("--until", metavar="TYPE", help="stop after the first event of this type")
    events.add_argument("--skip-gap", action="store_true", help="on 410, continue from the earliest event")
    events.add_argument("--reconnect-timeout", type=float, default=300.0, metavar="S",
                        help="give up after S seconds without a connection (default 300)")
    attach = _target(_verb(group, "attach", common, v.session_attach,
                           "interactive terminal on a PTY session (detach with Ctrl-]); ends with the "
                           "attempt's exit and its code",
                           'sessionctl session attach "$SB" "$SID" --tail 65536'))
    attach.add_argument("--stay", action="store_true",
                        help="stay attached when the attempt exits (across restarts), until Ctrl-]")
    replay = attach.add_mutually_exclusive_group()
    replay.add_argument("--no-replay", action="store_true", help="show only output from now on")
    replay.add_argument("--tail", type=int, metavar="N",
                        help="replay only the last N bytes of the retained output, from a line start "
                             "(default: all of it)")


def _create(create) -> None:
    create.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…)")
    create.add_argument("--name", help="a label shown in lists")
    create.add_argument("--idempotency-key", metavar="K", help="a retry with the same key and spec is safe")
    create.add_argument("--restart", choices=("never", "on_failure", "always"),
                        help="restart policy when the process exits")
    create.add_argument("--max-restarts", type=int, metavar="N",
                        help="give up (phase failed) after N restarts within the window (default 5)")
    create.add_argument("--restart-window", type=int, metavar="S",
                        help="the window of --max-restarts, in seconds (default 60)")
    create.add_argument("--runtime-recovery", choices=("restart", "stop"),
                        help="what to do after a server crash or a sandbox resume")
    create.add_argument("--readiness", choices=("process", "delay", "output"),
                        help="when the session counts as ready")
    create.add_argument("--ready-output", metavar="S", help="the bytes that mark it ready")
    create.add_argument("--cwd", metavar="DIR", help="working directory (relative to /workspace)")
    create.add_argument("--env", action="append", default=[], metavar="K=V", help="repeatable")
    create.add_argument("--pty", action="store_true", help="run on a pseudo-terminal")
    create.add_argument("--rows", type=int, help="PTY rows")
    create.add_argument("--cols", type=int, help="PTY columns")
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
