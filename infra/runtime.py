"""Sandbox runtimes: turn (workspace, argv, cwd, env, terminal) into a Launch.

The session spec speaks of paths inside the sandbox (``/workspace/...``); a
runtime maps them onto the host and, for bubblewrap, wraps argv so the
process only sees the workspace plus a read-only system.

Exit codes under bubblewrap: bwrap runs the command as a child and exits with
the child's code, so a command killed by signal N makes bwrap exit *normally*
with 128+N. ``BwrapRuntime.translate_exit`` turns 129..192 back into a signal
death, as the Go service reports it (exit_code -1). The cost is that a
command which itself exits with, say, 137 is reported as killed; the contract
already treats 137 as "killed", so that is accepted.

Signals under bubblewrap: the runners signal the whole process group, and the
outer bwrap is in it. bwrap has no handler for TERM/INT/HUP, so it would die
first and ``--die-with-parent`` would SIGKILL the sandbox, making every stop
a kill (measured: a TERM trap never finished). So bwrap is started through
``env --ignore-signal=…`` and the command through ``env --default-signal=…``
(coreutils >= 8.31): bwrap ignores the catchable signals a client may send,
the command gets them with default dispositions. SIGKILL/SIGSTOP still reach
everyone, and real-time signals (34-64) still kill bwrap first. One visible
difference on a terminal: bwrap is the session leader, so the SIGHUP of a
hang-up (PtyHandle.close_input) stops at bwrap and the command sees
end-of-input (or EIO) instead of dying of SIGHUP.
"""
from __future__ import annotations

import os
import posixpath
import shutil
import subprocess
from typing import Mapping, Protocol

from domain.ports import ExitStatus, Launch, TerminalSize

WORKSPACE = "/workspace"
_SIGNAL_EXIT_BASE = 128
_MAX_SIGNAL = 64

# Catchable signals that would otherwise kill the outer bwrap (see above).
_SHIELDED_SIGNALS = "HUP,INT,QUIT,USR1,USR2,PIPE,ALRM,TERM"

# System directories the sandbox sees read-only, when the host has them.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/libx32", "/lib64", "/opt", "/etc")


class RuntimeUnavailableError(RuntimeError):
    """The requested sandbox runtime cannot run on this host."""


class SandboxRuntime(Protocol):
    name: str

    def launch(
        self,
        workspace_dir: str,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        terminal: TerminalSize | None,
    ) -> Launch: ...

    def translate_exit(self, status: ExitStatus) -> ExitStatus: ...


def build_env(
    base: Mapping[str, str],
    sandbox_env: Mapping[str, str],
    spec_env: Mapping[str, str],
    term: str | None,
) -> dict[str, str]:
    """Precedence: daemon env < sandbox env < spec env < TERM (pty only).

    Spec keys are trimmed; keys that end up empty or contain '=' (or NUL)
    cannot be exported and are dropped silently, as the Go service does.
    """
    env = dict(base)
    env.update(sandbox_env)
    for key, value in spec_env.items():
        key = key.strip()
        if key and "=" not in key and "\0" not in key:
            env[key] = value
    if term:
        env["TERM"] = term
    return env


def sandbox_path(cwd: str) -> str:
    """Normalise a spec cwd to an absolute path as seen inside the sandbox."""
    if not cwd:
        return WORKSPACE
    return posixpath.normpath(posixpath.join(WORKSPACE, cwd))  # relative = under /workspace


class HostRuntime:
    """No isolation: /workspace is just an alias for the workspace directory."""

    name = "host"

    def launch(
        self,
        workspace_dir: str,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        terminal: TerminalSize | None,
    ) -> Launch:
        path = sandbox_path(cwd)
        if path == WORKSPACE or path.startswith(WORKSPACE + "/"):
            path = os.path.join(workspace_dir, path[len(WORKSPACE) + 1:]).rstrip("/") or "/"
        return Launch(argv=list(argv), cwd=path, env=dict(env), terminal=terminal)

    def translate_exit(self, status: ExitStatus) -> ExitStatus:
        return status


class BwrapRuntime:
    """bubblewrap: read-only system, the workspace bound at /workspace, own pid namespace."""

    name = "bwrap"

    def __init__(self, bwrap_path: str = "/usr/bin/bwrap", env_path: str = "/usr/bin/env") -> None:
        self._bwrap = bwrap_path
        self._env = env_path  # must also resolve inside the sandbox (/usr is bound)
        self._system_args = _system_binds()  # probed once; the host layout does not change

    def launch(
        self,
        workspace_dir: str,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        terminal: TerminalSize | None,
    ) -> Launch:
        wrapped = [
            self._env, f"--ignore-signal={_SHIELDED_SIGNALS}",
            self._bwrap,
            *self._system_args,
            "--dir", WORKSPACE,
            "--bind", workspace_dir, WORKSPACE,
            *tmp_binds(workspace_dir),
            "--dev", "/dev",
            "--proc", "/proc",
            "--unshare-pid",
            "--die-with-parent",
            "--chdir", sandbox_path(cwd),
            "--",
            self._env, f"--default-signal={_SHIELDED_SIGNALS}",
            *argv,
        ]
        # bwrap passes its own environment through to the command.
        return Launch(argv=wrapped, cwd=workspace_dir, env=dict(env), terminal=terminal)

    def translate_exit(self, status: ExitStatus) -> ExitStatus:
        code = status.exit_code
        if status.signal is None and code is not None:
            if _SIGNAL_EXIT_BASE < code <= _SIGNAL_EXIT_BASE + _MAX_SIGNAL:
                return ExitStatus(exit_code=-1, signal=code - _SIGNAL_EXIT_BASE)
        return status


def sandbox_tmp_dir(workspace_dir: str) -> str | None:
    """The sandbox's /tmp on its rootfs (next to the workspace), when it has one: then /tmp is
    checkpointed with the workspace and reachable by the file API. Older sandboxes get a tmpfs."""
    tmp = os.path.join(os.path.dirname(workspace_dir.rstrip("/")), "tmp")
    return tmp if os.path.isdir(tmp) else None


def tmp_binds(workspace_dir: str) -> list[str]:
    tmp = sandbox_tmp_dir(workspace_dir)
    return ["--bind", tmp, "/tmp"] if tmp else ["--tmpfs", "/tmp"]


def _system_binds() -> list[str]:
    args: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            # Merged /usr: /bin -> usr/bin. Recreate the link rather than bind
            # the target a second time, so paths resolve as on the host.
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def detect_runtime(name: str) -> HostRuntime | BwrapRuntime:
    """Build the runtime called ``name`` ("host" or "bwrap"), checking it works here."""
    if name == "host":
        return HostRuntime()
    if name != "bwrap":
        raise ValueError(f"unknown sandbox runtime {name!r} (expected 'host' or 'bwrap')")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise RuntimeUnavailableError("sandbox runtime 'bwrap' requested but bwrap is not on PATH")
    env = shutil.which("env")
    if env is None or not _env_has_signal_options(env):
        raise RuntimeUnavailableError(
            "sandbox runtime 'bwrap' needs GNU env with --ignore-signal (coreutils >= 8.31)"
        )
    try:
        trial = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "true"],
            capture_output=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeUnavailableError(f"bwrap trial run failed: {exc}") from exc
    if trial.returncode != 0:
        detail = trial.stderr.decode(errors="replace").strip()
        raise RuntimeUnavailableError(
            f"bwrap cannot create a sandbox here (exit {trial.returncode}): {detail}"
            " (user namespaces disabled, or bwrap not setuid?)"
        )
    return BwrapRuntime(os.path.abspath(bwrap), os.path.abspath(env))


def _env_has_signal_options(env: str) -> bool:
    try:
        probe = subprocess.run(
            [env, f"--ignore-signal={_SHIELDED_SIGNALS}", f"--default-signal={_SHIELDED_SIGNALS}", "true"],
            capture_output=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0
