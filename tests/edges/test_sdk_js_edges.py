"""Services, logs, events and metrics through the official TypeScript SDK (``sandbox0@0.9.5`` from
npm, as ``tests/api/test_sdk_js.py`` installs it), against a real server on the hardened runtime."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.api.test_sdk_js import installed_sdk
from tests.helpers import TOKEN
from tests.serverproc import ServerProcess

SCRIPT = Path(__file__).parent / "sdk_js" / "edges.mjs"


@pytest.mark.skipif(shutil.which("bwrap") is None or os.geteuid() != 0, reason="needs root and bubblewrap")
def test_the_typescript_sdk_sees_services_logs_events_and_metrics(tmp_path):
    assert shutil.which("node") and shutil.which("npm"), "node and npm are needed for the TypeScript SDK"
    entry = installed_sdk()
    with ServerProcess(tmp_path / "data", token=TOKEN, runtime="bwrap", extra_args=["--metrics-interval", "1"]) as srv:
        env = dict(os.environ, SANDBOX0_TOKEN=TOKEN, SANDBOX0_BASE_URL=srv.url, SANDBOX0_JS_ENTRY=str(entry))
        run = subprocess.run(["node", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    found = json.loads(run.stdout.strip().splitlines()[-1])
    # The TS model sends ingress.public as "_public": the service arrives private (contract §4.2).
    assert found["services"] == [{"id": "web", "publishable": False, "blockers": ["not_public", "manual_runtime"]}]
    assert found["servicesAgain"] == ["web"]
    assert found["logs"] == ["ts line 1", "ts line 2", "ts line 3"] and found["logStream"] == "stdout"
    assert found["firstLineType"] == "heartbeat"
    assert found["watched"] == "hello ts" and found["watchMs"] < 1000, found
    assert found["catalog"] == 14
    assert set(found["metrics"]) == {"sandbox.memory.usage", "sandbox.cpu.usage", "sandbox.process.count"}
    memory, cpu = found["memory"], found["cpu"]
    assert len(memory) >= 6 and max(memory) > memory[0] + 100 * 2**20, memory  # it took 160 MiB
    assert max(cpu[3:]) > max(cpu[:2]) + 0.05, cpu  # spinning against the idle baseline
    assert found["freshness"] == "fresh"
    assert found["actions"][0] == "sandbox.claimed" and "attempt.started" in found["actions"]
    assert found["actions"][-1] == "sandbox.paused"
    assert {"eventId", "schemaVersion", "integrity", "producer", "resource", "actor"} <= set(found["eventFields"])
