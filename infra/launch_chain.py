"""The launch chain: what runs, as root, between the server's fork and bubblewrap.

``staged_chain_argv`` prefixes every hardened launch of a sandbox with a uid of its own (the
server runs as root): the ``_STAGED_CHAIN`` shell, then nsenter (the sandbox's mount namespace,
where its directories are staged already, infra.launch_namespace; its network namespace; its uid
and gid, no supplementary groups), then bwrap. ``chain_argv`` is the chain of a server that is
not root: unshare --mount, the ``_CHAIN`` shell, which stages them itself, then setpriv.

Every step is a process started before the tenant's command, so each one is on the path of a
session's first byte: on the 2-vCPU VM an exec of a small tool costs 1-3 ms. So the chain has
as few as it can: no mount namespace and no ``mount`` of its own (the sandbox's namespace is made
once, before its claim when the warm pool has one); nsenter joins both namespaces and drops to
the sandbox's uid (setpriv was a step of its own); the shell ignores the shielded signals itself
before it execs (``env --ignore-signal`` was another). ``no_new_privs`` is set by bubblewrap
before anything of the tenant runs (it needs it for the seccomp filter).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from .cgroups import Cgroups
from .confinement import DEFAULT_PIDS_MAX, SandboxConfinement
from .sandbox_disk import MOUNT_NAME
from .sandbox_tmp import sandbox_tmp_dir

STAGE_DIR = "/run/sessiond/workspace"  # traversable by every uid; a mount point per launch
STAGE_TMP_DIR = "/run/sessiond/tmp"     # the same for the sandbox's on-disk /tmp
STAGE_ROOT_DIR = "/run/sessiond/rootfs"  # the same for an image sandbox's overlay (infra.rootfs)
STAGE_MOUNTS_DIR = "/run/sessiond/mounts"  # the same for volumes bound elsewhere (infra.volume_binding)
CHAIN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# Catchable signals the outer bwrap must ignore: it has no handler, and dying it would take the
# sandbox with it (--die-with-parent) on a plain SIGTERM to the group (infra.bubblewrap).
SHIELDED_SIGNALS = ("HUP", "INT", "QUIT", "USR1", "USR2", "PIPE", "ALRM", "TERM")


@dataclass
class Hardening:
    """What the hardened launch needs from the host, found once by ``detect_launcher``."""

    bash: str
    setpriv: str
    unshare: str
    mount: str
    nsenter: str | None
    seccomp_program: str              # compiled BPF (infra.seccomp_filter)
    cgroups: Cgroups | None
    as_root: bool = field(default_factory=lambda: os.geteuid() == 0)
    pids_max: int = DEFAULT_PIDS_MAX
    stage_dir: str = STAGE_DIR
    stage_tmp_dir: str = STAGE_TMP_DIR
    stage_root_dir: str = STAGE_ROOT_DIR
    stage_mounts_dir: str = STAGE_MOUNTS_DIR
    launch_dir: str = ""               # root-only: each attempt's environment for bwrap --args
    umount: str | None = None
    # Mount points a sandbox's launch namespace detaches once staged: the data dir and /run/netns
    # (infra.mount_scope, infra.launch_namespace).
    detach: list[str] = field(default_factory=list)

    def env_file(self, sandbox_id: str, attempt_id: str) -> str:
        return os.path.join(self.launch_dir, f"{sandbox_id}.{attempt_id or 'launch'}.env")

    def write_env(self, sandbox_id: str, attempt_id: str, env: dict[str, str]) -> str:
        path = self.env_file(sandbox_id, attempt_id)
        args = ["--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(arg.encode() + b"\0" for arg in args))
        return path

    def forget_env(self, sandbox_id: str, attempt_id: str) -> None:
        try:
            os.unlink(self.env_file(sandbox_id, attempt_id))
        except FileNotFoundError:
            pass

    def forget_all_env(self, sandbox_id: str | None = None) -> None:
        """Attempts that never started (or a crashed server's) leave their files behind."""
        prefix = f"{sandbox_id}." if sandbox_id else ""
        for name in os.listdir(self.launch_dir):
            if name.startswith(prefix) and name.endswith(".env"):
                try:
                    os.unlink(os.path.join(self.launch_dir, name))
                except FileNotFoundError:
                    pass


# Runs as the server's child, before anything of the tenant, in a mount namespace of its
# own (``unshare --mount``): join the sandbox's cgroups (so not even a first fork escapes
# the limits), make the sandbox the OOM killer's choice, bind the workspace and /tmp (together:
# the root of the sandbox's disk, when they are on one), an image sandbox's overlay root, and the
# volumes it mounts elsewhere, recursively, onto the staging dirs (bwrap runs as the sandbox uid,
# which cannot traverse the data dir: 0700 parents such as /root), close every inherited
# descriptor (the runners' spawn closes them already, infra.spawn, but one pointing at the data
# dir would be a way out: the chain does not rely on whoever started it), open the seccomp
# program and the session's environment, ignore the shielded signals, then exec the rest:
# nsenter [--net] (sandbox uid) bwrap.
#
# The session's environment reaches only the command inside the sandbox: bwrap reads it
# from fd 12 (``--args``, NUL-separated ``--setenv K V``) and everything before runs with a
# fixed PATH alone. Spec env such as LD_PRELOAD=/workspace/x.so would otherwise be loaded
# by these root-run tools. bash runs with --norc -p: with socket stdio (the pipe runner's
# socketpairs) Debian's bash would read ~/.bashrc, and BASH_ENV or exported functions must
# not reach a root shell.
#
# The start report (infra.start_check): the runner's pipe, named by SESSIOND_START_REPORT_FD,
# is moved to fd 9 first (before any fd is opened or closed here) and kept open for the
# sandbox's last step, which closes it before it execs the tenant's command.
_STAGED_CHAIN = r"""
[ -z "$SESSIOND_START_REPORT_FD" ] || { exec 9>&"$SESSIOND_START_REPORT_FD"; } || exit 125
n=$1; shift
while [ "$n" -gt 0 ]; do case $1 in */tasks) echo 0 ;; *) echo $$ ;; esac > "$1" || exit 125; shift; n=$((n-1)); done
echo 500 2>/dev/null > /proc/self/oom_score_adj
for fd in /proc/$$/fd/*; do n=${fd##*/}; [ "$n" -gt 2 ] && { [ "$n" != 9 ] || [ -z "$SESSIOND_START_REPORT_FD" ]; } && eval "exec $n>&-"; done
exec 10<"$1" 12<"$2" || exit 125
shift 2
cd / || exit 125
unset SESSIOND_START_REPORT_FD
trap '' @SHIELDED@
exec "$@"
""".replace("@SHIELDED@", " ".join(SHIELDED_SIGNALS))

_CHAIN = r"""
[ -z "$SESSIOND_START_REPORT_FD" ] || { exec 9>&"$SESSIOND_START_REPORT_FD"; } || exit 125
n=$1; shift
while [ "$n" -gt 0 ]; do case $1 in */tasks) echo 0 ;; *) echo $$ ;; esac > "$1" || exit 125; shift; n=$((n-1)); done
echo 500 2>/dev/null > /proc/self/oom_score_adj
"$1" -n --rbind "$3" "$4" || exit 125
[ -z "$6" ] || "$1" -n --bind "$6" "$7" || exit 125
[ -z "$8" ] || "$1" -n --bind "$8" "$9" || exit 125
[ -z "${10}" ] || "$1" -n --rbind "${10}" "${11}" || exit 125
for fd in /proc/$$/fd/*; do n=${fd##*/}; [ "$n" -gt 2 ] && { [ "$n" != 9 ] || [ -z "$SESSIOND_START_REPORT_FD" ]; } && eval "exec $n>&-"; done
exec 10<"$2" 12<"$5" || exit 125
shift 11
unset SESSIOND_START_REPORT_FD
trap '' @SHIELDED@
exec "$@"
""".replace("@SHIELDED@", " ".join(SHIELDED_SIGNALS))


def staged_chain_argv(hard: Hardening, confinement: SandboxConfinement, attempt_id: str, env_file: str,
                      namespace: str) -> list[str]:
    """The chain of a sandbox with a uid of its own: bwrap starts in the sandbox's launch namespace
    (``namespace``, infra.launch_namespace), where its directories are staged already."""
    joins = confinement.cgroup.join_files(attempt_id) if confinement.cgroup is not None else []
    chain = [hard.bash, "--norc", "-p", "-c", _STAGED_CHAIN, "sandbox-init", str(len(joins)), *joins,
             hard.seccomp_program, env_file, hard.nsenter, f"--mount={namespace}"]
    if confinement.netns_path:
        chain.append(f"--net={confinement.netns_path}")
    return chain + ["-S", str(confinement.uid), "-G", str(confinement.uid)]  # -G drops supplementary groups


def staged_together(workspace_dir: str) -> str | None:
    """The directory holding both the workspace and /tmp when one bind of it can stage both: a
    sandbox's own disk, whose root every uid may traverse (its processes still see only the two).
    A sandbox directory on the data dir's filesystem is 0700: there each is bound on its own."""
    parent = os.path.dirname(workspace_dir.rstrip("/"))
    if os.path.basename(parent) != MOUNT_NAME or sandbox_tmp_dir(workspace_dir) is None:
        return None
    try:
        return parent if os.stat(parent).st_mode & 0o001 else None
    except OSError:
        return None


def staged_paths(hard: Hardening, workspace_dir: str) -> tuple[str, str]:
    """Where bwrap finds the workspace and /tmp inside the chain's mount namespace."""
    if staged_together(workspace_dir):
        return f"{hard.stage_dir}/workspace", f"{hard.stage_dir}/tmp"
    return hard.stage_dir, hard.stage_tmp_dir


def chain_argv(hard: Hardening, confinement: SandboxConfinement, workspace_dir: str, attempt_id: str,
               env_file: str) -> list[str]:
    joins = confinement.cgroup.join_files(attempt_id) if confinement.cgroup is not None else []
    # One recursive bind of the disk's root where it holds both (each mount is a process of its
    # own, 2-4 ms); recursive, so a volume bound at the workspace comes along.
    together = staged_together(workspace_dir)
    tmp = "" if together else sandbox_tmp_dir(workspace_dir) or ""
    chain = [hard.unshare, "--mount", "--propagation", "private", hard.bash, "--norc", "-p", "-c",
             _CHAIN, "sandbox-init", str(len(joins)), *joins,
             hard.mount, hard.seccomp_program, together or workspace_dir, hard.stage_dir, env_file,
             tmp, hard.stage_tmp_dir, confinement.rootfs or "", hard.stage_root_dir,
             confinement.mounts_dir if confinement.mounts else "", hard.stage_mounts_dir]
    if hard.nsenter and (confinement.netns_path or confinement.uid is not None):
        chain.append(hard.nsenter)
        if confinement.netns_path:
            chain.append(f"--net={confinement.netns_path}")
        if confinement.uid is not None:  # -G also drops every supplementary group
            chain += ["-S", str(confinement.uid), "-G", str(confinement.uid)]
        return chain
    chain.append(hard.setpriv)
    if confinement.uid is not None:
        chain += [f"--reuid={confinement.uid}", f"--regid={confinement.uid}", "--clear-groups"]
    return chain + ["--no-new-privs"]
