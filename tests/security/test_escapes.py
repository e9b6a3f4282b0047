"""A hostile tenant inside a hardened sandbox: every escape of issue 11 is tried for real.

Each probe runs as a session of a real server on ``--runtime bwrap`` and prints one line
per attempt (``name refused:<errno>`` or ``name ESCAPED:<what>``); the host is checked
from outside too (nothing appeared in /usr or /etc, nobody else's files changed).
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.helpers import claim_sandbox, create_session, events, output_bytes, run_to_exit, wait_event, workspace_dir
from tests.security.probes import ESCAPES, IPC_INTRUDER, IPC_OWNER

EXPECTED_REFUSED = (
    "remount_usr_rw", "remount_etc_rw", "write_usr", "write_etc", "name_to_handle_at",
    "open_by_handle_at", "proc_sys_drop_caches", "proc_sys_hostname", "proc_sys_core_pattern",
    "sysrq_trigger", "mount_cgroup2", "mount_cgroup_v1", "mount_proc", "sys_visible", "dmesg",
    "kmsg", "unshare_user", "unshare_mount", "inherited_fds", "host_processes", "host_root_uid",
    "capabilities",
)


def results(out: bytes) -> dict[str, str]:
    found = {}
    for line in out.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2:
            found[parts[0]] = parts[1]
    return found


def python(script: str, *args: str) -> list[str]:
    return ["/usr/bin/python3", "-c", script, *args]


def sandbox_dir(hardened, sandbox_id: str) -> Path:
    return hardened.data_dir / "sandboxes" / sandbox_id


def test_every_escape_attempt_from_inside_a_sandbox_is_refused(hardened, http):
    sb = claim_sandbox(http)
    exited, out = run_to_exit(http, sb, python(ESCAPES), timeout=60)
    print(out.decode())  # the probe table (pytest -s shows it)
    found = results(out)
    escaped = {name: how for name, how in found.items() if how.startswith("ESCAPED")}
    assert not escaped, out.decode()
    assert set(EXPECTED_REFUSED) <= set(found), out.decode()  # every probe really ran
    assert b"NoNewPrivs=1" in out and b"Seccomp=2" in out
    assert not os.path.exists("/usr/local/share/sessiond-probe")
    assert not os.path.exists("/etc/sessiond-probe")


def test_a_sandbox_is_root_inside_and_an_unprivileged_uid_outside(hardened, http):
    sb = claim_sandbox(http)
    exited, out = run_to_exit(http, sb, ["sh", "-c", "id -u; cat /proc/self/uid_map; touch /workspace/mine"])
    assert exited["exit_code"] == 0, out
    lines = out.decode().split("\n")
    inside, outside, count = lines[1].split()
    assert (lines[0], inside, count) == ("0", "0", "1")
    owner = (workspace_dir(hardened.data_dir, sb) / "mine").stat().st_uid
    assert owner == int(outside) >= 100_000
    other = claim_sandbox(http)
    exited, out = run_to_exit(http, other, ["cat", "/proc/self/uid_map"])
    assert int(out.split()[1]) != owner  # each sandbox has its own host uid


def test_no_path_reaches_another_sandbox_or_any_store(hardened, http):
    a, b = claim_sandbox(http), claim_sandbox(http)
    exited, _ = run_to_exit(http, a, ["sh", "-c", "echo secret-a > /workspace/x"])
    assert exited["exit_code"] == 0
    store = sandbox_dir(hardened, a) / "state" / "journal.sqlite"
    before = store.read_bytes() if store.exists() else b""
    targets = [str(workspace_dir(hardened.data_dir, a) / "x"), str(store), str(hardened.data_dir),
               f"/proc/1/root{workspace_dir(hardened.data_dir, a)}/x", "/workspace/../state"]
    script = "; ".join(f"cat {t} 2>/dev/null && echo LEAK; ls {t} 2>/dev/null && echo LEAK" for t in targets)
    script += "; rm -f /workspace/../state/journal.sqlite 2>/dev/null; find / -name journal.sqlite 2>/dev/null"
    exited, out = run_to_exit(http, b, ["sh", "-c", script], timeout=60)
    assert b"LEAK" not in out and b"secret-a" not in out and b"journal.sqlite" not in out, out
    assert (workspace_dir(hardened.data_dir, a) / "x").read_text() == "secret-a\n"
    assert store.exists()
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:  # the journal is intact
        assert db.execute("select count(*) from stored_events").fetchone()[0] > 0
    assert before == b"" or store.stat().st_size >= len(before) // 2


def test_sandboxes_see_neither_each_others_sysv_ipc_nor_abstract_sockets(hardened, http):
    a, b = claim_sandbox(http), claim_sandbox(http)
    name = os.urandom(4).hex()
    owner = create_session(http, a, {"command": python(IPC_OWNER, name)})["id"]
    wait_event(http, a, owner, lambda e: e["type"] == "output"
               and b"listening" in output_bytes(events(http, a, owner)), timeout=20)
    exited, out = run_to_exit(http, b, python(IPC_INTRUDER, name))
    found = results(out)
    assert found.get("shm", "").startswith("refused"), out
    assert found.get("shm_list", "").startswith("refused"), out
    assert _own_network(http, a, b)  # abstract unix sockets live in the network namespace
    assert found.get("abstract_socket", "").startswith("refused"), out


def _own_network(http, a: str, b: str) -> bool:
    seen = set()
    for sb in (a, b):
        _, out = run_to_exit(http, sb, ["readlink", "/proc/self/ns/net"])
        seen.add(out.strip())
    return len(seen) == 2 and os.readlink("/proc/self/ns/net").encode() not in seen
