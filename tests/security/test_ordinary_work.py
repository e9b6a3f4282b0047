"""Ordinary work still works in the hardened sandbox (issue 11, Build 5)."""
from __future__ import annotations

import shutil

import pytest

from tests.helpers import claim_sandbox, create_session, events, output_bytes, run_to_exit, wait_event, write_input

WORK = r'''
set -e
cd /workspace
git init -q repo && cd repo
git -c user.email=a@b -c user.name=t commit -q --allow-empty -m first && git log --oneline | wc -l
python3 -c 'print("python", 6 * 7)'
python3 -m venv /workspace/venv
mkdir -p /workspace/pkg/hello && printf 'print("hello pkg")\n' > /workspace/pkg/hello/__init__.py
printf 'from setuptools import setup\nsetup(name="hello", version="0.1", packages=["hello"])\n' > /workspace/pkg/setup.py
# No network here (that is issue 12's): a local package, installed by pip into the workspace.
/workspace/venv/bin/pip install -q --no-index --no-use-pep517 /workspace/pkg 2>/dev/null
/workspace/venv/bin/python -c 'import hello'
printf '#include <stdio.h>\nint main(void){puts("compiled");return 0;}\n' > /tmp/c.c
cc -o /tmp/c /tmp/c.c && /tmp/c
echo tmp > /tmp/t && cat /tmp/t
if command -v node >/dev/null; then  # libuv: async fs, a child process, timers (what the agent CLIs use)
  node -e 'require("fs").promises.readFile("/tmp/t","utf8").then(t => require("child_process").exec("echo node-"+t.trim(), (e,o) => console.log(o.trim())))'
else
  echo node-tmp
fi
sleep 100 & pid=$!
ps -e -o pid=,comm= | grep -c sleep
kill $pid; wait $pid || echo "killed $?"
echo all-done
'''


def test_git_python_pip_compilers_tmp_ps_and_kill_work_inside(hardened, http):
    sb = claim_sandbox(http)
    exited, out = run_to_exit(http, sb, ["bash", "-c", WORK], timeout=240)
    text = out.decode(errors="replace")
    assert exited["exit_code"] == 0, text
    for expected in ("python 42", "hello pkg", "compiled", "tmp", "node-tmp", "killed 143", "all-done"):
        assert expected in text, text


def test_job_control_works_in_a_pty_shell(hardened, http):
    sb = claim_sandbox(http)
    spec = {"command": ["bash", "--norc", "-i"], "io": {"mode": "pty"}}
    sid = create_session(http, sb, spec)["id"]
    script = b"sleep 200 &\njobs\nkill %1\nwait\necho job-$((20+22))\nexit\n"
    write_input(http, sb, sid, "i1", data=script)
    wait_event(http, sb, sid, lambda e: e["type"] == "attempt.exited", timeout=30)
    text = output_bytes(events(http, sb, sid)).decode(errors="replace")
    assert "[1]" in text and "job-42" in text, text
    assert "no job control" not in text, text


HARNESSES = {"codex": ["codex", "--version"], "claude": ["claude", "--version"],
             "opencode": ["opencode", "--version"], "pi": ["pi", "--version"]}


@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_the_harness_clis_start_inside_where_installed(hardened, http, name):
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed on this machine")
    sb = claim_sandbox(http, "coding-agent")
    exited, out = run_to_exit(http, sb, HARNESSES[name], timeout=60)
    assert exited["exit_code"] == 0, out
