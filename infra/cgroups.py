"""Per-sandbox cgroups: memory, pids, cpu weight and freezer, under the server's own cgroup.

Layout (cgroup v1, one hierarchy per controller): ``<mount>/<server's path>/sessiond-<tag>/<sandbox>``
in each of memory, pids, cpu and freezer (``<tag>``: the server's data dir, ``infra.instance``), and in memory one child per attempt,
``.../<sandbox>/<attempt>``. The limit sits on the sandbox; the attempt's own cgroup is
there to count OOM kills: v1 charges an OOM kill to the victim's memcg only (the counter
does not propagate to parents), so ``oom_kill`` of the attempt's cgroup says whether
*this* attempt lost a process to the OOM killer.

cgroup v2 (one hierarchy where the controllers are enabled): the sandbox is a sibling of
the server's cgroup (a v2 cgroup with processes cannot have controller-enabled children),
every process sits in an attempt leaf, and ``memory.events`` counts OOM kills per leaf.

Nesting under the server's own path keeps a server inside a container or a job cgroup
within its limits, and lets several servers on one machine stay out of each other's way; the
tag in the group's name lets a server started over the data dir of a killed one find and end
everything it left (``Cgroups.sweep``), and nothing of another server's.
"""
from __future__ import annotations

import errno
import os
import secrets
import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .warm_stock import WarmStock

# cpuacct (v1 only: v2 counts CPU time in every cgroup's cpu.stat) is there for the metrics.
CONTROLLERS = ("memory", "pids", "cpu", "freezer", "cpuacct")
LEGACY_GROUP = "sessiond"  # releases before the tag: one group shared by every server
WARM_PREFIX = ".warm-"  # cgroups made ahead for a sandbox not claimed yet (infra.warm_pool)


def group_name(data_dir: str) -> str:
    """The cgroup that holds the sandboxes of the server over ``data_dir``."""
    from .instance import instance_tag
    return f"sessiond-{instance_tag(data_dir)}"


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    pids_max: int
    cpu_weight: int  # v1 cpu.shares scale: 1024 = one ordinary task


def _own_paths() -> dict[str, str]:
    """controller (or "" for the v2 hierarchy) -> this process's cgroup path."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            for name in names.split(",") if names else [""]:
                paths[name] = path
    return paths


def _mounts() -> dict[str, tuple[str, str]]:
    """controller (or "" for cgroup2) -> (mount point, the cgroup it shows), from mountinfo."""
    found: dict[str, tuple[str, str]] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fstype, _, options = right.split()[:3]
            fields = left.split()
            mounted = (fields[4], fields[3])
            if fstype == "cgroup2":
                found.setdefault("", mounted)
            elif fstype == "cgroup":
                for opt in options.split(","):
                    if opt in CONTROLLERS:
                        found.setdefault(opt, mounted)
    return found


def _path_in(mounted: tuple[str, str], own: str) -> str:
    """Our cgroup as a directory under the mount (a container may mount a subtree at /)."""
    point, root = mounted
    if root != "/" and (own == root or own.startswith(root + "/")):
        own = own[len(root):] or "/"
    return point + own


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read_int(path: str, key: str | None = None) -> int:
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return 0
    if key is None:
        return int(text.split()[0]) if text.strip() and text.split()[0].isdigit() else 0
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


class SandboxCgroup:
    """The cgroups of one sandbox; ``join_files(attempt)`` are what its processes write into."""

    def __init__(self, dirs: dict[str, str], v2: bool) -> None:
        self.dirs = dirs  # controller -> directory (v2: every controller -> the one directory)
        self.v2 = v2

    def _attempt_dir(self, attempt_id: str) -> str | None:
        memory = self.dirs.get("memory")
        if memory is None or not attempt_id:
            return None
        return os.path.join(memory, attempt_id)

    def join_files(self, attempt_id: str) -> list[str]:
        """Create the attempt's cgroup; return the files a new process joins by writing into them:
        v2's ``cgroup.procs`` (its pid), v1's ``tasks`` (``0``: the writing thread itself).

        Why ``tasks`` with 0 on v1: a write to ``cgroup.procs`` moves a whole thread group, under a
        global lock whose first writer waits for an RCU grace period, 8-12 ms on the 2-vCPU VM and
        most of a launch's chain; the kernel moves the writing thread alone without that lock, and
        the launch chain's shell is single-threaded, so that is the same move."""
        attempt = self._attempt_dir(attempt_id)
        if attempt is not None:
            os.makedirs(attempt, exist_ok=True)
        if self.v2:
            return [os.path.join(attempt or self.dirs["pids"], "cgroup.procs")]
        files = []
        for controller, path in self.dirs.items():
            target = attempt if controller == "memory" and attempt else path
            files.append(os.path.join(target, "tasks"))
        return files

    def oom_kills(self, attempt_id: str) -> int:
        attempt = self._attempt_dir(attempt_id)
        if attempt is None:
            return 0
        if self.v2:
            return _read_int(os.path.join(attempt, "memory.events"), "oom_kill")
        return _read_int(os.path.join(attempt, "memory.oom_control"), "oom_kill")

    def forget_attempt(self, attempt_id: str) -> None:
        attempt = self._attempt_dir(attempt_id)
        if attempt is not None:
            _rmdir(attempt)

    def set_memory(self, memory_bytes: int) -> None:
        memory = self.dirs.get("memory")
        if memory is None:
            return
        if self.v2:
            _write(os.path.join(memory, "memory.max"), str(memory_bytes))
            _try_write(os.path.join(memory, "memory.swap.max"), "0")
            return
        limit, memsw = (os.path.join(memory, f) for f in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"))
        # memsw (memory + swap) must stay >= the memory limit: raise it first, lower it last.
        if _read_int(limit) < memory_bytes:
            _try_write(memsw, str(memory_bytes))
            _write(limit, str(memory_bytes))
        else:
            _write(limit, str(memory_bytes))
            _try_write(memsw, str(memory_bytes))

    def usage(self) -> dict[str, int]:
        out: dict[str, int] = {}
        memory, pids = self.dirs.get("memory"), self.dirs.get("pids")
        if memory is not None:
            names = ("memory.current", "memory.max") if self.v2 else ("memory.usage_in_bytes",
                                                                       "memory.limit_in_bytes")
            out["container_memory_usage"] = _read_int(os.path.join(memory, names[0]))
            out["container_memory_limit"] = _read_int(os.path.join(memory, names[1]))
        if pids is not None:
            out["pids"] = _read_int(os.path.join(pids, "pids.current"))
        return out

    def stats(self) -> dict[str, int]:
        """What the sandbox's metrics sample: CPU time (ns), memory used, its working set (used
        minus inactive page cache, what the OOM killer looks at), the limit, processes."""
        out = self.usage()
        memory = self.dirs.get("memory")
        if memory is not None:
            inactive = _read_int(os.path.join(memory, "memory.stat"), "inactive_file" if self.v2 else
                                 "total_inactive_file")
            out["memory_working_set"] = max(0, out["container_memory_usage"] - inactive)
        if self.v2 and "cpu" in self.dirs:
            out["cpu_ns"] = _read_int(os.path.join(self.dirs["cpu"], "cpu.stat"), "usage_usec") * 1000
        elif "cpuacct" in self.dirs:
            out["cpu_ns"] = _read_int(os.path.join(self.dirs["cpuacct"], "cpuacct.usage"))
        return out

    def pids(self) -> set[int]:
        found: set[int] = set()
        for root in set(self.dirs.values()):
            for dirpath, _, files in os.walk(root):
                if "cgroup.procs" in files:
                    try:
                        with open(os.path.join(dirpath, "cgroup.procs")) as f:
                            found.update(int(line) for line in f if line.strip())
                    except OSError as exc:  # an attempt's cgroup removed as its last task left
                        if exc.errno not in (errno.ENOENT, errno.ENODEV):
                            raise
        return found

    def freeze(self, frozen: bool) -> None:
        """Stop (or restart) every task of the sandbox at once, whatever its process group."""
        freezer = self.dirs.get("freezer")
        if freezer is None:
            return
        if self.v2:
            _try_write(os.path.join(freezer, "cgroup.freeze"), "1" if frozen else "0")
        else:
            _try_write(os.path.join(freezer, "freezer.state"), "FROZEN" if frozen else "THAWED")

    def kill_all(self) -> None:
        """SIGKILL whatever is left; a freezer stops a fork bomb from outrunning the kills."""
        freezer = self.dirs.get("freezer")
        state = os.path.join(freezer, "freezer.state") if freezer and not self.v2 else None
        if self.v2 and self.dirs:
            _try_write(os.path.join(next(iter(self.dirs.values())), "cgroup.kill"), "1")  # Linux 5.14+
        if state:
            _try_write(state, "FROZEN")
        for _ in range(3):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if state:
            _try_write(state, "THAWED")  # killed tasks only die once thawed

    def remove(self) -> bool:
        """rmdir every directory (attempts first); False while a process still holds one."""
        removed = True
        for root in set(self.dirs.values()):
            if not os.path.isdir(root):
                continue
            for dirpath, dirnames, _ in os.walk(root, topdown=False):
                removed = _rmdir(dirpath) and removed
        return removed


def _rmdir(path: str) -> bool:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno in (errno.EBUSY, errno.ENOTEMPTY):
            return False
        raise
    return True


def _try_write(path: str, value: str) -> None:
    try:
        _write(path, value)
    except OSError:
        pass  # optional knob (memsw without swap accounting, freezer absent)


class Cgroups:
    """Finds where each controller lives and makes sandbox cgroups there."""

    def __init__(self, bases: dict[str, str], v2: bool) -> None:
        self.bases = bases  # controller -> the directory that holds the sandboxes' cgroups
        self.v2 = v2
        self.warm: WarmStock | None = None  # cgroups made ahead (infra.warm_pool); None: none kept

    def sweep(self, legacy_names: set[str] = frozenset()) -> int:
        """Before any sandbox runs: end and remove every sandbox cgroup under this server's
        group, all of them left by an earlier server over the same data dir (one server per
        data dir): its processes, frozen or not, its per-attempt children, its freezer state.
        ``legacy_names`` (this data dir's sandbox ids) are looked for in the untagged group of
        older releases too. Returns how many sandbox cgroups were removed."""
        found: dict[tuple[bool, str], dict[str, str]] = {}  # (legacy?, sandbox) -> controller -> dir
        for controller, base in self.bases.items():
            legacy = os.path.join(os.path.dirname(base), LEGACY_GROUP)
            for root, names in ((base, None), (legacy, legacy_names)):
                if root == base and names is not None:
                    continue
                try:
                    entries = [e.name for e in os.scandir(root) if e.is_dir()]
                except OSError:
                    continue
                for name in entries:
                    if names is None or name in names:
                        found.setdefault((names is not None, name), {})[controller] = os.path.join(root, name)
        for dirs in found.values():
            cgroup = SandboxCgroup(dirs, self.v2)
            for _ in range(50):
                cgroup.kill_all()
                if cgroup.remove():
                    break
                time.sleep(0.02)  # killed tasks leave their cgroup a moment after the signal
        return len(found)

    def remove_group(self) -> None:
        """At shutdown, once every sandbox's cgroups are gone: the server's own group too."""
        for base in set(self.bases.values()):
            _rmdir(base)

    @classmethod
    def detect(cls, group: str = LEGACY_GROUP) -> "Cgroups":
        mounts, own = _mounts(), _own_paths()
        bases: dict[str, str] = {}
        for controller in CONTROLLERS:
            if controller in mounts and controller in own:
                bases[controller] = os.path.join(_path_in(mounts[controller], own[controller]), group)
        if bases or "" not in mounts or "" not in own:
            return cls(bases, v2=False)
        ours = _path_in(mounts[""], own[""]).rstrip("/")
        parent = ours if own[""] in ("", "/") else os.path.dirname(ours)  # the root may have both
        try:
            with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                enabled = f.read().split()
        except OSError:
            enabled = []
        base = os.path.join(parent, group)
        return cls({c: base for c in CONTROLLERS if c in enabled or c == "freezer" and enabled}, v2=True)

    def missing(self) -> list[str]:
        return [c for c in CONTROLLERS if c not in self.bases]

    def create(self, sandbox_id: str, limits: Limits) -> SandboxCgroup:
        dirs = {c: os.path.join(base, sandbox_id) for c, base in self.bases.items()}
        left_over = any(os.path.isdir(path) for path in dirs.values())
        cgroup = None
        if not left_over and self.warm is not None:
            got = self.warm.take(None)
            if got is not None:
                cgroup = self._adopt(got[0], dirs)
        if cgroup is None:
            for path in dirs.values():
                os.makedirs(path, exist_ok=True)
            cgroup = SandboxCgroup(dirs, self.v2)
            if left_over:
                # A server that died during a pause left the sandbox's processes frozen: SIGKILL
                # cannot end a frozen task, and a new runtime's processes would freeze on joining.
                cgroup.kill_all()
                cgroup.freeze(False)
            self._delegate(dirs)
        cgroup.set_memory(limits.memory_bytes)
        if "pids" in dirs:
            _write(os.path.join(dirs["pids"], "pids.max"), str(limits.pids_max))
        if "cpu" in dirs:
            if self.v2:  # cpu.weight 1-10000, 100 = default; shares 1024 = default
                _write(os.path.join(dirs["cpu"], "cpu.weight"), str(max(1, min(10000, limits.cpu_weight * 100 // 1024))))
            else:
                _write(os.path.join(dirs["cpu"], "cpu.shares"), str(limits.cpu_weight))
        return cgroup

    def _delegate(self, dirs: dict[str, str]) -> None:
        if self.v2:
            base = next(iter(dirs.values()))
            wanted = [c for c in ("memory", "pids", "cpu") if c in dirs]
            _try_write(os.path.join(os.path.dirname(base), "cgroup.subtree_control"),
                       " ".join("+" + c for c in wanted))
            _try_write(os.path.join(base, "cgroup.subtree_control"), " ".join("+" + c for c in wanted))

    # ---- the warm pool's cgroups (infra.warm_pool) ------------------------------------------
    def make_warm(self, shape=None) -> dict[str, str]:
        """Empty cgroups under this server's tagged group, named for no sandbox yet: a claim
        renames them to its sandbox's (limits are written then). Never made twice: a new name."""
        name = WARM_PREFIX + secrets.token_hex(8)
        dirs = {c: os.path.join(base, name) for c, base in self.bases.items()}
        try:
            for path in dirs.values():
                os.makedirs(path)
            self._delegate(dirs)
        except BaseException:
            SandboxCgroup(dirs, self.v2).remove()
            raise
        return dirs

    def destroy_warm(self, dirs: dict[str, str]) -> None:
        SandboxCgroup(dirs, self.v2).remove()

    def _adopt(self, warm: dict[str, str], dirs: dict[str, str]) -> SandboxCgroup | None:
        """The warm cgroups under the sandbox's name; None (and they are gone) when the hierarchy
        refuses a rename: the caller makes them as before."""
        done = []
        try:
            for controller, path in dirs.items():
                os.rename(warm[controller], path)
                done.append(controller)
        except OSError:
            SandboxCgroup({c: warm[c] for c in warm if c not in done}, self.v2).remove()
            SandboxCgroup({c: dirs[c] for c in done}, self.v2).remove()
            return None
        return SandboxCgroup(dirs, self.v2)
