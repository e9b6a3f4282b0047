"""The official TypeScript SDK (``sandbox0@0.9.5`` from npm, unmodified) against our server.

``sdk_js/quickstart.mjs`` runs the SDK README's Quick Start (``sandbox.run("python", …)``) and
CMD Streaming (``cmdStream``, ``outputs()``, ``wait()``), the SDK's e2e smoke test and the file
calls of the SDKs' e2e tests. The package is installed with npm into a cache directory outside
the project, once; node 20 and npm must be on the machine.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import TOKEN
from tests.serverproc import ServerProcess

SDK_VERSION = "0.9.5"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sessiond-tests" / f"sandbox0-js-{SDK_VERSION}"
SCRIPT = Path(__file__).parent / "sdk_js" / "quickstart.mjs"
ENTRY = CACHE / "node_modules" / "sandbox0" / "dist" / "index.js"


def installed_sdk() -> Path:
    package = CACHE / "node_modules" / "sandbox0" / "package.json"
    if not package.exists() or json.loads(package.read_text())["version"] != SDK_VERSION:
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(CACHE), f"sandbox0@{SDK_VERSION}"],
                       check=True, capture_output=True, timeout=300)
    assert json.loads(package.read_text())["version"] == SDK_VERSION
    return ENTRY


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_the_typescript_sdk_quick_start_cmd_stream_and_files_work(tmp_path):
    assert shutil.which("node") and shutil.which("npm"), "node and npm are needed for the TypeScript SDK"
    entry = installed_sdk()
    with ServerProcess(tmp_path / "data", token=TOKEN, runtime="bwrap") as srv:
        env = dict(os.environ, SANDBOX0_TOKEN=TOKEN, SANDBOX0_BASE_URL=srv.url, SANDBOX0_JS_ENTRY=str(entry))
        run = subprocess.run(["node", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.replace("\r\n", "\n").splitlines()
    assert "Hello, Sandbox0!" in lines  # what the README's quick start prints
    assert sorted(lines[-5:-3]) == ["[stderr] warn", "[stdout] hello"], run.stdout  # two pipes: either order
    assert lines[-3:] == ["exit=0 state=stopped", "smoke ok", "files ok"], run.stdout


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_the_typescript_sdk_makes_a_team_key_that_claims_runs_and_is_deactivated(tmp_path):
    assert shutil.which("node") and shutil.which("npm"), "node and npm are needed for the TypeScript SDK"
    entry = installed_sdk()
    with ServerProcess(tmp_path / "data", token=TOKEN, runtime="bwrap") as srv:
        env = dict(os.environ, SANDBOX0_TOKEN=TOKEN, SANDBOX0_BASE_URL=srv.url, SANDBOX0_JS_ENTRY=str(entry))
        run = subprocess.run(["node", str(SCRIPT.with_name("api_keys.mjs"))], env=env, capture_output=True,
                             text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-2:] == ["team key ok", "deactivated ok"], run.stdout
