"""``sessionctl apply -f sessions.toml``: make the server hold the sandboxes and sessions a file names.

The file (TOML, read by the standard library's ``tomllib``) names each sandbox and each of
its sessions by a name of its own::

    [sandboxes.web]                      # the file's name for a sandbox
    template = "default"                 # also ttl, hard_ttl, auto_resume

    [sandboxes.web.sessions.server]      # the file's name for a session in it
    command = ["python3", "-m", "http.server", "8080"]
    cwd = "/workspace"                   # also env, pty, rows, cols, restart, max_restarts,
                                         # restart_window, lifecycle, readiness, event_retention

How it finds them again: a state file beside the TOML file (``sessions.toml.state.json``),
per server URL, maps each name to the id the server gave it and to a digest of the table
that made it. apply then creates what is missing (a session with an idempotency key
derived from the file, so a retry after a crash never starts a second one), replaces what
changed (PUT of the session's spec: a new attempt only when its execution changed), leaves
what did not change alone (no call that could start an attempt), and with ``--prune``
deletes what it made earlier and the file no longer names. ``--dry-run`` prints the plan
and changes nothing. Sessions apply did not make are never touched.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import errors as e

SANDBOX_KEYS = {"template", "ttl", "hard_ttl", "auto_resume", "sessions"}
SESSION_KEYS = {"command", "cwd", "env", "pty", "rows", "cols", "restart", "max_restarts", "restart_window",
                "lifecycle", "readiness", "event_retention", "name"}


class ApplyFileError(ValueError):
    """The file cannot be applied: the message names the file and, when known, the line."""


def register(nouns, common, formatter) -> None:
    """``sessionctl apply``: a noun of its own (``nouns`` is the top-level subparsers)."""
    apply = nouns.add_parser("apply", parents=[common], help="create, update and prune what a sessions.toml names",
                             description="Make the server hold the sandboxes and sessions a TOML file names: "
                                         "create what is missing, replace what changed, leave the rest alone. "
                                         "A state file beside it (FILE.state.json) remembers their ids.",
                             formatter_class=formatter,
                             epilog="examples:\n  sessionctl apply -f sessions.toml --dry-run\n"
                                    "  sessionctl apply -f sessions.toml --prune")
    apply.set_defaults(handler=apply_file, verb="apply")
    apply.add_argument("-f", "--file", required=True, metavar="FILE", help="the sessions.toml to apply")
    apply.add_argument("--prune", action="store_true", help="delete what an earlier apply made and the file no longer names")
    apply.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")


# ---- the file --------------------------------------------------------------------------------
def load(path: str) -> dict[str, dict]:
    """{sandbox name: {"template", "config", "sessions": {name: spec}}} from the TOML file."""
    try:
        with open(path, "rb") as src:
            data = tomllib.load(src)
    except tomllib.TOMLDecodeError as exc:  # its message ends "(at line L, column C)"
        raise ApplyFileError(f"{path}: {exc}") from None
    except OSError as exc:
        raise ApplyFileError(f"{path}: {exc.strerror or exc}") from None
    unknown = set(data) - {"sandboxes"}
    if unknown:
        raise ApplyFileError(f"{path}: unknown top-level key(s) {sorted(unknown)}; expected [sandboxes.NAME]")
    wanted = {}
    for name, table in (data.get("sandboxes") or {}).items():
        where = f"{path}: [sandboxes.{name}]"
        if not isinstance(table, dict):
            raise ApplyFileError(f"{where} must be a table")
        _check_keys(where, table, SANDBOX_KEYS)
        config = {k: table[k] for k in ("ttl", "hard_ttl", "auto_resume") if k in table}
        sessions = {}
        for sname, stable in (table.get("sessions") or {}).items():
            swhere = f"{path}: [sandboxes.{name}.sessions.{sname}]"
            if not isinstance(stable, dict):
                raise ApplyFileError(f"{swhere} must be a table")
            _check_keys(swhere, stable, SESSION_KEYS)
            sessions[sname] = session_spec(swhere, sname, stable)
        wanted[name] = {"template": table.get("template", "default"), "config": config, "sessions": sessions}
    return wanted


def _check_keys(where: str, table: dict, allowed: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ApplyFileError(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(sorted(allowed))}")


def session_spec(where: str, name: str, table: dict) -> dict:
    """The ExecutionSessionSpec a session table stands for (the server fills the defaults)."""
    command = table.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        raise ApplyFileError(f"{where}: command must be a non-empty list of strings")
    spec: dict = {"name": table.get("name", name), "command": command}
    for key in ("cwd", "env", "readiness", "event_retention"):
        if key in table:
            spec[key] = table[key]
    lifecycle = dict(table.get("lifecycle") or {})
    restart = dict(lifecycle.get("restart") or {})
    for key, field_name in (("restart", "policy"), ("max_restarts", "max_restarts"),
                            ("restart_window", "window_seconds")):
        if key in table:
            restart[field_name] = table[key]
    if restart:
        lifecycle["restart"] = restart
    if lifecycle:
        spec["lifecycle"] = lifecycle
    if table.get("pty"):
        terminal = {k: table[k] for k in ("rows", "cols") if k in table}
        spec["io"] = {"mode": "pty", **({"terminal": terminal} if terminal else {})}
    return spec


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def idempotency_key(sandbox: str, session: str, spec: dict) -> str:
    """Derived from the file alone: the same table always asks for the same session."""
    return "apply-" + digest({"sandbox": sandbox, "session": session, "spec": spec})


# ---- the state beside the file ------------------------------------------------------------------
def state_path(path: str) -> Path:
    p = Path(path)
    return p.with_name(p.name + ".state.json")


def read_state(path: Path, url: str) -> dict:
    try:
        every = json.loads(path.read_text())
    except FileNotFoundError:
        every = {}
    except (OSError, ValueError) as exc:
        raise ApplyFileError(f"{path}: cannot read the state file: {exc}") from None
    return every.get("servers", {}).get(url, {"sandboxes": {}})


def write_state(path: Path, url: str, state: dict) -> None:
    try:
        every = json.loads(path.read_text())
    except (OSError, ValueError):
        every = {}
    every.setdefault("servers", {})[url] = state
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(every, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)  # never half a state file


# ---- the plan -------------------------------------------------------------------------------------
@dataclass
class Plan:
    steps: list[tuple[str, str, str]] = field(default_factory=list)  # (action, what, detail)

    def add(self, action: str, what: str, detail: str = "") -> None:
        self.steps.append((action, what, detail))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for action, _, _ in self.steps:
            out[action] = out.get(action, 0) + 1
        return out


def _exists(fetch) -> bool:
    try:
        fetch()
        return True
    except e.NotFound:
        return False


def apply_file(client, args) -> int:
    wanted = load(args.file)
    spath = state_path(args.file)
    state = read_state(spath, client.url)
    known = state.setdefault("sandboxes", {})
    plan = Plan()
    dry = args.dry_run

    def save() -> None:
        if not dry:
            write_state(spath, client.url, state)

    for sb_name, want in wanted.items():
        record = known.get(sb_name)
        sb_key = digest({"template": want["template"], "config": want["config"]})
        if record and not _exists(lambda: client.get_sandbox(record["id"])):
            record = None  # deleted behind our back: made again
        if record and record.get("digest") != sb_key and record.get("template") != want["template"]:
            plan.add("delete", f"sandbox {sb_name}", f"{record['id']} (its template changed)")
            if not dry:
                client.delete_sandbox(record["id"])
            record = None
        if record is None:
            plan.add("create", f"sandbox {sb_name}", f"template {want['template']}")
            if dry:
                record = {"id": None, "sessions": {}}
            else:
                claim = client.claim_sandbox(want["template"], config=want["config"] or None)
                record = known[sb_name] = {"id": claim.sandbox_id, "template": want["template"],
                                           "digest": sb_key, "sessions": {}}
                save()
        elif record.get("digest") != sb_key:
            plan.add("update", f"sandbox {sb_name}", f"{record['id']} config {want['config']}")
            if not dry:
                client.update_sandbox(record["id"], want["config"])
                record["digest"] = sb_key
                save()
        else:
            plan.add("unchanged", f"sandbox {sb_name}", record["id"])
        _apply_sessions(client, plan, sb_name, record, want["sessions"], args.prune, dry, save)

    if args.prune:
        for sb_name in [n for n in known if n not in wanted]:
            record = known[sb_name]
            plan.add("delete", f"sandbox {sb_name}", f"{record['id']} (no longer in the file)")
            if not dry:
                try:
                    client.delete_sandbox(record["id"])
                except e.NotFound:
                    pass
                del known[sb_name]
                save()
    return report(plan, dry)


def _apply_sessions(client, plan: Plan, sb_name: str, record: dict, wanted: dict, prune: bool, dry: bool,
                    save) -> None:
    sessions = record.setdefault("sessions", {})
    sb = record["id"]
    for name, spec in wanted.items():
        what, key = f"session {sb_name}/{name}", idempotency_key(sb_name, name, spec)
        have = sessions.get(name)
        if have and (sb is None or not _exists(lambda: client.get_session(sb, have["id"]))):
            have = None
        if have is None:
            plan.add("create", what, " ".join(spec["command"]))
            if not dry:
                created = client.create_session(sb, spec, idempotency_key=key)
                sessions[name] = {"id": created.id, "key": key}
                save()
        elif have["key"] != key:
            plan.add("update", what, f"{have['id']}: " + " ".join(spec["command"]))
            if not dry:
                client.update_session(sb, have["id"], spec)
                have["key"] = key
                save()
        else:
            plan.add("unchanged", what, have["id"])
    if prune:
        for name in [n for n in sessions if n not in wanted]:
            plan.add("delete", f"session {sb_name}/{name}", f"{sessions[name]['id']} (no longer in the file)")
            if not dry:
                try:
                    client.delete_session(sb, sessions[name]["id"])
                except e.NotFound:
                    pass
                del sessions[name]
                save()


def report(plan: Plan, dry: bool) -> int:
    out = sys.stdout
    for action, what, detail in plan.steps:
        out.write(f"{action:<9}  {what}" + (f"  {detail}" if detail else "") + "\n")
    counts = plan.counts()
    changes = {k: v for k, v in counts.items() if k != "unchanged"}
    summary = ", ".join(f"{v} to {k}" if dry else f"{v} {k}d" for k, v in changes.items()) or "no changes"
    out.write(("plan (dry run, nothing changed): " if dry else "applied: ") + summary + "\n")
    return 0
