"""Building an ``ExecutionSessionSpec`` from ``sessionctl session create`` flags.

The base is ``--spec-file`` (YAML or JSON), else the ``--harness`` preset,
else an empty spec; flags then override single fields, and the COMMAND after
``--`` replaces ``command``. The server fills every default.
"""
from __future__ import annotations

import json
from pathlib import Path

from .harness_presets import harness_spec


class SpecError(ValueError):
    pass


def load_spec_file(path: str) -> dict:
    """The spec in ``path``; what is wrong with it says the file and, when known, line:column."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SpecError(f"{path}: {exc.strerror or exc}") from None
    if path.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{path}:{exc.lineno}:{exc.colno}: {exc.msg}") from None
    else:
        import yaml
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise SpecError(f"{where}: {problem}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a spec must be a mapping, not {type(data).__name__}")
    return data


def _env_pairs(pairs: list[str]) -> dict:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SpecError(f"--env expects KEY=VALUE, got {pair!r}")
        env[key] = value
    return env


def build_spec(args) -> dict:
    if args.spec_file:
        spec = load_spec_file(args.spec_file)
    elif args.harness:
        spec = harness_spec(args.harness)
    else:
        spec = {}
    command = list(args.command or [])
    if command:
        spec["command"] = command
    if not spec.get("command"):
        raise SpecError("a COMMAND after --, a --spec-file or a --harness is required")
    if args.name is not None:
        spec["name"] = args.name
    if args.cwd is not None:
        spec["cwd"] = args.cwd
    if args.env:
        spec["env"] = {**(spec.get("env") or {}), **_env_pairs(args.env)}
    lifecycle = spec.setdefault("lifecycle", {})
    if args.restart:
        lifecycle.setdefault("restart", {})["policy"] = args.restart
    if args.max_restarts is not None:
        lifecycle.setdefault("restart", {})["max_restarts"] = args.max_restarts
    if args.restart_window is not None:
        lifecycle.setdefault("restart", {})["window_seconds"] = args.restart_window
    if args.runtime_recovery:
        lifecycle["runtime_recovery"] = args.runtime_recovery
    readiness = spec.setdefault("readiness", {})
    if args.readiness:
        readiness["type"] = args.readiness
    if args.ready_output is not None:
        readiness["output"] = args.ready_output
        readiness.setdefault("type", "output")
    if args.pty:
        terminal = {k: v for k, v in (("rows", args.rows), ("cols", args.cols)) if v}
        spec["io"] = {"mode": "pty", **({"terminal": terminal} if terminal else {})}
    return spec
