"""The start-up check of the hardened runtime: does this host give us what it needs?

``sessiond serve`` (through ``detect_launcher("bwrap")``) refuses to start a sandbox runtime
that would silently be weaker than documented. It names what is missing: unprivileged
user namespaces, the tools of the launch chain, libseccomp, the memory and pids cgroup
controllers. Then it starts one real sandbox the way every session starts and reads back,
from inside, that it is root only in its own user namespace, with no capabilities,
no_new_privs and a seccomp filter (having joined its cgroups first).
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .cgroups import Cgroups, group_name
from .launch_chain import STAGE_DIR, STAGE_MOUNTS_DIR, STAGE_ROOT_DIR, STAGE_TMP_DIR, Hardening
from .bubblewrap import BubblewrapLauncher, LauncherUnavailableError

log = logging.getLogger(__name__)

REQUIRED_CONTROLLERS = ("memory", "pids")
# Joining the cgroups happens before bwrap; a failure there ends the trial with exit 125.
_PROBE = "cat /proc/self/uid_map; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status"


def userns_problem() -> str | None:
    for path, bad in (("/proc/sys/user/max_user_namespaces", "0"),
                      ("/proc/sys/kernel/unprivileged_userns_clone", "0")):
        try:
            with open(path) as f:
                if f.read().strip() == bad:
                    return f"user namespaces are disabled ({path} is {bad})"
        except OSError:
            continue
    return None


def prepare_hardening(work_dir: str, data_dir: str | None = None) -> Hardening:
    """Everything the hardened launch needs, or LauncherUnavailableError saying what is missing."""
    problems = []
    problem = userns_problem()
    if problem:
        problems.append(problem)
    tools = {name: shutil.which(name) for name in ("bash", "setpriv", "unshare", "mount", "nsenter")}
    for name in ("bash", "setpriv", "unshare", "mount"):
        if tools[name] is None:
            problems.append(f"{name} is not on PATH (package {'bash' if name == 'bash' else 'util-linux'})")
    try:
        os.makedirs(STAGE_DIR, mode=0o755, exist_ok=True)
        os.makedirs(STAGE_TMP_DIR, mode=0o755, exist_ok=True)
        os.makedirs(STAGE_ROOT_DIR, mode=0o755, exist_ok=True)
        os.makedirs(STAGE_MOUNTS_DIR, mode=0o755, exist_ok=True)
    except OSError as exc:
        problems.append(f"cannot create the staging dir {STAGE_DIR}: {exc}")
    try:
        from .seccomp_filter import write_program
        program = write_program(work_dir)
    except (ImportError, OSError, RuntimeError, AttributeError) as exc:
        problems.append(f"cannot build the seccomp filter (libseccomp2 + pyseccomp): {exc}")
        program = ""
    cgroups = None
    if os.geteuid() == 0:
        # Without a data dir (a runtime made on its own, as tests do) its work dir names it.
        cgroups = Cgroups.detect(group_name(data_dir or work_dir))
        ours = os.path.join(data_dir, "sandboxes") if data_dir else ""
        legacy = set(os.listdir(ours)) if ours and os.path.isdir(ours) else set()
        removed = cgroups.sweep(legacy)  # before the trial sandbox and any sandbox of ours runs
        if removed:
            log.info("removed %d sandbox cgroup(s) left by an earlier server over this data dir "
                     "(their processes killed)", removed)
        missing = [c for c in REQUIRED_CONTROLLERS if c not in cgroups.bases]
        if missing:
            problems.append("cgroup controller(s) not mounted or not enabled: " + ", ".join(missing))
    if problems:
        raise LauncherUnavailableError("hardened bwrap runtime unavailable: " + "; ".join(problems)
                                       + " (use --runtime host to run without isolation)")
    launch_dir = os.path.join(work_dir, "launch")
    os.makedirs(launch_dir, mode=0o700, exist_ok=True)
    hardening = Hardening(bash=tools["bash"], setpriv=tools["setpriv"], unshare=tools["unshare"],
                          mount=tools["mount"], nsenter=tools["nsenter"], umount=shutil.which("umount"),
                          seccomp_program=program, cgroups=cgroups, launch_dir=launch_dir)
    hardening.forget_all_env()  # a crashed server's: its processes read them long ago
    return hardening


def check_sandbox(launcher: BubblewrapLauncher, work_dir: str) -> None:
    """Start one real hardened sandbox and check, from inside, that it is what we promise."""
    root = Path(tempfile.mkdtemp(prefix="check-", dir=work_dir))
    sandbox_id = f"sessiond-check-{os.getpid()}"
    workspace = root / sandbox_id / "workspace"
    workspace.mkdir(parents=True)
    bound = None
    try:
        bound = launcher.isolate(sandbox_id, str(workspace), {})
        launch = bound.launch(str(workspace), ["sh", "-c", _PROBE], "", {"PATH": "/usr/bin:/bin"}, None,
                              attempt_id="check")
        proc = subprocess.run(launch.argv, cwd=launch.cwd, env=launch.env, capture_output=True,
                              timeout=20, check=False)
        out = proc.stdout.decode(errors="replace")
        bound.translate_exit(_status(proc.returncode), attempt_id="check")
        problems = _judge(proc.returncode, out, proc.stderr.decode(errors="replace"), bound)
    except (OSError, subprocess.TimeoutExpired) as exc:
        problems = [f"the trial sandbox could not be started: {exc}"]
    finally:
        if bound is not None:
            bound.release()
        shutil.rmtree(root, ignore_errors=True)
    if problems:
        raise LauncherUnavailableError("hardened bwrap runtime check failed: " + "; ".join(problems)
                                       + " (use --runtime host to run without isolation)")


def _status(returncode: int):
    from session_supervisor.domain.ports import ExitStatus
    return ExitStatus(returncode) if returncode >= 0 else ExitStatus(-1, -returncode)


def _judge(returncode: int, out: str, err: str, bound) -> list[str]:
    if returncode != 0:
        return [f"the trial sandbox exited {returncode}: {err.strip() or out.strip()}"]
    lines = out.splitlines()
    fields = dict(line.split(":", 1) for line in lines if line.split(":", 1)[0] in
                  ("CapEff", "NoNewPrivs", "Seccomp"))
    problems = []
    mapping = lines[0].split() if lines else []
    if os.geteuid() == 0 and (len(mapping) != 3 or mapping[0] != "0" or mapping[1] == "0"):
        problems.append(f"uid 0 inside is not an unprivileged uid outside (uid_map {lines[:1]})")
    if int(fields.get("CapEff", "1").strip() or "1", 16) != 0:
        problems.append(f"the sandbox has capabilities (CapEff {fields.get('CapEff', '?').strip()})")
    if fields.get("NoNewPrivs", "").strip() != "1":
        problems.append("no_new_privs is not set")
    if fields.get("Seccomp", "").strip() != "2":
        problems.append("the seccomp filter is not loaded")
    return problems


SERVER_OOM_SCORE_ADJ = -900  # sandbox processes get +500 (infra.bubblewrap._CHAIN)


def protect_from_oom() -> None:
    """Make the server the kernel OOM killer's last choice (needs root; otherwise a no-op)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(SERVER_OOM_SCORE_ADJ))
    except OSError:
        pass
