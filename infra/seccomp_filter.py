"""The seccomp program every hardened sandbox runs under (bubblewrap loads it: ``--seccomp FD``).

Built with libseccomp through ``pyseccomp``: a ctypes binding, API-compatible with
libseccomp's own Python module, that loads the distribution's ``libseccomp.so.2``. We
prefer it to Debian's ``python3-seccomp`` because that one is compiled for the system
interpreter and cannot be installed into the project's virtualenv; to hand-assembled BPF
because libseccomp resolves syscall numbers per architecture (x32/i386 aliases included)
and is what bubblewrap, Flatpak and Docker rely on.

A deny-list, not an allow-list: the workloads (compilers, pip, node, the agent CLIs) use
a large and growing set of ordinary syscalls, and an allow-list that misses one breaks
them in ways that are hard to diagnose. What is refused is the set no sandbox needs and
that attacks use: kernel modules, kexec, BPF, perf, keyrings, userfaultfd, file handles
(``open_by_handle_at`` reaches the whole host filesystem), every mount-like call, new
namespaces, swap, reboot, clock and kernel-log access, io_uring, and terminal injection. Refusals
return EPERM (clone3 returns ENOSYS so glibc falls back to clone, whose flags we can see).

Sockets: only the address families ordinary work uses may be opened (``ALLOWED_FAMILIES``: unix,
IPv4, IPv6 and netlink, which ``getaddrinfo`` and ``ip`` use). Every other family answers
EPERM, like every refusal here: ``AF_VSOCK`` above all, which neither the network
namespace nor the host's nftables covers (on a VM it reaches the hypervisor's vsock services),
and the rarely used families that keep turning up in kernel advisories (``AF_ALG``, ``AF_TIPC``,
``AF_RDS``, ``AF_CAN``, Bluetooth, ...). ``AF_PACKET`` is refused too: its sockets need
CAP_NET_RAW over the sandbox's network namespace, which no sandbox has. The family is compared
on its low 32 bits only, as the kernel reads it (an ``int``): high bits set in the register
cannot slip a family past the filter.

Allowed on purpose: ``ptrace`` (and ``process_vm_readv``). Debuggers and tracers (gdb, strace,
py-spy) are ordinary work in a sandbox, and the kernel already confines them: a sandbox's
processes all run as its own host uid in its own PID namespace, so a tracer sees only its own
sandbox's processes and can attach only to them; another sandbox's processes (another uid, not
in the namespace) and the server's (root) are out of reach (``tests/security/test_escapes.py``).
Since Linux 4.8 a traced process cannot use ptrace to get around this filter either.
"""
from __future__ import annotations

import errno
import os
import tempfile

import pyseccomp as seccomp

DENIED = (
    "open_by_handle_at", "name_to_handle_at",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "chroot",
    "unshare", "setns",
    "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "quotactl_fd",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "iopl", "ioperm", "lookup_dcookie", "nfsservctl", "uselib", "vm86", "vm86old",
    "process_madvise", "kcmp",
    "io_uring_setup", "io_uring_enter", "io_uring_register",  # as Docker's default profile: kernel attack surface
)
# clone() flags that make a new namespace: USER, UTS, IPC, PID, NET, NS (mount), CGROUP, TIME.
_NAMESPACE_FLAGS = (0x10000000, 0x04000000, 0x08000000, 0x20000000, 0x40000000, 0x00020000,
                    0x02000000, 0x00000080)
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
ALLOWED_FAMILIES = (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK)
_FAMILIES = 64  # AF_MAX is 46 on Linux 6.x; a family above 63 the kernel refuses by itself


def build_filter() -> seccomp.SyscallFilter:
    flt = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    deny = seccomp.ERRNO(errno.EPERM)
    for name in DENIED:
        try:
            flt.add_rule(deny, name)
        except (RuntimeError, ValueError, OSError):
            pass  # not a syscall on this architecture (e.g. vm86 on x86-64)
    flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")  # its flags live in memory we cannot see
    for flag in _NAMESPACE_FLAGS:
        flt.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    for request in (_TIOCSTI, _TIOCLINUX):  # pushing keystrokes into someone else's terminal
        flt.add_rule(deny, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
    for family in range(_FAMILIES):
        if family not in ALLOWED_FAMILIES:
            for call in ("socket", "socketpair"):
                flt.add_rule(deny, call, seccomp.Arg(0, seccomp.MASKED_EQ, 0xFFFFFFFF, family))
    return flt


def write_program(directory: str) -> str:
    """Compile the filter to a BPF file in ``directory`` (atomically); return its path."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)  # the server's work dir: only the root part of the launch chain reads it
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".seccomp-")
    try:
        with os.fdopen(fd, "wb") as f:
            build_filter().export_bpf(f)
        path = os.path.join(directory, "sandbox.bpf")
        os.chmod(tmp, 0o600)  # opened by the launch chain as root, handed to bwrap as a descriptor
        os.replace(tmp, path)
        return path
    except BaseException:
        os.unlink(tmp)
        raise
