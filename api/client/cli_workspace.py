"""``sessionctl sandbox run`` and ``sessionctl sandbox cp``: contexts and workspace files.

``run SB COMMAND...`` runs the command as a context in the sandbox (the same runtime as
sessions, no journal), relays its stdout and stderr as they arrive, and exits with the
command's exit code (128+N when a signal N killed it). ``cp SRC DST`` copies one file into or
out of a sandbox; the sandbox side is written ``SB:PATH`` (a relative PATH is under
/workspace) and ``-`` is stdin or stdout.
"""
from __future__ import annotations

import argparse
import sys

from .workspace import download, run_streaming, upload


def register(group, common, verb) -> None:
    """Add the verbs to the ``sandbox`` group of the parser (``verb`` is cli_parser._verb)."""
    run = verb(group, "run", common, sandbox_run, "run a command in the sandbox and wait for it (a context)",
               'sessionctl sandbox run "$SB" python3 -c \'print("hello")\'', usage="sessionctl sandbox run SB COMMAND...  |  sessionctl sandbox run SB [--cwd DIR] "
                     "[--env K=V] -- COMMAND...")
    run.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…)")
    _run_options(run)
    run.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND",
                     help="the argv to run (after -- when options follow SB)")
    cp = verb(group, "cp", common, sandbox_cp, "copy a file into or out of a sandbox (SB:PATH)",
              'sessionctl sandbox cp task.txt "$SB:/workspace/task.txt"', usage="sessionctl sandbox cp SRC DST   (one of them SB:PATH; '-' is stdin/stdout)")
    cp.add_argument("source", metavar="SRC", help="a local file, SB:PATH, or - (stdin)")
    cp.add_argument("destination", metavar="DST", help="a local file, SB:PATH, or - (stdout)")


def _run_options(parser) -> argparse.ArgumentParser:
    parser.add_argument("--cwd", metavar="DIR", help="working directory inside the sandbox (default /workspace)")
    parser.add_argument("--env", action="append", default=[], metavar="K=V",
                        help="an environment variable for the command (repeatable)")
    return parser


def sandbox_run(client, args) -> int:
    command = args.command
    if "--" in command:  # options after SB: argparse's REMAINDER took them, so they are read here
        at = command.index("--")
        options = _run_options(argparse.ArgumentParser(prog="sessionctl sandbox run", add_help=False))
        extra = options.parse_args(command[:at])
        command, args.env, args.cwd = command[at + 1:], args.env + extra.env, extra.cwd or args.cwd
    if not command:
        return _usage("sandbox run: give the COMMAND to run")
    env = dict(item.split("=", 1) for item in args.env if "=" in item)
    outputs = {"stdout": sys.stdout, "stderr": sys.stderr}

    def relay(source: str, text: str) -> None:
        stream = outputs.get(source, sys.stdout)
        stream.write(text)
        stream.flush()

    exit_code, state = run_streaming(client, args.sandbox, command, relay, cwd=args.cwd, env=env or None)
    if exit_code is None:
        return 1
    if state == "killed" and exit_code < 0:
        return 137  # killed: the reference's state carries no signal number, so report it as KILL
    return exit_code


def sandbox_cp(client, args) -> int:
    source, destination = _side(args.source), _side(args.destination)
    if (source[0] is None) == (destination[0] is None):
        return _usage("sandbox cp: exactly one of SRC and DST must be SB:PATH")
    if source[0] is not None:
        if args.destination == "-":
            download(client, source[0], source[1], sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            with open(args.destination, "wb") as sink:
                download(client, source[0], source[1], sink)
        return 0
    if args.source == "-":
        upload(client, destination[0], sys.stdin.buffer, destination[1])
    else:
        with open(args.source, "rb") as src:
            upload(client, destination[0], src, destination[1])
    return 0


def _usage(message: str) -> int:
    sys.stderr.write(f"sessionctl: {message}\n")
    return 2  # the usage exit code


def _side(text: str) -> tuple[str | None, str]:
    """``SB:PATH`` -> (SB, PATH); a local path (or ``-``, or ``./a:b``) -> (None, text)."""
    head, sep, tail = text.partition(":")
    if not sep or not head or "/" in head or head in (".", ".."):
        return None, text
    return head, tail or "/workspace"
