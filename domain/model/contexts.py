"""Contexts: short-lived processes in a sandbox without a durable journal (pure part).

A context is what the SDKs' ``run`` (a REPL on a terminal) and ``cmd`` (one command) use.
Unlike a session it has no event journal, no attempts and no restart policy: its output
lives in a bounded memory buffer and it ends with the sandbox's runtime (a pause, a
resume or a server restart). This module parses the create request, knows the REPL
presets and names the final states as the reference reports them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import InvalidRequestError
from .json_fields import body_object, optional_bool, optional_str
from .spec import MAX_ARG_STRING_BYTES, MAX_ARGV, MAX_ARGV_BYTES, MAX_ENV, MAX_ENV_BYTES

# The reference's prompt tokens: a REPL is ready, and an exec is done, once it prints READY_TOKEN.
READY_TOKEN = "_S0_> "
CONTINUATION_TOKEN = "__S0_CONT__ "
DEFAULT_TERMINAL = (24, 80)
MAX_TERMINAL = 10_000


def _first_available(names: tuple[str, ...], args: list[str]) -> list[str]:
    """Run the first of ``names`` found on the sandbox's PATH (resolved inside the sandbox)."""
    loop = "for c in " + " ".join(names) + '; do command -v "$c" >/dev/null 2>&1 && exec "$c" "$@"; done; ' \
           f"echo '{names[0]}: not installed in this sandbox' >&2; exit 127"
    return ["/bin/sh", "-c", loop, "sh", *args]


_PY_PROMPTS = f"import sys; sys.ps1='{READY_TOKEN}'; sys.ps2='{CONTINUATION_TOKEN}'"
# alias -> (argv, extra env); every preset prints READY_TOKEN as its prompt.
REPL_PRESETS: dict[str, tuple[list[str], dict[str, str]]] = {
    "python": (_first_available(("python3", "python"), ["-q", "-i", "-u", "-c", _PY_PROMPTS]),
               {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}),
    "node": (_first_available(("node", "nodejs"), ["-e", f"require('repl').start({{prompt: '{READY_TOKEN}'}})"]),
             {"NODE_DISABLE_COLORS": "1"}),
    "bash": (_first_available(("bash", "sh"), ["--norc", "--noprofile", "-i"]), {"PS1": READY_TOKEN, "PS2": ""}),
    "sh": (["/bin/sh", "-i"], {"PS1": READY_TOKEN, "PS2": ""}),
}
REPL_ALIASES = {"python3": "python", "nodejs": "node", "javascript": "node", "js": "node", "shell": "bash"}


@dataclass(frozen=True)
class ContextRequest:
    type: str  # "repl" | "cmd"
    alias: str
    command: list[str]
    env: dict[str, str]
    cwd: str
    terminal: tuple[int, int] | None  # (rows, cols); a REPL always has one
    input: str = ""
    wait_until_done: bool = False
    idle_timeout_s: int = 0
    ttl_s: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)


def parse_create_context(raw) -> ContextRequest:
    """The body of ``POST …/contexts`` as the SDKs send it (CreateContextRequest)."""
    body = body_object(raw)
    kind = optional_str(body, "type") or ("cmd" if body.get("cmd") is not None else "repl")
    if kind not in ("repl", "cmd"):
        raise InvalidRequestError(f"unsupported process type {kind!r} (expected 'repl' or 'cmd')")
    repl, cmd = body.get("repl"), body.get("cmd")
    if repl is not None and kind != "repl":
        raise InvalidRequestError("repl is only valid for repl contexts")
    if cmd is not None and kind != "cmd":
        raise InvalidRequestError("cmd is only valid for cmd contexts")
    timeouts = {key: _non_negative_int(body, key) for key in ("idle_timeout_sec", "ttl_sec")}
    cwd = optional_str(body, "cwd")
    if "\0" in cwd:  # exec would cut it: refused like a session's
        raise InvalidRequestError("cwd must not contain NUL bytes")
    common = dict(env=_env(body.get("env_vars")), cwd=cwd,
                  wait_until_done=optional_bool(body, "wait_until_done"),
                  idle_timeout_s=timeouts["idle_timeout_sec"], ttl_s=timeouts["ttl_sec"])
    terminal = _terminal(body.get("pty_size"))
    if kind == "cmd":
        command = body_object(cmd, "cmd").get("command")
        if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
            raise InvalidRequestError("cmd.command must be a non-empty array of strings")
        if any("\0" in a for a in command):
            raise InvalidRequestError("cmd.command must not contain NUL bytes")
        _check_strings(command, "cmd.command", MAX_ARGV, MAX_ARGV_BYTES)
        return ContextRequest(type="cmd", alias="", command=list(command), terminal=terminal, **common)
    repl = body_object(repl, "repl")
    requested = optional_str(repl, "alias").strip().lower() or "python"
    alias = REPL_ALIASES.get(requested, requested)
    if alias not in REPL_PRESETS:
        raise InvalidRequestError(
            f"unsupported language {requested!r} (available: {', '.join(sorted(REPL_PRESETS))})")
    argv, extra = REPL_PRESETS[alias]
    return ContextRequest(type="repl", alias=alias, command=list(argv), terminal=terminal or DEFAULT_TERMINAL,
                          input=optional_str(repl, "input"), extra_env=dict(extra), **common)


def parse_context_input(raw, *, required_non_empty: bool = False) -> str:
    body = body_object(raw)
    data = body.get("data")
    if not isinstance(data, str) or (required_non_empty and not data):
        raise InvalidRequestError("data is required")
    return data


def exec_input(kind: str, data: str) -> str:
    """``/exec`` submits a line to a REPL: a trailing newline is added when missing."""
    if kind == "repl" and not data.endswith(("\n", "\r")):
        return data + "\n"
    return data


def normalize_exec_output(kind: str, raw: str) -> str:
    """The reference's shape: the REPL output starts with one prompt and does not end with one."""
    if kind != "repl":
        return raw
    if raw.endswith(READY_TOKEN):
        raw = raw[: -len(READY_TOKEN)]
    return raw if raw.startswith(READY_TOKEN) else READY_TOKEN + raw


def parse_resize(raw) -> tuple[int, int]:
    body = body_object(raw)
    rows, cols = body.get("rows"), body.get("cols")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (rows, cols)) \
            or not (0 < rows <= MAX_TERMINAL and 0 < cols <= MAX_TERMINAL):
        raise InvalidRequestError("rows and cols must be > 0")
    return rows, cols


def final_state(exit_code: int | None, signal: int | None) -> tuple[int, str]:
    """(exit_code, state) as the reference reports a finished context process."""
    if signal is not None:
        return -1, "killed"
    code = -1 if exit_code is None else exit_code
    if code == 0:
        return 0, "stopped"
    return code, "killed" if code in (-1, 137) else "crashed"


def _terminal(raw) -> tuple[int, int] | None:
    if raw is None:
        return None
    size = body_object(raw, "pty_size")
    rows, cols = size.get("rows", DEFAULT_TERMINAL[0]), size.get("cols", DEFAULT_TERMINAL[1])
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (rows, cols)) \
            or not (0 < rows <= MAX_TERMINAL and 0 < cols <= MAX_TERMINAL):
        raise InvalidRequestError("pty_size rows and cols must be > 0")
    return rows, cols


def _env(raw) -> dict[str, str]:
    if raw is None:
        return {}
    env = body_object(raw, "env_vars")
    if not all(isinstance(v, str) for v in env.values()):
        raise InvalidRequestError("env_vars values must be strings")
    env = {k.strip(): v for k, v in env.items() if k.strip() and "=" not in k and "\0" not in k + v}
    _check_strings([f"{k}={v}" for k, v in env.items()], "env_vars", MAX_ENV, MAX_ENV_BYTES)
    return env


def _check_strings(strings: list[str], where: str, most: int, most_bytes: int) -> None:
    """What execve takes: a bounded count and size, no string of the kernel's one-string limit
    (else the context fails to start, inside the sandbox, as a vague 500)."""
    if len(strings) > most:
        raise InvalidRequestError(f"{where} has more than {most} entries")
    sizes = [len(part.encode("utf-8", "surrogatepass")) for part in strings]
    if any(size > MAX_ARG_STRING_BYTES for size in sizes):
        raise InvalidRequestError(f"{where} has a string longer than {MAX_ARG_STRING_BYTES} bytes "
                                  "(the kernel's limit for one argument or variable)")
    if sum(sizes) > most_bytes:
        raise InvalidRequestError(f"{where} is larger than {most_bytes} bytes")


def _non_negative_int(body: dict, key: str) -> int:
    value = body.get(key)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidRequestError("idle_timeout_sec and ttl_sec must be >= 0")
    return value
