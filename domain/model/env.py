"""The one environment merge of every process a sandbox starts (session attempts and contexts)."""
from __future__ import annotations

from typing import Mapping


def build_env(
    base: Mapping[str, str],
    sandbox_env: Mapping[str, str],
    spec_env: Mapping[str, str],
    term: str | None,
) -> dict[str, str]:
    """Precedence: daemon env < sandbox env < spec env < TERM (pty only).

    Spec and sandbox keys are trimmed; keys that end up empty or contain '=' (or NUL)
    cannot be exported (setenv refuses them, and the launch would end before its command)
    and are dropped silently, as the Go service does.
    """
    env = dict(base)
    for layer in (sandbox_env, spec_env):
        for key, value in layer.items():
            key = key.strip()
            if key and "=" not in key and "\0" not in key:
                env[key] = value
    if term:
        env["TERM"] = term
    return env
