"""Building an ``ExecutionSessionSpec`` from ``sessionctl session create`` flags.

The base is ``--spec-file`` (YAML or JSON), else the ``--harness`` preset,
else an empty spec; flags then override single fields, and the COMMAND after
``--`` replaces ``command``. The server fills every default (contract §2.2).
"""
from __future__ import annotations

import json
from pathlib import Path

from .harness_presets import harness_spec


class SpecError(ValueError):
    pass


def load_spec_file(path: str) -> dict:
    text = Path(path).read_text()
    if path.endswith(".json"):
        data = json.loads(text)
    else:
        try:
            import yaml
        except ImportError:  # pragma: no cover - pyyaml is a dependency
            raise SpecError("reading YAML needs the pyyaml package") from None
        data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a spec must be a mapping")
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
