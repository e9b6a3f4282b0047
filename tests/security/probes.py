"""Probe scripts run inside a real sandbox; each prints one ``name result`` line per attempt.

A result is ``refused:<why>`` when the escape failed and ``ESCAPED:<what>`` when it worked.
They are plain Python (``/usr/bin/python3`` of the read-only system) so they need nothing
from the host beyond what every sandbox sees.
"""
from __future__ import annotations

ESCAPES = r'''
import ctypes, ctypes.util, errno, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)

def report(name, escaped, detail=""):
    print(name, ("ESCAPED:" if escaped else "refused:") + str(detail).replace(" ", "_")[:80], flush=True)

def attempt(name, fn):
    try:
        detail = fn()
    except OSError as exc:
        report(name, False, errno.errorcode.get(exc.errno, exc.errno))
    except subprocess.CalledProcessError as exc:
        report(name, False, "exit%d" % exc.returncode)
    else:
        report(name, True, detail)

def run(*argv):
    subprocess.run(argv, check=True, capture_output=True)
    return " ".join(argv)

def write(path, data="1"):
    with open(path, "w") as f:
        f.write(data)
    return path

def inherited_fds():
    # Anything beyond stdio that the server or the launch chain left open would be a handle
    # on the host (a directory fd is enough to walk out of the mount namespace).
    extra = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue  # the directory listing's own descriptor, closed by now
        if int(fd) > 2:
            extra.append((fd, target))
    if extra:
        return repr(extra)
    raise OSError(errno.EBADF, "none")

attempt("inherited_fds", inherited_fds)  # first, before the probes below open anything
attempt("remount_usr_rw", lambda: run("mount", "-o", "remount,rw", "/usr"))
attempt("remount_etc_rw", lambda: run("mount", "-o", "remount,rw", "/etc"))
attempt("write_usr", lambda: write("/usr/local/share/sessiond-probe"))
attempt("write_etc", lambda: write("/etc/sessiond-probe"))

class Handle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * 128)]

def handles():
    h = Handle(handle_bytes=128)
    mount_id = ctypes.c_int()
    if libc.name_to_handle_at(-100, b"/workspace", ctypes.byref(h), ctypes.byref(mount_id), 0) != 0:
        raise OSError(ctypes.get_errno(), "name_to_handle_at")
    return h

def open_by_handle():
    # The classic shocker escape: a handle for inode 2 (the root of an ext4/xfs filesystem)
    # opened through any fd on that filesystem reaches the host's whole filesystem.
    fd = os.open("/workspace", os.O_RDONLY)
    h = Handle(handle_bytes=8, handle_type=1)
    h.f_handle[0] = 2
    got = libc.open_by_handle_at(fd, ctypes.byref(h), os.O_RDONLY)
    os.close(fd)
    if got < 0:
        raise OSError(ctypes.get_errno(), "open_by_handle_at")
    return os.listdir("/proc/self/fd/%d" % got)[:5]

attempt("name_to_handle_at", lambda: handles() and "handle")
attempt("open_by_handle_at", open_by_handle)

attempt("proc_sys_drop_caches", lambda: write("/proc/sys/vm/drop_caches", "3"))
attempt("proc_sys_hostname", lambda: write("/proc/sys/kernel/hostname", "pwned"))
attempt("proc_sys_core_pattern", lambda: write("/proc/sys/kernel/core_pattern", "|/workspace/x"))
attempt("sysrq_trigger", lambda: write("/proc/sysrq-trigger", "h"))
os.makedirs("/tmp/cg", exist_ok=True)
attempt("mount_cgroup2", lambda: run("mount", "-t", "cgroup2", "none", "/tmp/cg"))
attempt("mount_cgroup_v1", lambda: run("mount", "-t", "cgroup", "-o", "memory", "none", "/tmp/cg"))
attempt("mount_proc", lambda: run("mount", "-t", "proc", "proc", "/tmp/cg"))
attempt("sys_visible", lambda: os.listdir("/sys"))
attempt("dmesg", lambda: run("dmesg"))
attempt("kmsg", lambda: open("/dev/kmsg").read(1))
attempt("unshare_user", lambda: run("unshare", "--user", "--map-root-user", "true"))
attempt("unshare_mount", lambda: run("unshare", "--mount", "true"))

def uid_map():
    with open("/proc/self/uid_map") as f:
        inside, outside, count = f.read().split()
    if outside == "0":
        return "host root: " + outside
    raise OSError(errno.EPERM, "mapped to " + outside)

def caps():
    with open("/proc/self/status") as f:
        eff = [l.split()[1] for l in f if l.startswith("CapEff")][0]
    if int(eff, 16):
        return "CapEff " + eff
    raise OSError(errno.EPERM, "none")

def host_processes():
    # Host processes (the server runs as host root, unmapped here: uid 65534) must be
    # invisible, and so must every other sandbox's.
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    foreign = [p for p in pids if os.stat("/proc/" + p).st_uid != os.getuid()]
    if foreign or len(pids) > 20:
        return "visible: %d pids, foreign %s" % (len(pids), foreign[:5])
    raise OSError(errno.ESRCH, "%d_own_pids" % len(pids))

attempt("host_processes", host_processes)
attempt("host_root_uid", uid_map)
attempt("capabilities", caps)
with open("/proc/self/status") as f:
    for line in f:
        if line.startswith(("NoNewPrivs", "Seccomp:")):
            print("status", line.split()[0].rstrip(":") + "=" + line.split()[1])
'''

# One sandbox leaves a SysV segment and an abstract socket, the other looks for them.
IPC_OWNER = r'''
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(0x5E55, 4096, 0o1666)
print("shmid", shmid, flush=True)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(b"\0sessiond-probe-" + sys.argv[1].encode())
srv.listen(1)
print("listening", flush=True)
conn, _ = srv.accept()
conn.sendall(b"secret-from-a")
'''

IPC_INTRUDER = r'''
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(0x5E55, 0, 0)
print("shm", "ESCAPED:found" if shmid >= 0 else "refused:" + errno.errorcode[ctypes.get_errno()])
with open("/proc/sysvipc/shm") as f:
    keys = [line.split()[0] for line in f.readlines()[1:]]
print("shm_list", "ESCAPED:listed" if "24149" in keys else "refused:not_listed")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(b"\0sessiond-probe-" + sys.argv[1].encode())
    print("abstract_socket", "ESCAPED:" + s.recv(64).decode())
except OSError as exc:
    print("abstract_socket", "refused:" + errno.errorcode.get(exc.errno, str(exc.errno)))
'''
