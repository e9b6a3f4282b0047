"""``sessionctl run [--template T | --sandbox ID] [--pty] -- CMD...``: one command, start to end.

Claims a sandbox (or uses ``--sandbox``), runs the command in it as a context, relays its
stdout and stderr to this process's own stdout and stderr as they arrive, deletes the
sandbox it claimed (also on Ctrl-C or an error), and exits with the command's exit code
(137 when it was killed, 127 when it could not be started). With ``--pty`` the command runs on a terminal of this terminal's
size; when stdin is a terminal too, it goes raw and every key reaches the command (its
Ctrl-C included), and the size follows the window. Without ``--pty`` stdin is not read.

The plain HTTP calls go over the standard library (``OneShotClient``) and the output over
one WebSocket, so a run costs what its calls cost: ``tests/bench/bench_run.py`` compares it
with the same claim, ``cmd()`` and delete made by the Python SDK in a fresh process.
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import threading

from . import errors as e

KILLED = 137
NOT_STARTED = 127


def register(nouns, common, formatter) -> None:
    run = nouns.add_parser("run", parents=[common], formatter_class=formatter,
                           help="claim a sandbox, run one command in it, stream it, exit with its code",
                           description=__doc__.split("\n\n")[1].replace("\n", " "),
                           usage="sessionctl run [--template T | --sandbox ID] [--pty] [--cwd DIR] [--env K=V] -- CMD...",
                           epilog="examples:\n  sessionctl run -- python3 -c 'print(6 * 7)'\n"
                                  "  sessionctl run --pty -- bash\n  sessionctl run --sandbox \"$SB\" -- make test")
    run.set_defaults(handler=run_command, verb="run", takes_command=True, client_factory=run_client)
    where = run.add_mutually_exclusive_group()
    where.add_argument("--template", default="default", help="the template to claim from (default: default)")
    where.add_argument("--sandbox", metavar="ID", help="run in this sandbox instead; it is kept")
    run.add_argument("--pty", action="store_true", help="run on a terminal (interactive when stdin is one)")
    run.add_argument("--cwd", metavar="DIR", help="working directory inside the sandbox (default /workspace)")
    run.add_argument("--env", action="append", default=[], metavar="K=V", help="repeatable")
    run.add_argument("command", nargs="*", metavar="-- CMD", help="the argv to run, after --")


def run_client(url, token, data_dir):
    """The one-shot client (standard library HTTP) with the context routes."""
    from .oneshot import OneShotClient
    from .workspace import WorkspaceOps

    class RunClient(OneShotClient, WorkspaceOps):
        pass

    return RunClient(url, token, data_dir=data_dir)


def run_command(client, args) -> int:
    if not args.command:
        sys.stderr.write("sessionctl: run: give the command after -- (sessionctl run -- CMD...)\n")
        return 2
    env = {}
    for pair in args.env:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            sys.stderr.write(f"sessionctl: run: --env expects KEY=VALUE, got {pair!r}\n")
            return 2
        env[key] = value
    claimed = None
    try:
        if args.sandbox:
            sandbox = args.sandbox
        else:
            claimed = sandbox = client.claim_sandbox(args.template).sandbox_id
        return _stream(client, sandbox, args, env)
    finally:
        if claimed is not None:
            _delete_quietly(client, claimed)


def _delete_quietly(client, sandbox: str) -> None:
    """Delete what this run claimed, even while a second Ctrl-C arrives."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        client.delete_sandbox(sandbox)
    except e.ClientError as error:
        sys.stderr.write(f"sessionctl: run: could not delete sandbox {sandbox}: {error}\n")
    finally:
        signal.signal(signal.SIGINT, previous)


def _stream(client, sandbox: str, args, env: dict) -> int:
    from websockets.sync.client import connect  # imported only here: the output's one stream

    from .workspace import contexts_path
    from .ws import ws_url

    request: dict = {"type": "cmd", "cmd": {"command": list(args.command)}}
    if args.cwd:
        request["cwd"] = args.cwd
    if env:
        request["env_vars"] = env
    interactive = args.pty and os.isatty(sys.stdin.fileno())
    if args.pty:
        size = shutil.get_terminal_size(fallback=(80, 24))
        request["pty_size"] = {"rows": size.lines, "cols": size.columns}
    try:
        context = client.create_context(sandbox, request)
    except e.ServerError as error:
        if error.code != "create_failed":
            raise
        sys.stderr.write(f"sessionctl: run: {error.message}\n")
        return NOT_STARTED  # as a shell says a command was not found
    url = ws_url(client.url, contexts_path(sandbox, context.id, "/ws"))
    try:
        with connect(url, additional_headers=client.headers, open_timeout=10, max_size=None) as ws:
            if interactive:
                return _interactive(ws)
            return _relay(ws, client, sandbox, context.id)
    finally:
        try:
            client.delete_context(sandbox, context.id)
        except e.ClientError:
            pass  # gone with its process, or with the sandbox


def _relay(ws, client=None, sandbox=None, context_id=None) -> int:
    import orjson

    streams = {"stdout": sys.stdout, "stderr": sys.stderr, "pty": sys.stdout}
    for raw in ws:
        message = orjson.loads(raw)
        kind = message.get("type")
        if kind == "output":
            stream = streams.get(message.get("source"), sys.stdout)
            stream.write(message.get("data", ""))
            stream.flush()
        elif kind == "done" and ("exit_code" in message or "state" in message):
            return _code(message.get("exit_code"), message.get("state"))
    if client is None:
        return 1
    final = client.get_context(sandbox, context_id)  # closed without a done frame
    return _code(final.exit_code, final.state)


def _code(exit_code, state) -> int:
    if exit_code is None:
        return 1
    if state == "killed" and exit_code < 0:
        return KILLED  # the reference's state carries no signal number
    return exit_code


def _interactive(ws) -> int:
    """Keys in (raw), output out, the window size followed, until the command exits."""
    import json
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    stop = threading.Event()

    def keys() -> None:
        while not stop.is_set():
            try:
                data = os.read(fd, 4096)
            except OSError:
                return
            if not data:
                return
            try:
                ws.send(json.dumps({"type": "input", "data": data.decode(errors="replace")}))
            except Exception:
                return

    def resized(*_):
        size = shutil.get_terminal_size(fallback=(80, 24))
        try:
            ws.send(json.dumps({"type": "resize", "rows": size.lines, "cols": size.columns}))
        except Exception:
            pass

    previous = signal.signal(signal.SIGWINCH, resized)
    tty.setraw(fd)
    reader = threading.Thread(target=keys, daemon=True)
    reader.start()
    try:
        return _relay(ws)
    finally:
        stop.set()
        termios.tcsetattr(fd, termios.TCSAFLUSH, saved)
        signal.signal(signal.SIGWINCH, previous)

