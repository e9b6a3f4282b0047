"""Sandbox launchers: turn (workspace, argv, cwd, env, terminal) into a Launch.

``launcher.isolate(sandbox_id, workspace, config)`` gives each sandbox its own
``BoundLauncher``; under the hardened bubblewrap launcher that carries a
``SandboxConfinement`` (unprivileged host uid, cgroups and limits, optional network
namespace), so every process of the sandbox is started the same way: see ``infra.launch_chain``.

The session spec speaks of paths inside the sandbox (``/workspace/...``); a
launcher maps them onto the host and, for bubblewrap, wraps argv so the
process only sees the workspace plus a read-only system.

Exit codes under bubblewrap: bwrap runs the command as a child and exits with
the child's code, so a command killed by signal N makes bwrap exit *normally*
with 128+N. ``BubblewrapLauncher.translate_exit`` turns 129..192 back into a signal
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

import logging
import os
import posixpath
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Callable

from session_supervisor.domain.ports import ExitStatus, Launch, StartFailedError, TerminalSize

from .confinement import DEFAULT_PIDS_MAX, SandboxConfinement, limits_for, sandbox_uid
from .sandbox_tmp import sandbox_tmp_dir
from .uids import UidTable
from . import start_check
from .launch_chain import CHAIN_PATH, SHIELDED_SIGNALS, Hardening, chain_argv, staged_chain_argv, staged_paths
from .launch_namespace import make_launch_namespace, namespace_path
from .rootfs import mount_rootfs, unmount_rootfs

log = logging.getLogger(__name__)
OOM_KILLED = "oom_killed"

WORKSPACE = "/workspace"
_SIGNAL_EXIT_BASE = 128
_MAX_SIGNAL = 64

# Catchable signals that would otherwise kill the outer bwrap (see above); the hardened launch
# chain ignores them itself before it execs (infra.launch_chain), the others through env.
_SHIELDED_SIGNALS = ",".join(SHIELDED_SIGNALS)

# System directories the sandbox sees read-only, when the host has them.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/libx32", "/lib64", "/opt", "/etc")


class LauncherUnavailableError(RuntimeError):
    """The requested sandbox launcher (``--runtime``) cannot run on this host."""


def sandbox_path(cwd: str) -> str:
    """Normalise a spec cwd to an absolute path as seen inside the sandbox."""
    if not cwd:
        return WORKSPACE
    return posixpath.normpath(posixpath.join(WORKSPACE, cwd))  # relative = under /workspace


class HostLauncher:
    """No confinement: /workspace is just an alias for the workspace directory."""

    name = "host"
    hardening = None

    def isolate(self, sandbox_id: str, workspace_dir: str, config: dict) -> "BoundLauncher":
        return BoundLauncher(self, None)

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


class BubblewrapLauncher:
    """bubblewrap: read-only system, the workspace bound at /workspace, own namespaces.

    With ``hardening`` and a ``SandboxConfinement`` the process also runs as the sandbox's
    unprivileged uid (root only inside its user namespace), in its cgroups, under seccomp.
    """

    name = "bwrap"

    def __init__(self, bwrap_path: str = "/usr/bin/bwrap", env_path: str = "/usr/bin/env",
                 hardening: Hardening | None = None) -> None:
        self._bwrap = bwrap_path
        self._env = env_path  # must also resolve inside the sandbox (/usr is bound)
        self._system_args = _system_binds()  # probed once; the host layout does not change
        self.hardening = hardening
        # sandbox id -> the network namespace its processes join (e.g. /run/netns/<name>), or
        # None for the host's; set by whoever owns per-sandbox networking.
        self.netns_for: Callable[[str], str | None] | None = None
        # image digest -> its unpacked rootfs (infra.images), set when there is an image store.
        self.image_rootfs: Callable[[str], str] | None = None
        # The server's table of the uids its sandboxes hold (infra.uids): a free one without a scan.
        self.uids: UidTable | None = None
        # sandbox id -> the launch namespace made with its warm directory (infra.warm_pool), once.
        self.launch_ns_for: Callable[[str], int | None] | None = None

    def isolate(self, sandbox_id: str, workspace_dir: str, config: dict) -> "BoundLauncher":
        hard = self.hardening
        if hard is None:
            return BoundLauncher(self, None)
        uid = sandbox_uid(sandbox_id, workspace_dir, self.uids) if hard.as_root else None
        limits = limits_for(config, hard.pids_max)
        cgroup = hard.cgroups.create(sandbox_id, limits) if hard.cgroups is not None else None
        netns = self.netns_for(sandbox_id) if self.netns_for is not None else None
        confinement = SandboxConfinement(sandbox_id, uid, limits, cgroup, netns_path=netns, workspace_dir=workspace_dir)
        image = (config.get("rootfs") or {}).get("image")
        if image and self.image_rootfs is not None and uid is not None:
            try:
                confinement.rootfs = mount_rootfs(workspace_dir, self.image_rootfs(image), uid)
            except BaseException:
                if cgroup is not None:
                    cgroup.remove()
                raise
        elif image:
            log.warning("sandbox %s: image %s needs the server to run as root; it runs on the host's "
                        "system", sandbox_id, image)
        return BoundLauncher(self, confinement)

    def launch(
        self,
        workspace_dir: str,
        argv: list[str],
        cwd: str,
        env: dict[str, str],
        terminal: TerminalSize | None,
        *,
        confinement: SandboxConfinement | None = None,
        attempt_id: str = "",
    ) -> Launch:
        hard = self.hardening
        if confinement is not None and self.netns_for is not None:
            # Looked up per launch: a sandbox's network is attached after its runtime is
            # isolated (domain/sandbox_networking.py), and it is replaced with each runtime generation.
            confinement.netns_path = self.netns_for(confinement.sandbox_id)
        command = [self._env, f"--default-signal={_SHIELDED_SIGNALS}"]
        if hard is None or confinement is None:
            bind = ["--bind", workspace_dir, WORKSPACE, *tmp_binds(workspace_dir)]
            prefix: list[str] = []
            outer_env = dict(env)
            chdir, command = sandbox_path(cwd), [*command, *argv]
        else:
            tmp = sandbox_tmp_dir(workspace_dir)  # staged like the workspace: see launch_chain
            namespace = self._launch_namespace(confinement, workspace_dir)
            staged_workspace, staged_tmp = staged_paths(hard, workspace_dir)
            bind = ["--bind", staged_workspace, WORKSPACE, "--args", "12",
                    *(["--bind", staged_tmp, "/tmp"] if tmp else ["--tmpfs", "/tmp"])]
            for name, point, read_only in confinement.mounts:  # volumes (infra.volume_binding), parents first
                bind += ["--ro-bind" if read_only else "--bind", f"{hard.stage_mounts_dir}/{name}", point]
            env_file = hard.write_env(confinement.sandbox_id, attempt_id, env)
            if namespace is not None:
                prefix = staged_chain_argv(hard, confinement, attempt_id, env_file, namespace_path(namespace))
            else:
                prefix = chain_argv(hard, confinement, workspace_dir, attempt_id, env_file)
            outer_env = {"PATH": CHAIN_PATH}
            # The cwd and argv[0] are checked inside, where they have to exist: start_check.
            chdir, command = "/", [*command, *start_check.exec_argv(sandbox_path(cwd), argv)]
        wrapped = [
            *prefix,
            *([] if prefix else [self._env, f"--ignore-signal={_SHIELDED_SIGNALS}"]),
            self._bwrap,
            *(self._namespace_args(confinement) if hard else []),
            *(self._rootfs_args(hard.stage_root_dir) if confinement is not None and confinement.rootfs
              else self._system_args),
            "--dir", WORKSPACE,
            *bind,
            "--dev", "/dev",
            "--proc", "/proc",
            "--unshare-pid",
            "--die-with-parent",
            "--chdir", chdir,
            "--",
            *command,
        ]
        # bwrap passes its own environment through to the command.
        if not prefix:
            return Launch(argv=wrapped, cwd=workspace_dir, env=outer_env, terminal=terminal)
        return Launch(argv=wrapped, cwd=workspace_dir, env=outer_env, terminal=terminal, start_report=True,
                      on_start_failed=lambda: self._forget_attempt(confinement, attempt_id))

    @staticmethod
    def _rootfs_args(source: str) -> list[str]:
        # The image's own system, writable through its overlay; DNS as on the host (the image's
        # resolv.conf names nothing this host can reach).
        return ["--bind", source, "/", "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"]

    def _launch_namespace(self, confinement: SandboxConfinement, workspace_dir: str) -> int | None:
        """The sandbox's launch namespace (infra.launch_namespace): a warm directory's, made before
        its claim, or one made now at its runtime's first launch (an image's overlay and volumes
        are in place by then, and a warm one has neither). None for a server that is not root,
        whose chain stages each launch itself."""
        hard = self.hardening
        if confinement.uid is None or not hard.nsenter or not hard.as_root:
            return None
        if confinement.launch_ns is None:
            made = None
            # A warm one holds the disk as it was made: no overlay, no volume bound since.
            warm = self.launch_ns_for(confinement.sandbox_id) if self.launch_ns_for is not None else None
            if warm is not None and (confinement.rootfs or confinement.mounts or confinement.volume_at_workspace):
                os.close(warm)
            else:
                made = warm
            if made is None:
                try:
                    made = make_launch_namespace(hard, workspace_dir, confinement.rootfs,
                                                 confinement.mounts_dir if confinement.mounts else None)
                except OSError as exc:
                    raise StartFailedError(str(exc)) from exc
            confinement.launch_ns = made
        return confinement.launch_ns

    @staticmethod
    def _namespace_args(confinement: SandboxConfinement | None) -> list[str]:
        # No --disable-userns: it nests a second user namespace, so uid_map would read "0 0 1"
        # inside; seccomp refuses new namespaces instead.
        args = ["--unshare-user", "--uid", "0", "--gid", "0",
                "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL"]
        if confinement is not None:
            args += ["--hostname", confinement.sandbox_id, "--seccomp", "10"]
        return args

    def translate_exit(self, status: ExitStatus, *, confinement: SandboxConfinement | None = None,
                       attempt_id: str = "") -> ExitStatus:
        code = status.exit_code
        if status.signal is None and code is not None:
            if _SIGNAL_EXIT_BASE < code <= _SIGNAL_EXIT_BASE + _MAX_SIGNAL:
                status = ExitStatus(exit_code=-1, signal=code - _SIGNAL_EXIT_BASE)
        killed = 0
        if confinement is not None and confinement.cgroup is not None and attempt_id:
            killed = confinement.cgroup.oom_kills(attempt_id)
        self._forget_attempt(confinement, attempt_id)
        if killed and status.signal == signal.SIGKILL:
            status = ExitStatus(exit_code=status.exit_code, signal=status.signal, reason=OOM_KILLED)
        return status

    def _forget_attempt(self, confinement: SandboxConfinement | None, attempt_id: str) -> None:
        """The attempt's environment file and its cgroup: what ``launch`` made for it."""
        if confinement is not None and self.hardening is not None:
            self.hardening.forget_env(confinement.sandbox_id, attempt_id)
        if confinement is not None and confinement.cgroup is not None and attempt_id:
            confinement.cgroup.forget_attempt(attempt_id)  # busy while the last tasks die: release() ends it


class BoundLauncher:
    """One sandbox's view of a launcher: every launch and exit carries its confinement."""

    def __init__(self, launcher: "HostLauncher | BubblewrapLauncher", confinement: SandboxConfinement | None) -> None:
        self.launcher = launcher
        self.confinement = confinement
        self.name = launcher.name

    def launch(self, workspace_dir: str, argv: list[str], cwd: str, env: dict[str, str],
               terminal: TerminalSize | None, attempt_id: str = "") -> Launch:
        if self.confinement is None:
            return self.launcher.launch(workspace_dir, argv, cwd, env, terminal)
        return self.launcher.launch(workspace_dir, argv, cwd, env, terminal,
                                    confinement=self.confinement, attempt_id=attempt_id)

    def translate_exit(self, status: ExitStatus, attempt_id: str = "") -> ExitStatus:
        if self.confinement is None:
            return self.launcher.translate_exit(status)
        return self.launcher.translate_exit(status, confinement=self.confinement, attempt_id=attempt_id)

    def usage(self) -> dict[str, int]:
        cgroup = self.confinement.cgroup if self.confinement else None
        return cgroup.usage() if cgroup is not None else {}

    def stats(self) -> dict[str, int]:
        cgroup = self.confinement.cgroup if self.confinement else None
        return cgroup.stats() if cgroup is not None else {}

    def freeze(self, frozen: bool) -> None:
        """The pause hook's freeze: with a freezer cgroup no process escapes by forking or by
        living in another process group (a PTY shell's background jobs)."""
        cgroup = self.confinement.cgroup if self.confinement else None
        if cgroup is not None:
            cgroup.freeze(frozen)

    def kill_all(self) -> None:
        """SIGKILL every task in the sandbox's cgroups, in one pass: frozen, killed, thawed, so
        the kills of a frozen sandbox (a pause) run at once instead of waiting for a thaw."""
        cgroup = self.confinement.cgroup if self.confinement else None
        if cgroup is not None:
            cgroup.kill_all()

    def release(self) -> None:
        """The runtime is gone: kill anything left in its cgroups and remove them."""
        hard = self.launcher.hardening
        if hard is not None and self.confinement is not None:
            hard.forget_all_env(self.confinement.sandbox_id)
        cgroup = self.confinement.cgroup if self.confinement else None
        try:
            if cgroup is None:
                return
            for _ in range(50):
                cgroup.kill_all()
                if cgroup.remove():
                    return
                time.sleep(0.02)  # killed tasks leave their cgroup a moment after the signal
            log.warning("sandbox %s: cgroups still busy after the release", self.confinement.sandbox_id)
        finally:
            if self.confinement is not None and self.confinement.launch_ns is not None:
                os.close(self.confinement.launch_ns)  # its copies of the overlay and volumes go with it
                self.confinement.launch_ns = None
            if self.confinement is not None and self.confinement.rootfs:  # after its processes are gone
                unmount_rootfs(self.confinement.workspace_dir)
                self.confinement.rootfs = None


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


def detect_launcher(name: str, work_dir: str | None = None,
                    pids_max: int = DEFAULT_PIDS_MAX, data_dir: str | None = None) -> HostLauncher | BubblewrapLauncher:
    """Build the launcher called ``name`` (the ``--runtime`` flag: "host" or "bwrap"), checking it works here.

    "bwrap" is the hardened launcher: ``infra.isolation_check`` says precisely what the host
    lacks, and starts one trial sandbox, before the server accepts any work. ``work_dir``
    holds the compiled seccomp program (a private temporary directory when not given).
    """
    if name == "host":
        return HostLauncher()
    if name != "bwrap":
        raise ValueError(f"unknown sandbox runtime {name!r} (expected 'host' or 'bwrap')")
    from . import isolation_check  # it builds on this module

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise LauncherUnavailableError("sandbox runtime 'bwrap' requested but bwrap is not on PATH")
    env = shutil.which("env")
    if env is None or not _env_has_signal_options(env):
        raise LauncherUnavailableError(
            "sandbox runtime 'bwrap' needs GNU env with --ignore-signal (coreutils >= 8.31)"
        )
    if work_dir is None:
        work_dir = tempfile.mkdtemp(prefix="sessiond-runtime-")
    hardening = isolation_check.prepare_hardening(work_dir, data_dir)
    hardening.pids_max = pids_max
    launcher = BubblewrapLauncher(os.path.abspath(bwrap), os.path.abspath(env), hardening=hardening)
    isolation_check.check_sandbox(launcher, work_dir)
    return launcher


def _env_has_signal_options(env: str) -> bool:
    try:
        probe = subprocess.run(
            [env, f"--ignore-signal={_SHIELDED_SIGNALS}", f"--default-signal={_SHIELDED_SIGNALS}", "true"],
            capture_output=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0
