"""Session specs for the four coding-agent CLIs.

Each runs in pipe mode with HOME and cwd ``/workspace`` (the ``coding-agent``
template), restart ``on_failure``, runtime recovery ``restart`` and process
readiness. ``executable`` replaces the binary (e.g. a stand-in for tests), and
``extra_args`` are inserted where the CLI's parser accepts them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

WORKSPACE = "/workspace"


@dataclass(frozen=True)
class HarnessPreset:
    name: str
    protocol: str
    command: tuple[str, ...]
    env: dict = field(default_factory=dict)


PRESETS: dict[str, HarnessPreset] = {
    "codex": HarnessPreset("codex", "codex", ("codex", "app-server", "--stdio"), {"NO_COLOR": "1"}),
    # --allowedTools is variadic: it must stay last, or it eats the flags after it.
    "claude-code": HarnessPreset(
        "claude-code", "claude",
        ("claude", "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
         "--replay-user-messages", "--permission-mode", "dontAsk", "--allowedTools", "Bash", "Edit"),
        {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}),
    "opencode": HarnessPreset("opencode", "opencode", ("opencode", "acp", "--cwd", WORKSPACE),
                              {"OPENCODE_DISABLE_AUTOUPDATE": "1"}),
    # No --approve: pi 0.73/0.74 (node 20) reject it and exit before reading stdin.
    "pi": HarnessPreset("pi", "pi", ("pi", "--mode", "rpc"),
                        {"PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}),
}
ALIASES = {"claude": "claude-code"}
NAMES = tuple(PRESETS)


def preset(name: str) -> HarnessPreset:
    key = ALIASES.get(name, name)
    if key not in PRESETS:
        raise ValueError(f"unknown harness {name!r} (expected one of {', '.join(NAMES)})")
    return PRESETS[key]


def insert_args(protocol: str, command: list[str], args: list[str]) -> list[str]:
    """Add flags where the CLI parses them: claude's before the variadic --allowedTools."""
    if protocol == "claude" and "--allowedTools" in command:
        at = command.index("--allowedTools")
        return command[:at] + list(args) + command[at:]
    return command + list(args)


def harness_spec(name: str, *, executable: list[str] | None = None, extra_args: list[str] = (),
                 env: dict | None = None, cwd: str = WORKSPACE, home: str = WORKSPACE,
                 session_name: str | None = None) -> dict:
    """A full ``ExecutionSessionSpec`` for the harness, ready for ``create_session``."""
    p = preset(name)
    command = list(executable or p.command[:1]) + list(p.command[1:])
    if p.protocol == "opencode":
        command[-1] = cwd  # "acp --cwd DIR": the project directory
    command = insert_args(p.protocol, command, list(extra_args))
    return {
        "name": session_name or p.name,
        "command": command,
        "cwd": cwd,
        "env": {"HOME": home, **p.env, **(env or {})},
        "io": {"mode": "pipes"},
        "lifecycle": {"restart": {"policy": "on_failure"}, "runtime_recovery": "restart"},
        "readiness": {"type": "process"},
    }
