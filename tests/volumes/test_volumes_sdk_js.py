"""The seed's coding-agent recipe through the official TypeScript SDK (``sandbox0@0.9.5`` from npm,
as ``tests/api/test_sdk_js.py`` installs it) against the hardened runtime: a repository written in
a volume at /workspace is there for the next sandbox that binds the volume; a second RWO binding,
unknown ids and another team's volume are refused with one clear error each; the SDK's other volume
calls (files, watch, snapshots, restore, fork, open) parse what this server answers."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.api.test_sdk_js import installed_sdk
from tests.helpers import TOKEN

from .conftest import needs_root

pytestmark = needs_root
SCRIPT = Path(__file__).parent / "sdk_js" / "recipe.mjs"


def test_the_typescript_sdk_keeps_a_repository_in_a_volume_across_two_coding_agent_sandboxes(hardened_server):
    assert shutil.which("node") and shutil.which("npm"), "node and npm are needed for the TypeScript SDK"
    env = dict(os.environ, SANDBOX0_TOKEN=TOKEN, SANDBOX0_BASE_URL=hardened_server.url,
               SANDBOX0_JS_ENTRY=str(installed_sdk()))
    run = subprocess.run(["node", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["volume"] == {"accessMode": "RWO", "backend": "s0fs", "hasTeam": True}
    assert [m["state"] for m in found["bootstrapMounts"]] == ["mounted"]
    assert found["bootstrapMounts"][0]["at"] == "/workspace"
    assert found["firstLog"] == "first commit"
    assert found["betweenSandboxes"] == [".git", "main.py"] and found["mainPy"] == 'print("hi")\n'
    assert found["secondLog"] == ["second commit", "first commit"], found  # a clean tree, then one more commit

    second = found["secondBinding"]
    assert (second["status"], second["code"]) == (409, "conflict"), second
    assert "RWO" in second["message"] and "already mounted" in second["message"], second
    assert found["sandboxesAfterRefusal"] == 1  # the refused claim left no sandbox
    busy = found["busyDelete"]
    assert (busy["status"], busy["code"], busy["message"]) == (409, "conflict", "volume has active mounts"), busy
    for refused in ("strangerGet", "strangerClaim", "strangerDelete", "unknownGet", "unknownClaim"):
        assert (found[refused]["status"], found[refused]["code"]) == (404, "not_found"), (refused, found[refused])
    assert found["strangerList"] == []
    assert found["deleted"] == {"success": True, "data": {"deleted": True}}  # the SDK returns the envelope
    assert found["afterDelete"]["status"] == 404 and found["listedAfter"] == 0
    print(f"\nclaim of coding-agent with a volume at /workspace (TypeScript SDK, bwrap): "
          f"{found['claimWithVolumeMs']:.0f} ms")


def test_the_typescript_sdks_volume_file_snapshot_and_fork_calls_parse_our_answers(hardened_server):
    env = dict(os.environ, SANDBOX0_TOKEN=TOKEN, SANDBOX0_BASE_URL=hardened_server.url,
               SANDBOX0_JS_ENTRY=str(installed_sdk()))
    run = subprocess.run(["node", str(SCRIPT.with_name("volume_calls.mjs"))], env=env, capture_output=True,
                         text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    found = json.loads(run.stdout.strip().splitlines()[-1])
    # mkdir answers 201 {"created": true}; the SDK parses it with the write's model, which keeps only "written".
    assert found["mkdir"] == {} and found["write"] == {"written": True}
    assert found["read"] == "print(1)\n"
    assert found["stat"] == {"path": "/src/pkg/main.py", "type": "file", "size": 9}
    assert found["move"] == {"moved": True}
    assert found["list"] == ["dir:pkg", "file:app.py"]
    assert found["archive"] == {"files": 1, "directories": 0, "symlinks": 0, "bytes": 7}
    assert found["tarred"] == "tarred\n"
    assert found["watchId"] is True and found["watched"] in ("create", "write", "rename"), found
    assert found["snapshot"] == {"name": "before", "volumeId": True, "sized": True, "created": True}
    assert found["listedSnapshots"] == ["before"] and found["gotSnapshot"] == "app.py only"
    assert found["fork"] == {"source": True, "accessMode": "ROX", "app": "print(2)\n"}  # the files at the fork
    assert found["restored"] == {"status": "restored"}
    assert found["afterRestore"] == "print(1)\n" and found["tarBack"] == "tarred\n"  # the snapshot's files
    assert found["fromSnapshot"] == "print(1)\n"
    assert found["deletedSnapshot"] == {"deleted": True}
    assert (found["snapshotGone"]["status"], found["snapshotGone"]["code"]) == (404, "not_found")
    assert found["opened"] == "RWO" and found["closed"]["status"] == 404  # open(): close() deletes it
    assert found["seenInside"] == "print(1)\n"
    assert (found["busy"]["status"], found["busy"]["message"]) == (409, "volume has active mounts")
    assert found["forced"] == {"deleted": True} and found["left"] == 0
