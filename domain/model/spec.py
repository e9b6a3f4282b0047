"""Session spec: normalize (fill defaults), then validate, producing the echoed form.

The normalized spec is a plain JSON-ready dict in the reference's field order with
zero-valued optionals omitted (the echoed spec). Two specs are equal for idempotency
exactly when their normalized dicts are equal.
"""
from __future__ import annotations

from typing import Any

from .errors import InvalidSpecError
from .phases import DesiredState, IoMode, ReadinessKind, RestartPolicy, RuntimeRecovery

DEFAULT_MAX_BYTES = 67108864
DEFAULT_MAX_AGE_S = 86400
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
UINT16_MAX = 65535
# Edge limits (README "Contract notes"): every value that reaches the store must be one it
# can encode, and a deadline computed from it must fit the clock's int64 nanoseconds.
MAX_SECONDS = INT32_MAX
MAX_NAME_BYTES = 1024
MAX_ARGV = 4096
MAX_ARGV_BYTES = 256 * 1024
MAX_ENV = 1024
MAX_ENV_BYTES = 256 * 1024
MAX_PATH_BYTES = 4096
# execve refuses any one argument or ``KEY=value`` string of 32 pages or more (Linux's
# MAX_ARG_STRLEN, NUL included) with E2BIG, inside the sandbox, after the server said 201.
MAX_ARG_STRING_BYTES = 32 * 4096 - 1
MAX_SHORT_BYTES = 4096  # readiness.output, io.terminal.term


def _obj(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidSpecError(f"invalid request body: {where} must be an object")
    return value


def _str(value: Any, where: str, max_bytes: int = MAX_SHORT_BYTES) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidSpecError(f"invalid request body: {where} must be a string")
    check_text(value, where, max_bytes)
    return value


def check_text(value: str, where: str, max_bytes: int) -> int:
    """Refuse what exec would silently cut (NUL) and what would bloat every list response;
    returns the UTF-8 length."""
    if "\x00" in value:
        raise InvalidSpecError(f"invalid request body: {where} must not contain NUL bytes")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InvalidSpecError(f"invalid request body: {where} is longer than {max_bytes} bytes")
    return size


def _int(value: Any, where: str, maximum: int = INT64_MAX, minimum: int = -INT64_MAX - 1) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):  # 1e3 and 1.0 too, as Go's decoder
        raise InvalidSpecError(f"invalid request body: {where} must be an integer")
    if not minimum <= value <= maximum:
        raise InvalidSpecError(f"invalid request body: {where} is out of range ({minimum} to {maximum})")
    return value


def _enum(value: Any, where: str, enum: type, default: str, message: str) -> str:
    text = _str(value, where)
    if text == "":
        return default
    if text not in {member.value for member in enum}:
        raise InvalidSpecError(message)
    return text


def _command(value: Any) -> list[str]:
    if value is None:
        raise InvalidSpecError("command is required")
    if not isinstance(value, list) or not all(isinstance(part, str) for part in value):
        raise InvalidSpecError("invalid request body: command must be an array of strings")
    if not value or not value[0].strip():
        raise InvalidSpecError("command is required")
    if len(value) > MAX_ARGV:
        raise InvalidSpecError(f"invalid request body: command has more than {MAX_ARGV} arguments")
    total = sum(check_text(part, "command", MAX_ARG_STRING_BYTES) + 1 for part in value)
    if total > MAX_ARGV_BYTES:
        raise InvalidSpecError(f"invalid request body: command is longer than {MAX_ARGV_BYTES} bytes")
    return list(value)


def _env(value: Any) -> dict[str, str]:
    env = _obj(value, "env")
    if not all(isinstance(v, str) for v in env.values()):
        raise InvalidSpecError("invalid request body: env values must be strings")
    check_env(env, "env")
    return dict(env)


def check_env(env: dict, where: str) -> None:
    """Bounded in count and bytes; NUL in a key or value is refused (execve would cut it)."""
    if len(env) > MAX_ENV:
        raise InvalidSpecError(f"invalid request body: {where} has more than {MAX_ENV} variables")
    total = 0
    for key, item in env.items():
        size = check_text(key, f"{where} keys", MAX_ENV_BYTES) + check_text(item, f"{where} values", MAX_ENV_BYTES)
        if size + 1 > MAX_ARG_STRING_BYTES:
            raise InvalidSpecError(f"invalid request body: {where} variable {key[:64]!r} is longer than "
                                   f"{MAX_ARG_STRING_BYTES} bytes as KEY=value (the kernel's limit for one string)")
        total += size + 2
    if total > MAX_ENV_BYTES:
        raise InvalidSpecError(f"invalid request body: {where} is larger than {MAX_ENV_BYTES} bytes")


def _io(raw: dict) -> dict:
    mode = _enum(raw.get("mode"), "io.mode", IoMode, "pipes", 'io.mode must be "pipes" or "pty"')
    io: dict[str, Any] = {"mode": mode}
    terminal = _obj(raw.get("terminal"), "io.terminal")
    rows = _int(terminal.get("rows"), "io.terminal.rows", UINT16_MAX, 0)
    cols = _int(terminal.get("cols"), "io.terminal.cols", UINT16_MAX, 0)
    term = _str(terminal.get("term"), "io.terminal.term")
    if mode == IoMode.PTY:  # a terminal sent with pipes mode is discarded
        io["terminal"] = {"rows": rows or 24, "cols": cols or 80, "term": term or "xterm-256color"}
    return io


def _restart(raw: dict) -> dict:
    policy = _enum(raw.get("policy"), "lifecycle.restart.policy", RestartPolicy, "never",
                   "lifecycle.restart.policy is invalid")
    values = {k: _int(raw.get(k), f"lifecycle.restart.{k}", INT32_MAX, -INT32_MAX - 1)
              for k in ("max_restarts", "window_seconds", "initial_backoff_ms", "max_backoff_ms")}
    if any(v < 0 for v in values.values()):
        raise InvalidSpecError("restart limits and backoff must be non-negative")
    restart = {
        "policy": policy,
        "max_restarts": values["max_restarts"] or 5,
        "window_seconds": values["window_seconds"] or 60,
        "initial_backoff_ms": values["initial_backoff_ms"] or 250,
        "max_backoff_ms": values["max_backoff_ms"] or 5000,
    }
    if restart["max_backoff_ms"] < restart["initial_backoff_ms"]:
        raise InvalidSpecError("restart max_backoff_ms must be greater than or equal to initial_backoff_ms")
    return restart


def _lifecycle(raw: dict) -> dict:
    desired = _enum(raw.get("desired_state"), "lifecycle.desired_state", DesiredState, "running",
                    'lifecycle.desired_state must be "running" or "stopped"')
    restart = _restart(_obj(raw.get("restart"), "lifecycle.restart"))
    recovery = _enum(raw.get("runtime_recovery"), "lifecycle.runtime_recovery", RuntimeRecovery,
                     "restart", "lifecycle.runtime_recovery is invalid")
    idle = _int(raw.get("idle_timeout_seconds"), "lifecycle.idle_timeout_seconds", MAX_SECONDS)
    lifetime = _int(raw.get("max_lifetime_seconds"), "lifecycle.max_lifetime_seconds", MAX_SECONDS)
    grace = _int(raw.get("stop_grace_period_seconds"), "lifecycle.stop_grace_period_seconds",
                 INT32_MAX, -INT32_MAX - 1)
    if idle < 0 or lifetime < 0 or grace < 0:
        raise InvalidSpecError("lifecycle timeouts must be non-negative")
    lifecycle: dict[str, Any] = {"desired_state": desired, "restart": restart,
                                 "runtime_recovery": recovery}
    if idle:
        lifecycle["idle_timeout_seconds"] = idle
    if lifetime:
        lifecycle["max_lifetime_seconds"] = lifetime
    lifecycle["stop_grace_period_seconds"] = grace or 10
    return lifecycle


def _readiness(raw: dict) -> dict:
    kind = _enum(raw.get("type"), "readiness.type", ReadinessKind, "process", "readiness.type is invalid")
    delay = _int(raw.get("delay_ms"), "readiness.delay_ms", INT32_MAX, -INT32_MAX - 1)
    output = _str(raw.get("output"), "readiness.output")
    timeout = _int(raw.get("timeout_ms"), "readiness.timeout_ms", INT32_MAX, -INT32_MAX - 1)
    if delay < 0 or timeout < 0:
        raise InvalidSpecError("readiness durations must be non-negative")
    if kind == ReadinessKind.OUTPUT and not output:
        raise InvalidSpecError("readiness.output is required for output readiness")
    readiness: dict[str, Any] = {"type": kind}
    if delay:
        readiness["delay_ms"] = delay
    if output:
        readiness["output"] = output
    readiness["timeout_ms"] = timeout or 30000
    return readiness


def _retention(raw: dict) -> dict:
    max_bytes = _int(raw.get("max_bytes"), "event_retention.max_bytes")
    max_age = _int(raw.get("max_age_seconds"), "event_retention.max_age_seconds", MAX_SECONDS)
    if max_bytes < 0 or max_age < 0:
        raise InvalidSpecError("event retention limits must be non-negative")
    return {"max_bytes": max_bytes or DEFAULT_MAX_BYTES, "max_age_seconds": max_age or DEFAULT_MAX_AGE_S}


def normalize_spec(raw: Any) -> dict:
    """Return the normalized, validated spec (the echoed form) or raise InvalidSpecError."""
    if not isinstance(raw, dict):
        raise InvalidSpecError("invalid request body: expected a JSON object")
    spec: dict[str, Any] = {}
    name = _str(raw.get("name"), "name", MAX_NAME_BYTES).strip()
    if name:
        spec["name"] = name
    spec["command"] = _command(raw.get("command"))
    cwd = _str(raw.get("cwd"), "cwd", MAX_PATH_BYTES)
    if cwd:
        spec["cwd"] = cwd
    env = _env(raw.get("env"))
    if env:
        spec["env"] = env
    spec["io"] = _io(_obj(raw.get("io"), "io"))
    spec["lifecycle"] = _lifecycle(_obj(raw.get("lifecycle"), "lifecycle"))
    spec["readiness"] = _readiness(_obj(raw.get("readiness"), "readiness"))
    spec["event_retention"] = _retention(_obj(raw.get("event_retention"), "event_retention"))
    return spec


EXECUTION_FIELDS = ("command", "cwd", "env", "io", "readiness")


def execution_changed(old: dict, new: dict) -> bool:
    return any(old.get(key) != new.get(key) for key in EXECUTION_FIELDS)

