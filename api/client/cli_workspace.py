"""``sessionctl sandbox run`` and ``sessionctl sandbox cp``: contexts and workspace files.

``run SB COMMAND...`` runs the command as a context in the sandbox (the same runtime as
sessions, no journal), relays its stdout and stderr as they arrive, and exits with the
command's exit code (128+N when a signal N killed it). ``cp SRC DST`` copies a file into or
out of a sandbox (``-r``: a directory and everything in it); the sandbox side is written
``SB:PATH`` (a relative PATH is under /workspace) and ``-`` is stdin or stdout. ``ls SB
[PATH]`` lists a directory, ``rm SB PATH`` removes a file (``-r``: a directory too).
"""
from __future__ import annotations

import argparse
import os
import posixpath
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
    cp.add_argument("-r", "--recursive", action="store_true", help="copy a directory with everything in it")
    ls = verb(group, "ls", common, sandbox_ls, "list a directory of the sandbox", 'sessionctl sandbox ls "$SB" /workspace')
    ls.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…)")
    ls.add_argument("path", nargs="?", default="/workspace", metavar="PATH", help="default /workspace")
    rm = verb(group, "rm", common, sandbox_rm, "remove a file (or with -r a directory) of the sandbox",
              'sessionctl sandbox rm "$SB" -r /workspace/build')
    rm.add_argument("sandbox", metavar="SB", help="the sandbox id (sb-…)")
    rm.add_argument("path", metavar="PATH", help="the file or directory")
    rm.add_argument("-r", "--recursive", action="store_true", help="also a directory and everything in it")


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
    if args.recursive:
        if "-" in (args.source, args.destination):
            return _usage("sandbox cp -r: a directory cannot be stdin or stdout")
        if source[0] is not None:
            return _copy_tree_out(client, source[0], source[1], args.destination)
        return _copy_tree_in(client, args.source, destination[0], destination[1])
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


def _copy_tree_in(client, local: str, sandbox: str, path: str) -> int:
    """A local directory into the sandbox, at ``path`` (made, with what is in it)."""
    if not os.path.isdir(local):
        return _usage(f"sandbox cp -r: {local} is not a directory")
    base = path.rstrip("/") or "/"
    for here, dirs, files in os.walk(local):
        rel = os.path.relpath(here, local)
        target = base if rel == "." else posixpath.join(base, *rel.split(os.sep))
        client.make_dir(sandbox, target, recursive=True)
        for name in sorted(files):
            with open(os.path.join(here, name), "rb") as src:
                upload(client, sandbox, src, posixpath.join(target, name))
        dirs.sort()
    return 0


def _copy_tree_out(client, sandbox: str, path: str, local: str) -> int:
    """A sandbox directory (or file) to ``local``, made with what is in it."""
    if client.stat_file(sandbox, path).type != "dir":
        with open(local, "wb") as sink:
            download(client, sandbox, path, sink)
        return 0
    os.makedirs(local, exist_ok=True)
    for entry in client.list_files(sandbox, path):
        target = os.path.join(local, entry.name)
        if entry.type == "dir":
            _copy_tree_out(client, sandbox, posixpath.join(path, entry.name), target)
        elif entry.type == "file":
            with open(target, "wb") as sink:
                download(client, sandbox, posixpath.join(path, entry.name), sink)
        # a symlink is left out: its target may be outside what is copied
    return 0


def sandbox_ls(client, args) -> int:
    from .cli_output import table
    entries = client.list_files(args.sandbox, args.path)
    if getattr(args, "output", "table") == "json":
        from .cli_output import print_json
        print_json(entries.raw)
        return 0
    rows = [[e.mode, e.type, e.size, e.mod_time, e.name + ("/" if e.type == "dir" else "")
             + (f" -> {e.link_target}" if e.is_link and e.link_target else "")]
            for e in sorted(entries, key=lambda e: e.name)]
    sys.stdout.write(table(["MODE", "TYPE", "SIZE", "MODIFIED", "NAME"], rows))
    return 0


def sandbox_rm(client, args) -> int:
    if not args.recursive and client.stat_file(args.sandbox, args.path).type == "dir":
        return _usage(f"sandbox rm: {args.path} is a directory (rm -r removes it with what is in it)")
    client.delete_file(args.sandbox, args.path)
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
