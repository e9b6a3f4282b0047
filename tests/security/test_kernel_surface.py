"""Kernel surface a sandbox must not reach, tried for real from inside one: socket families no
sandbox needs (AF_VSOCK reaches a VM's hypervisor, which neither the network namespace nor
nftables covers), and ptrace, which is allowed but reaches only the sandbox's own processes."""
from __future__ import annotations

import os

from tests.helpers import claim_sandbox, create_session, run_to_exit, wait_for, workspace_dir

from .test_limits import processes_of

PY = "/usr/bin/python3"
SOCKETS = r'''
import ctypes, errno, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def report(name, family, kind=socket.SOCK_STREAM, high_bits=0):
    # The raw syscall, so that high bits set above the int the kernel reads reach the filter too.
    fd = libc.syscall(41, ctypes.c_long(family | high_bits), ctypes.c_long(kind), ctypes.c_long(0))
    if fd >= 0:
        libc.close(fd)
        print(name, "opened")
    else:
        print(name, "refused:" + errno.errorcode.get(ctypes.get_errno(), "?"))

report("vsock", 40)
report("vsock_high_bits", 40, high_bits=1 << 32)
report("alg", 38, socket.SOCK_SEQPACKET)
report("packet", 17, socket.SOCK_RAW)
report("tipc", 30, socket.SOCK_RDM)
report("bluetooth", 31, socket.SOCK_RAW)
report("unix", 1)
report("inet", 2)
report("inet6", 10)
report("netlink", 16, socket.SOCK_RAW)
a, b = socket.socketpair()
print("socketpair_unix", "opened")
'''

PTRACE = r'''
import ctypes, errno, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_ATTACH, PTRACE_DETACH = 16, 17

def attach(name, pid):
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0:
        os.waitpid(pid, 0) if name == "own_child" else None
        libc.ptrace(PTRACE_DETACH, pid, None, None)
        print(name, "attached")
    else:
        print(name, "refused:" + errno.errorcode.get(ctypes.get_errno(), "?"))

child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
attach("own_child", child)
os.kill(child, 9)
for name, pid in zip(["other_sandbox", "server"], map(int, sys.argv[1:])):
    attach(name, pid)
'''


def results(out: bytes) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in out.decode().splitlines() if " " in line)


def test_socket_families_no_sandbox_needs_are_refused_inside_and_ordinary_ones_work(hardened, http):
    sb = claim_sandbox(http)
    exited, out = run_to_exit(http, sb, [PY, "-c", SOCKETS], timeout=60)
    got = results(out)
    print("\n" + out.decode().strip())
    assert exited["exit_code"] == 0, out
    for name in ("vsock", "vsock_high_bits", "alg", "packet", "tipc", "bluetooth"):
        assert got[name] == "refused:EPERM", (name, got)  # the filter's answer, not the kernel's
    for name in ("unix", "inet", "inet6", "netlink", "socketpair_unix"):
        assert got[name] == "opened", (name, got)


def test_ptrace_reaches_the_sandboxs_own_processes_and_nothing_else(hardened, http):
    tracer, other = claim_sandbox(http), claim_sandbox(http)
    create_session(http, other, {"command": ["sleep", "600"]})
    uid = workspace_dir(hardened.data_dir, other).stat().st_uid
    victims = wait_for(lambda: processes_of(uid), timeout=30, describe=lambda: "the other sandbox's sleep")
    exited, out = run_to_exit(http, tracer, [PY, "-c", PTRACE, str(max(victims)), str(hardened.proc.pid)],
                              timeout=60)
    got = results(out)
    print("\n" + out.decode().strip())
    assert exited["exit_code"] == 0, out
    assert got["own_child"] == "attached"  # debuggers work: allowed on purpose
    assert got["other_sandbox"].startswith("refused:") and got["server"].startswith("refused:"), got
    assert os.path.exists(f"/proc/{hardened.proc.pid}")
    for sb in (tracer, other):
        assert http.delete(f"/api/v1/sandboxes/{sb}").status_code == 202
