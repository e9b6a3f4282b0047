"""The official TypeScript SDK's sandbox tests (``tests/api/sdk_js/quickstart.mjs``: its README
quick start, cmdStream, e2e smoke and file calls) through either node of two, the sandbox
claimed on the other one."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.api.test_sdk_js import SCRIPT, installed_sdk

from .conftest import TOKEN


@pytest.mark.parametrize("through", ["node-a", "node-b"])
def test_the_typescript_sdk_sandbox_tests_pass_through_either_node(two_hardened_nodes, through):
    assert shutil.which("node") and shutil.which("npm"), "node and npm are needed for the TypeScript SDK"
    a, b = two_hardened_nodes
    near, far = (a, b) if through == "node-a" else (b, a)
    env = dict(os.environ, SANDBOX0_TOKEN=TOKEN, SANDBOX0_BASE_URL=near.url, SANDBOX0_CLAIM_URL=far.url,
               SANDBOX0_JS_ENTRY=str(installed_sdk()))
    run = subprocess.run(["node", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr + near.server.log_tail() + far.server.log_tail()
    lines = run.stdout.replace("\r\n", "\n").splitlines()
    assert "Hello, Sandbox0!" in lines
    assert lines[-3:] == ["exit=0 state=stopped", "smoke ok", "files ok"], run.stdout
